"""``keel -w NAME``: the session in its own git worktree; diff, merge / keep / discard at the end."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect
import pytest

from agentkeel.models.fake.server import FakeLLMServer
from agents_fixtures import first_user_text, git
from kit import KEEL, KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]


@pytest.fixture
def repo(project: Path) -> Path:
    (project / "a.txt").write_text("one\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "first")
    return project


def _worktrees(project: Path) -> list[str]:
    out = git(project, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")]


def _branches(project: Path) -> list[str]:
    return [b.strip("*+ ") for b in git(project, "branch").splitlines()]


def _write(name: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "Bash", "input": {"command": f"echo {name} > {name}.txt"}}]}


def test_print_mode_keeps_the_work_on_its_branch_and_says_how_to_merge(repo: Path, fake_llm: Start, keel: Keel) -> None:
    (repo / "a.txt").write_text("one\nmy uncommitted edit\n")
    server = fake_llm(
        [_write("new"), "wrote it", {"tool_calls": [{"name": "Bash", "input": {"command": "cat new.txt"}}]}, "read it"]
    )
    flags = ("--permission-mode", "acceptEdits", "--allowedTools", "Bash")
    run = keel("-w", "feat", "-p", "write", *flags, env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "wrote it"
    tree = repo / ".keel" / "worktrees" / "feat"
    assert f"Working directory: {tree}" in first_user_text(server.cursor.requests[0]["body"])
    assert "created worktree .keel/worktrees/feat on branch keel/feat" in run.stderr
    assert "uncommitted changes are not in the worktree" in run.stderr
    assert "git merge keel/feat" in run.stderr  # kept, as Claude Code keeps a -p session's worktree
    assert git(repo, "show", "keel/feat:new.txt") == "new\n"  # committed on the branch: nothing to lose
    assert (repo / "a.txt").read_text() == "one\nmy uncommitted edit\n" and not (repo / "new.txt").exists()
    assert git(repo, "status", "--porcelain").strip() == "M a.txt"  # the worktree folder is ignored
    # the same name again goes on in the same worktree
    again = keel("-w", "feat", "-p", "read", *flags, env=wire_env(server, "anthropic"))
    assert again.code == 0, again.stderr
    assert "using the existing worktree .keel/worktrees/feat" in again.stderr
    assert "new" in str(server.cursor.requests[-1]["body"]["messages"][-1])
    assert str(tree) in _worktrees(repo) and "keel/feat" in _branches(repo)


def test_a_session_without_changes_leaves_no_worktree_or_branch(repo: Path, fake_llm: Start, keel: Keel) -> None:
    server = fake_llm(["nothing to do"])
    run = keel("-w", "-p", "look", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert "/.keel/worktrees/" in first_user_text(server.cursor.requests[0]["body"])  # a name was picked
    assert "has no changes; removed it" in run.stderr
    assert _worktrees(repo) == [str(repo)] and _branches(repo) == [git(repo, "branch", "--show-current").strip()]
    assert not list((repo / ".keel" / "worktrees").iterdir())


@pytest.mark.parametrize(
    ("name", "git_repo", "message"),
    [
        ("bad name", True, 'invalid worktree name "bad name"'),
        ("a/../b", True, "invalid worktree name"),
        ("feat", False, "is not in a git repository"),
    ],
)
def test_a_worktree_that_cannot_be_made_is_one_line(
    project: Path, keel: Keel, name: str, git_repo: bool, message: str
) -> None:
    if git_repo:
        git(project, "init", "-q")
        git(project, "commit", "-q", "--allow-empty", "-m", "first")
    run = keel("-w", name, "-p", "x", env={"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key"})
    assert run.code == 2
    assert message in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def _interactive(repo: Path, server: FakeLLMServer, answer: str) -> str:
    """Write a file in a `keel -w feat` session (approving the ask), exit, answer the end question."""
    env = {**os.environ, **wire_env(server, "anthropic"), "TERM": "dumb"}
    child = pexpect.spawn(KEEL, ["-w", "feat"], cwd=str(repo), env=env, encoding="utf-8", timeout=60)
    try:
        child.expect("> ")
        child.sendline("write it")
        child.expect(r"\[y\] yes once")
        child.sendline("y")
        child.expect("wrote it")
        child.expect("> ")
        child.sendline("/exit")
        child.expect(r"\[m\]erge / \[k\]eep / \[d\]iscard: ")
        shown = child.before
        child.sendline(answer)
        child.expect(pexpect.EOF)
        shown += child.before
    finally:
        child.close()
    assert child.exitstatus == 0
    return shown


def test_interactive_shows_the_diff_and_merges_on_approval(repo: Path, fake_llm: Start) -> None:
    server = fake_llm([_write("new"), "wrote it"])
    shown = _interactive(repo, server, "m")
    assert "new.txt" in shown and "+new" in shown  # the diff
    assert "merged branch keel/feat" in shown
    assert (repo / "new.txt").read_text() == "new\n"
    assert git(repo, "status", "--porcelain").strip() == ""
    assert "Merge branch 'keel/feat'" in git(repo, "log", "-1", "--format=%s")
    assert _worktrees(repo) == [str(repo)] and "keel/feat" not in _branches(repo)


def test_interactive_discard_removes_the_worktree_and_branch(repo: Path, fake_llm: Start) -> None:
    server = fake_llm([_write("new"), "wrote it"])
    shown = _interactive(repo, server, "d")
    assert "discarded worktree .keel/worktrees/feat" in shown and "brings it back" in shown
    assert not (repo / "new.txt").exists()
    assert _worktrees(repo) == [str(repo)] and "keel/feat" not in _branches(repo)
    assert not (repo / ".keel" / "worktrees" / "feat").exists()


def test_interactive_merge_never_touches_a_dirty_main_tree(repo: Path, fake_llm: Start) -> None:
    server = fake_llm([_write("new"), "wrote it"])
    # the user edits the main tree while the session works in its worktree
    (repo / "a.txt").write_text("one\nmine, uncommitted\n")
    shown = _interactive(repo, server, "m")
    assert "not merged: the main tree has uncommitted changes" in " ".join(shown.split())
    assert (repo / "a.txt").read_text() == "one\nmine, uncommitted\n" and not (repo / "new.txt").exists()
    assert git(repo, "show", "keel/feat:new.txt") == "new\n"  # kept on its branch
    assert str(repo / ".keel" / "worktrees" / "feat") in _worktrees(repo)


@pytest.mark.parametrize("trusted", [True, False])
def test_the_worktree_inherits_the_main_trees_trust(repo: Path, fake_llm: Start, keel: Keel, trusted: bool) -> None:
    """A checkout of the same project settings the user trusted is trusted; other content is not."""
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text('{"permissions": {"deny": ["Bash(rm *)"]}}')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "settings")
    if trusted:
        assert keel("trust", str(repo)).code == 0
    server = fake_llm(["nothing to do"])
    run = keel("-w", "feat", "-p", "look", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert ("trusted too" in run.stderr) is trusted
    assert ("are not trusted" in run.stderr) is not trusted
    listed = keel("trust", "--list").stdout
    assert str(repo / ".keel" / "worktrees" / "feat") not in listed  # removed with the worktree
