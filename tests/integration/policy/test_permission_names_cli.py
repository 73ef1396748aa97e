"""A bare ``Edit`` in ``--allowedTools`` runs Edit and nothing else that writes files, as Claude Code
2.1.328 (issue #33). Through the keel CLI against the scripted model.

Recorded with the real Claude Code (/work/shared/tools/fakellm.py, FAKELLM_PLAN: read src/e.txt and
src/n.ipynb, then Write src/w.txt, Edit src/e.txt, NotebookEdit src/n.ipynb in one turn)::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \\
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p go --allowedTools Edit

Edit: "The file .../src/e.txt has been updated successfully."; Write and NotebookEdit: "Claude
requested permissions to write to .../src/w.txt, but you haven't granted it yet." (is_error), the
files untouched. With ``--allowedTools 'Edit(src/**)'`` all three ran. (2.1.328 has no MultiEdit;
keel's follows Write: it needs its own name or a path rule.) The full matrix is in
tests/unit/policy/permissions/test_rule_names_cover.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kit import KeelRun


def _project(project: Path) -> dict[str, Any]:
    src = project / "src"
    src.mkdir()
    (src / "e.txt").write_text("alpha beta\n")
    (src / "m.txt").write_text("alpha beta\n")
    cell = {"cell_type": "code", "id": "c1", "metadata": {}, "source": ["x=1"], "outputs": [], "execution_count": None}
    (src / "n.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    reads = [{"name": "Read", "input": {"file_path": f"src/{n}"}} for n in ("e.txt", "m.txt", "n.ipynb")]
    edits = [{"old_string": "alpha", "new_string": "MULTI"}]
    writes = [
        {"name": "Write", "input": {"file_path": "src/w.txt", "content": "written\n"}},
        {"name": "Edit", "input": {"file_path": "src/e.txt", "old_string": "alpha", "new_string": "EDITED"}},
        {"name": "MultiEdit", "input": {"file_path": "src/m.txt", "edits": edits}},
        {
            "name": "NotebookEdit",
            "input": {"notebook_path": str(src / "n.ipynb"), "cell_id": "c1", "new_source": "x=2"},
        },
    ]
    script = project.parent / "script.json"
    script.write_text(json.dumps({"steps": [{"tool_calls": reads}, {"tool_calls": writes}, "done"]}))
    return {"model": f"scripted:{script}"}


def _changed(project: Path) -> set[str]:
    src = project / "src"
    out = set()
    if (src / "w.txt").exists():
        out.add("Write")
    if "EDITED" in (src / "e.txt").read_text():
        out.add("Edit")
    if "MULTI" in (src / "m.txt").read_text():
        out.add("MultiEdit")
    if "x=2" in (src / "n.ipynb").read_text():
        out.add("NotebookEdit")
    return out


@pytest.mark.parametrize(
    ("allowed", "ran"),
    [
        ("Edit", {"Edit"}),
        ("Write", {"Write"}),
        ("Edit(src/**)", {"Write", "Edit", "MultiEdit", "NotebookEdit"}),
    ],
)
def test_allowed_tools_run_what_claude_code_runs(
    allowed: str, ran: set[str], project: Path, keel: Callable[..., KeelRun]
) -> None:
    script = _project(project)
    run = keel("-p", "edit", "--model", script["model"], "--allowedTools", allowed)
    assert run.code == 0, run.stderr
    assert _changed(project) == ran


def test_a_bare_edit_deny_still_stops_every_tool_that_writes(project: Path, keel: Callable[..., KeelRun]) -> None:
    """Claude Code, ``--allowedTools Write,Edit,NotebookEdit --disallowedTools Edit``: Write and
    NotebookEdit still ran. keel denies every tool of the Edit family (a deny is never narrowed)."""
    script = _project(project)
    run = keel(
        "-p", "edit", "--model", script["model"], "--permission-mode", "acceptEdits", "--disallowedTools", "Edit"
    )
    assert run.code == 0, run.stderr
    assert _changed(project) == set()
