"""Worktree isolation: parallel writing agents, merge on approval, cleanup on rejection, a dirty tree untouched."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from agents_fixtures import claude_project, git
from kit import KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]

WRITER = """---
name: writer
description: Writes files in its own worktree
tools: Bash, Read
isolation: worktree
---
You write files.
"""


def _project(project: Path) -> None:
    claude_project(project)
    (project / ".claude" / "agents" / "writer.md").write_text(WRITER)
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "writer agent")


def _task(n: int) -> dict[str, Any]:
    return {
        "id": f"toolu_w{n}",
        "name": "Task",
        "input": {"description": f"w{n}", "prompt": f"write {n}", "subagent_type": "writer"},
    }


def _write(name: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "Bash", "input": {"command": f"echo {name} > {name}.txt && sleep 1.5"}}]}


def _worktrees(project: Path) -> list[str]:
    return [
        line for line in git(project, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")
    ]


def _branches(project: Path) -> list[str]:
    return [b.strip("* ").strip() for b in git(project, "branch").splitlines()]


def test_two_parallel_writers_both_merged(project: Path, fake_llm: Start, keel: Keel) -> None:
    _project(project)
    # both children ask first (one Bash each), then both answer: any order of arrival fits the script
    server = fake_llm([{"tool_calls": [_task(1), _task(2)]}, _write("alpha"), _write("beta"), "wrote", "wrote", "ok"])
    run = keel("-p", "write both", "--permission-mode", "bypassPermissions", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert (project / "alpha.txt").read_text() == "alpha\n" and (project / "beta.txt").read_text() == "beta\n"
    assert git(project, "status", "--porcelain").strip() == ""  # merged and committed, nothing stray
    assert len(_worktrees(project)) == 1 and not [b for b in _branches(project) if b.startswith("keel/")]
    log = git(project, "log", "--format=%s")
    assert log.count("keel agent") == 2 and log.count("Merge branch 'keel/agent-") == 2
    results = [
        b
        for m in server.cursor.requests[-1]["body"]["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert all("Merged branch keel/agent-" in json.dumps(b) for b in results)
    assert any("alpha.txt" in json.dumps(b) for b in results)  # the diff is shown


def test_rejected_changes_leave_no_worktree_or_branch(
    project: Path, tmp_path: Path, fake_llm: Start, keel: Keel
) -> None:
    _project(project)
    settings = tmp_path / "deny-merge.json"
    settings.write_text(json.dumps({"permissions": {"deny": ["Bash(git merge:*)"]}}))
    server = fake_llm([{"tool_calls": [_task(1)]}, _write("gamma"), "wrote", "ok"])
    run = keel(
        "-p",
        "write",
        "--permission-mode",
        "bypassPermissions",
        "--settings",
        str(settings),
        env=wire_env(server, "anthropic"),
    )
    assert run.code == 0, run.stderr
    assert not (project / "gamma.txt").exists()
    assert len(_worktrees(project)) == 1 and not [b for b in _branches(project) if b.startswith("keel/")]
    assert not list((project / ".keel" / "worktrees").glob("*"))
    assert "Changes rejected" in json.dumps(server.cursor.requests[-1]["body"]["messages"][-1])


def test_a_dirty_main_tree_is_never_touched(project: Path, fake_llm: Start, keel: Keel) -> None:
    _project(project)
    (project / "a.py").write_text("def f():\n    return 2  # my uncommitted edit\n")
    (project / "notes.txt").write_text("untracked notes\n")
    server = fake_llm([{"tool_calls": [_task(1)]}, _write("delta"), "wrote", "ok"])
    run = keel("-p", "write", "--permission-mode", "bypassPermissions", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert (project / "a.py").read_text() == "def f():\n    return 2  # my uncommitted edit\n"
    assert (project / "notes.txt").read_text() == "untracked notes\n"
    assert not (project / "delta.txt").exists()
    [branch] = [b for b in _branches(project) if b.startswith("keel/")]  # the agent's work is kept on its branch
    assert git(project, "show", f"{branch}:delta.txt") == "delta\n"
    assert len(_worktrees(project)) == 1
    assert "uncommitted changes" in json.dumps(server.cursor.requests[-1]["body"]["messages"][-1])


def test_a_child_writing_in_its_worktree_is_not_asked(project: Path, fake_llm: Start, keel: Keel) -> None:
    """An allowed Bash command that writes in the child's working directory, its worktree under
    .keel/worktrees/<id>, must not meet the protected .keel/ (an always-ask: under -p, a denial).
    Passes once the sandbox branch's carve-out is merged."""
    _project(project)
    writes = [{"name": "Bash", "input": {"command": f"echo {n} > f{n}.txt"}} for n in (1, 2, 3)]
    server = fake_llm([{"tool_calls": [_task(1)]}, {"tool_calls": writes}, "wrote", "ok"])
    run = keel(
        "-p", "write", "--permission-mode", "acceptEdits", "--allowedTools", "Bash", env=wire_env(server, "anthropic")
    )
    assert run.code == 0, run.stderr
    assert "not granted" not in json.dumps(server.cursor.requests[2]["body"]["messages"])
    assert [(project / f"f{n}.txt").read_text() for n in (1, 2, 3)] == ["1\n", "2\n", "3\n"]  # merged
    assert len(_worktrees(project)) == 1 and not [b for b in _branches(project) if b.startswith("keel/")]
