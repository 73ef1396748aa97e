"""Which tools a permission name covers, as Claude Code 2.1.328 decides (issue #33: a bare ``Edit`` in
``--allowedTools`` let keel run Write).

Recorded with the real Claude Code against a scripted model (/work/shared/tools/fakellm.py with
FAKELLM_PLAN: one turn that reads src/e.txt and src/n.ipynb, then calls Write src/w.txt, Edit
src/e.txt, NotebookEdit src/n.ipynb and Read src/r.txt in parallel)::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \\
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p go --allowedTools RULE
    ... claude -p go --allowedTools Write,Edit,NotebookEdit --disallowedTools RULE

    --allowedTools  Edit          Edit runs; Write and NotebookEdit: "Claude requested permissions
                                  to write to .../w.txt, but you haven't granted it yet."
    --allowedTools  Write         Write runs; Edit and NotebookEdit ask
    --allowedTools  NotebookEdit  NotebookEdit runs; Write and Edit ask
    --allowedTools  Edit(*)       as bare Edit
    --allowedTools  Edit(src/**)  Write, Edit and NotebookEdit run (also Edit(**))
    --allowedTools  Read, Bash    no file-writing tool runs
    --disallowedTools Edit        Edit is gone ("No such tool available: Edit. Edit is disabled for
                                  this session"); Write and NotebookEdit still run
    --disallowedTools Edit(src/**) Write, Edit, NotebookEdit denied ("File is in a directory that is
                                  denied by your permission settings")
    --disallowedTools Read(src/**) Read denied, and Write/Edit too ("File is covered by a Read deny
                                  rule ... cannot be written")

(2.1.328 offers no MultiEdit, Grep, Glob or LS: "No such tool available".) keel matches the allow
side: a bare allow rule names one tool and no other tool that writes files. On the deny side keel
keeps the family: a bare ``Edit`` deny also stops Write, MultiEdit and NotebookEdit (a deliberate
difference; never weaken a deny)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentkeel.policy.permissions import PermissionEngine
from agentkeel.tools import builtin_tools

TOOLS = {t.name: t for t in builtin_tools()}
WRITERS = ("Write", "Edit", "MultiEdit", "NotebookEdit")


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    for name in ("e.txt", "m.txt", "r.txt"):
        (project / "src" / name).write_text("alpha beta\n")
    cell = {"cell_type": "code", "id": "c1", "metadata": {}, "source": ["x=1"], "outputs": [], "execution_count": None}
    (project / "src" / "n.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4}))
    return project


def _inputs(project: Path) -> dict[str, dict[str, Any]]:
    src = project / "src"
    return {
        "Write": {"file_path": str(src / "w.txt"), "content": "written\n"},
        "Edit": {"file_path": str(src / "e.txt"), "old_string": "alpha", "new_string": "EDITED"},
        "MultiEdit": {"file_path": str(src / "m.txt"), "edits": [{"old_string": "alpha", "new_string": "M"}]},
        "NotebookEdit": {"notebook_path": str(src / "n.ipynb"), "cell_id": "c1", "new_source": "x=2"},
        "Read": {"file_path": str(src / "r.txt")},
        "Grep": {"pattern": "beta", "path": str(src)},
        "Glob": {"pattern": "*.txt", "path": str(src)},
        "LS": {"path": str(src)},
    }


def _verdicts(tmp_path: Path, **rules: list[str]) -> dict[str, str]:
    project = _project(tmp_path)
    engine = PermissionEngine(cwd=str(project), home=str(tmp_path / "home"), channel="headless")
    for kind, texts in rules.items():
        engine.add(texts, kind, "--allowedTools" if kind == "allow" else "--disallowedTools", "cli")  # type: ignore[arg-type]
    return {name: engine.decide(name, inp, TOOLS[name]).decision for name, inp in _inputs(project).items()}


@pytest.mark.parametrize(
    ("rule", "runs"),
    [
        ("Edit", {"Edit"}),
        ("Edit(*)", {"Edit"}),
        ("Write", {"Write"}),
        ("NotebookEdit", {"NotebookEdit"}),
        ("MultiEdit", {"MultiEdit"}),
        ("Read", set()),
        ("Bash", set()),
        ("Edit(src/**)", set(WRITERS)),
        ("Edit(**)", set(WRITERS)),
    ],
)
def test_an_allow_rule_covers_the_writing_tools_claude_code_lets_it(tmp_path: Path, rule: str, runs: set[str]) -> None:
    verdicts = _verdicts(tmp_path, allow=[rule])
    assert {name for name in WRITERS if verdicts[name] == "allow"} == runs, verdicts
    # reading tools inside the project run whatever the rule (Claude Code: Read ran in every case)
    assert all(verdicts[name] == "allow" for name in ("Read", "Grep", "Glob", "LS")), verdicts


def test_a_bash_deny_rule_takes_no_file_tool(tmp_path: Path) -> None:
    """Claude Code, ``--disallowedTools Bash``: Write, Edit and NotebookEdit ran, Read too."""
    verdicts = _verdicts(tmp_path, allow=list(WRITERS), deny=["Bash"])
    assert all(verdict == "allow" for verdict in verdicts.values()), verdicts


@pytest.mark.parametrize("rule", ["Edit", "Edit(*)", "Edit(src/**)"])
def test_an_edit_deny_rule_still_covers_every_tool_that_writes_files(tmp_path: Path, rule: str) -> None:
    """Claude Code lets Write run past a bare ``Edit`` deny; keel does not (a deny is never narrowed)."""
    verdicts = _verdicts(tmp_path, allow=list(WRITERS), deny=[rule])
    assert all(verdicts[name] == "deny" for name in WRITERS), verdicts
    assert verdicts["Read"] == "allow", verdicts


def test_a_read_deny_rule_with_a_path_covers_the_reading_tools(tmp_path: Path) -> None:
    verdicts = _verdicts(tmp_path, deny=["Read(src/**)"])
    assert all(verdicts[name] == "deny" for name in ("Read", "Grep", "Glob", "LS")), verdicts


def test_the_agent_alias_is_still_one_tool_for_a_bare_allow(tmp_path: Path) -> None:
    """``Agent`` and ``Task`` name one tool (a bare allow of either covers both)."""
    for rule in ("Agent", "Task"):
        engine = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path), channel="headless")
        engine.add([rule], "allow", "--allowedTools", "cli")
        for name in ("Task", "Agent"):
            assert engine.decide(name, {"subagent_type": "x", "prompt": "p"}).decision == "allow", (rule, name)


def test_a_read_deny_rule_with_a_path_also_stops_writing_there(tmp_path: Path) -> None:
    """Claude Code, ``--allowedTools Write,Edit,NotebookEdit --disallowedTools 'Read(src/**)'``: Write
    src/w.txt and Edit src/e.txt fail with "File is covered by a Read deny rule in your permission
    settings and cannot be written/edited"; keel let both run."""
    verdicts = _verdicts(tmp_path, allow=list(WRITERS), deny=["Read(src/**)"])
    assert all(verdicts[name] == "deny" for name in WRITERS), verdicts
    elsewhere = _verdicts(tmp_path / "b", allow=list(WRITERS), deny=["Read(docs/**)"])
    assert all(elsewhere[name] == "allow" for name in WRITERS), elsewhere
