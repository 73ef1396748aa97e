"""NotebookEdit, the "add a built-in tool" change of issue #32, done for real: the tool is one new
module (tools/notebook.py) registered in tools/__init__.py, with its edit shape in tools/views.py.
Its permission rule, checkpoints, context tracking, diffs and memory summary come from what it
declares (``Effects``) and from tools/views.py; nothing else was edited for it.

Through the real `keel` CLI and the scripted model: it edits a real notebook keeping the rest
intact, a rewind restores the notebook's bytes, and ``permissions.deny: ["Edit(*.ipynb)"]``
refuses it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.core.tools import ToolError
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.tools import builtin_tools, effects_of
from agentkeel.tools.notebook import NotebookEditInput, edit_notebook
from agentkeel.tools.views import after, observe
from agentkeel.ui.tui.diffs import diff_for_call
from conftest import KeelRun, session_files, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]
BYPASS = ("--permission-mode", "bypassPermissions")

NOTEBOOK = {
    "cells": [
        {
            "id": "a1",
            "cell_type": "code",
            "execution_count": 3,
            "metadata": {"tags": ["setup"]},
            "outputs": [{"name": "stdout", "output_type": "stream", "text": ["1\n"]}],
            "source": ["x = 1\n", "print(x)"],
        },
        {"id": "b2", "cell_type": "markdown", "metadata": {}, "source": ["# Results"]},
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def _notebook(project: Path) -> Path:
    nb = project / "analysis.ipynb"
    nb.write_text(json.dumps(NOTEBOOK, indent=1) + "\n")
    return nb


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def call(name: str, **inp: Any) -> dict[str, Any]:
    return {"text": "ok", "tool_calls": [{"name": name, "input": inp}]}


def results(server: FakeLLMServer) -> list[dict[str, Any]]:
    """Every tool_result block the model was sent, in order."""
    out: list[dict[str, Any]] = []
    for request in server.cursor.requests:
        last = request["body"]["messages"][-1]
        if isinstance(last.get("content"), list):
            out += [b for b in last["content"] if b.get("type") == "tool_result"]
    return out


def _text(block: dict[str, Any]) -> str:
    content = block.get("content")
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])


def test_notebook_edit_edits_a_real_notebook_and_a_rewind_restores_it(
    project: Path, fake_llm: Start, keel: Keel
) -> None:
    nb = _notebook(project)
    original = sha(nb)
    server = fake_llm(
        {
            "steps": [
                call("Read", file_path=str(nb)),
                call("NotebookEdit", notebook_path=str(nb), cell_id="a1", new_source="x = 2\nprint(x * 10)"),
                call(
                    "NotebookEdit",
                    notebook_path=str(nb),
                    cell_id="b2",
                    new_source="Ten times x.",
                    cell_type="markdown",
                    edit_mode="insert",
                ),
                "edited",
            ]
        }
    )
    run = keel("-p", "change the notebook", "--output-format", "json", *BYPASS, env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    sid = run.json()["session_id"]
    assert _text(results(server)[1]).startswith("Updated cell a1 with x = 2")
    edited = json.loads(nb.read_text())
    a1, b2, new = edited["cells"]
    assert a1["source"] == "x = 2\nprint(x * 10)" and a1["outputs"] == [] and a1["execution_count"] is None
    assert a1["metadata"] == {"tags": ["setup"]} and a1["id"] == "a1"  # the rest of the cell is kept
    assert b2 == NOTEBOOK["cells"][1]  # other cells untouched
    assert new["cell_type"] == "markdown" and new["source"] == "Ten times x." and new["id"]
    assert edited["metadata"] == NOTEBOOK["metadata"] and edited["nbformat_minor"] == 5
    assert not list(project.glob(".*.tmp*")), "the atomic write left its temporary file"

    # each call was checkpointed from the tool's declared effects (it writes notebook_path)
    [log] = session_files(project.parent / "keelhome")
    events = [json.loads(line) for line in log.read_text().splitlines()]
    checkpoints = [e for e in events if e["type"] == "checkpoint"]
    assert [c["tool"] for c in checkpoints] == ["NotebookEdit", "NotebookEdit"]
    assert all(list(c["files"]) == [str(nb)] for c in checkpoints)
    turns = keel("sessions", "turns", sid, "--json").json()
    assert turns[0]["files_changed"] == [str(nb)]

    out = keel("-p", "/rewind 0 code", "-r", sid, *BYPASS, env=wire_env(server, "anthropic"))
    assert out.code == 0, out.stderr
    assert sha(nb) == original


def test_notebook_edit_needs_a_read_first_and_an_absolute_ipynb_path(
    project: Path, fake_llm: Start, keel: Keel
) -> None:
    nb = _notebook(project)
    original = sha(nb)
    (project / "notes.txt").write_text("plain\n")
    server = fake_llm(
        {
            "steps": [
                call("NotebookEdit", notebook_path=str(nb), cell_id="a1", new_source="unread"),
                call("NotebookEdit", notebook_path="analysis.ipynb", cell_id="a1", new_source="relative"),
                call("Read", file_path=str(project / "notes.txt")),
                call("NotebookEdit", notebook_path=str(project / "notes.txt"), cell_id="a1", new_source="no"),
                call("Read", file_path=str(nb)),
                call("NotebookEdit", notebook_path=str(nb), cell_id="zz", new_source="nowhere"),
                call("NotebookEdit", notebook_path=str(nb), new_source="no type", edit_mode="insert"),
                "refused",
            ]
        }
    )
    run = keel("-p", "try", *BYPASS, env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    seen = [(r.get("is_error", False), _text(r)) for r in results(server)]
    assert seen[0][0] and "has not been read yet" in seen[0][1]
    assert seen[1][0] and "absolute path" in seen[1][1]
    assert seen[3][0] and "must be a Jupyter notebook" in seen[3][1]
    assert seen[5][0] and 'Cell with ID "zz" not found' in seen[5][1]
    assert seen[6][0] and "cell_type is required" in seen[6][1]
    assert sha(nb) == original and (project / "notes.txt").read_text() == "plain\n"


def test_an_edit_rule_denying_notebooks_refuses_notebook_edit(project: Path, fake_llm: Start, keel: Keel) -> None:
    nb = _notebook(project)
    original = sha(nb)
    (project / ".keel").mkdir()
    (project / ".keel" / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Edit(*.ipynb)"]}}))
    server = fake_llm(
        {
            "steps": [
                call("Read", file_path=str(nb)),
                call("NotebookEdit", notebook_path=str(nb), cell_id="a1", new_source="denied"),
                call("Write", file_path=str(project / "other.txt"), content="allowed\n"),
                "done",
            ]
        }
    )
    run = keel("-p", "edit it", "--output-format", "json", *BYPASS, env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    seen = results(server)
    assert seen[1].get("is_error") and "Edit(*.ipynb)" in _text(seen[1]), _text(seen[1])
    assert sha(nb) == original
    assert (project / "other.txt").read_text() == "allowed\n"  # the rule is about notebooks only
    assert [d["tool_name"] for d in run.json()["permission_denials"]] == ["NotebookEdit"]


# --- what the tool declares, and how the rest of keel sees it (no keel module names it) -------------


def test_notebook_edit_declares_its_effects_and_is_shipped() -> None:
    effects = effects_of("NotebookEdit")
    assert effects.rule == "Edit" and effects.writes and effects.path_fields == ("notebook_path",)
    [tool] = [t for t in builtin_tools() if t.name == "NotebookEdit"]
    assert tool.effects == effects  # the shipped stand-in carries them: no module is imported to ask
    assert tool.paths({"notebook_path": "nb.ipynb"}, Path("/work")) == [Path("/work/nb.ipynb")]


def test_the_edit_itself_keeps_everything_else(tmp_path: Path) -> None:
    text = json.dumps(NOTEBOOK, indent=2) + "\n"
    out, message = edit_notebook(text, NotebookEditInput(notebook_path="/n.ipynb", cell_id="cell-1", new_source="x"))
    assert message == "Updated cell cell-1 with x"  # Claude Code's index form of a cell id
    assert out.splitlines()[1].startswith('  "cells"')  # the notebook's indentation kept
    data = json.loads(out)
    assert data["cells"][1]["source"] == "x" and data["cells"][0] == NOTEBOOK["cells"][0]
    out, message = edit_notebook(
        text, NotebookEditInput(notebook_path="/n.ipynb", cell_id="a1", new_source="", edit_mode="delete")
    )
    assert message == "Deleted cell a1" and [c["id"] for c in json.loads(out)["cells"]] == ["b2"]
    with pytest.raises(ToolError, match="not a valid Jupyter notebook"):
        edit_notebook("{}", NotebookEditInput(notebook_path="/n.ipynb", cell_id="a1", new_source=""))


def test_diffs_and_memory_see_a_notebook_edit(tmp_path: Path) -> None:
    nb = _notebook(tmp_path)
    inp = {"notebook_path": str(nb), "cell_id": "a1", "new_source": "x = 99"}
    diff = diff_for_call("NotebookEdit", inp, tmp_path)
    assert '+   "source": "x = 99"' in diff.splitlines() and '-    "x = 1\\n",' in diff.splitlines()
    assert after("NotebookEdit", {**inp, "cell_id": "nope"}, nb.read_text()) is None  # an invalid call: no diff
    text, meta = observe("NotebookEdit", inp, "Updated cell a1 with x = 99", False)
    assert meta["file_path"] == str(nb) and meta["file_type"] == "ipynb" and "x = 99" in text
