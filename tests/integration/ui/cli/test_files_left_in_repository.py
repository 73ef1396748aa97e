"""What keel leaves in a repository (issue 31, item 13): its local files are git-ignored by a ``.keel/.gitignore``
it writes itself, and worktrees left by a killed session are named, in one line, when a session is resumed."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from agents_fixtures import git
from kit import KEEL, KeelRun, wait_until, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]


@pytest.fixture
def repo(project: Path) -> Path:
    (project / "a.txt").write_text("one\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "first")
    return project


def test_keels_local_files_leave_git_status_clean(repo: Path, fake_llm: Start, keel: Keel) -> None:
    added = keel("mcp", "add", "-s", "local", "tools", "--", "echo", "hi")
    assert added.code == 0, added.stderr
    assert (repo / ".keel" / "settings.local.json").is_file()
    server = fake_llm([{"tool_calls": [{"name": "Bash", "input": {"command": "echo new > new.txt"}}]}, "done"])
    run = keel("-w", "feat", "-p", "write", "--permission-mode", "acceptEdits", "--allowedTools", "Bash",
               env=wire_env(server, "anthropic"))  # fmt: skip
    assert run.code == 0, run.stderr
    assert (repo / ".keel" / "worktrees" / "feat" / "new.txt").is_file()  # kept, as a -p session's worktree is
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert not (repo / ".gitignore").exists()  # the user's own .gitignore is never written
    ignored = (repo / ".keel" / ".gitignore").read_text()
    assert "/settings.local.json" in ignored and "/worktrees/" in ignored
    # a shared project file in .keel/ is still seen by git
    (repo / ".keel" / "settings.json").write_text("{}\n")
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == "?? .keel/settings.json\n"


def test_an_existing_keel_gitignore_is_left_as_it_is(repo: Path, keel: Keel) -> None:
    (repo / ".keel").mkdir()
    (repo / ".keel" / ".gitignore").write_text("# mine\n")
    assert keel("mcp", "add", "-s", "local", "tools", "--", "echo", "hi").code == 0
    assert (repo / ".keel" / ".gitignore").read_text() == "# mine\n"


def test_a_resumed_session_names_the_worktree_a_killed_session_left(
    repo: Path, fake_llm: Start, keel: Keel, tmp_path: Path
) -> None:
    server = fake_llm(["hello"])
    first = keel("-p", "hi", env=wire_env(server, "anthropic"))
    assert first.code == 0, first.stderr
    assert "worktree" not in keel("-c", "-p", "again", env=wire_env(fake_llm(["ok"]), "anthropic")).stderr
    slow = fake_llm(
        [{"tool_calls": [{"name": "Bash", "input": {"command": "echo work > w.txt && sleep 120"}}]}, "done"]
    )
    killed = subprocess.Popen(
        [KEEL, "-w", "feat", "-p", "work", "--permission-mode", "acceptEdits", "--allowedTools", "Bash"],
        cwd=repo, env={**os.environ, **wire_env(slow, "anthropic")}, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:

        def working() -> bool:
            assert killed.poll() is None, "the session ended before it started its work"
            return (repo / ".keel" / "worktrees" / "feat" / "w.txt").exists()

        wait_until(working, 60, "the session to start its work", interval=0.1)
    finally:
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait()
    resumed = keel("-c", "-p", "go on", env=wire_env(fake_llm(["going on"]), "anthropic"))
    assert resumed.code == 0, resumed.stderr
    lines = [line for line in resumed.stderr.splitlines() if "worktree" in line]
    assert len(lines) == 1, resumed.stderr
    assert lines[0].startswith("keel: 1 keel worktree(s) left")
    assert ".keel/worktrees/feat (branch keel/feat)" in lines[0]
    # going on in that worktree by name does not name it as left
    again = keel("-w", "feat", "-c", "-p", "go on", env=wire_env(fake_llm(["ok"]), "anthropic"))
    assert "left in this repository" not in again.stderr, again.stderr
