"""The one git runner (``agentkeel.internal.git``): a repository's configuration runs nothing
through keel's own git calls, every call has a timeout that ends what git started, and the root
is found one way."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from agentkeel.internal.git import find_root, run_git, run_git_async, toplevel
from agentkeel.ui.cli.worktree import left_worktrees
from agentkeel.ui.tui.files import project_files


def _repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "a.txt").write_text("a\n")
    return path


def _plant(repo: Path, marker: Path) -> None:
    """A hostile repository: fsmonitor, hooks and pager that would each touch ``marker``."""
    hook = repo / "evil.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in ("post-checkout", "pre-commit", "reference-transaction"):
        (hooks / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / name).chmod(0o755)
    with (repo / ".git" / "config").open("a") as f:
        f.write(f"[core]\n\tfsmonitor = {hook}\n\tpager = {hook}\n")


def test_a_planted_fsmonitor_hook_or_pager_runs_nothing(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    marker = tmp_path / "ran"
    _plant(repo, marker)
    assert run_git(repo, "status", "--porcelain") is not None
    assert project_files(repo) == ["a.txt", "evil.sh"]
    assert not marker.exists()


async def test_the_async_runner_commits_without_hooks_and_reports_failures(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    marker = tmp_path / "ran"
    _plant(repo, marker)
    ident = ("-c", "user.name=t", "-c", "user.email=t@localhost")
    assert (await run_git_async(repo, "add", "a.txt"))[0] == 0
    code, out = await run_git_async(repo, *ident, "commit", "-q", "-m", "one")
    assert code == 0, out
    assert not marker.exists()
    code, out = await run_git_async(repo, "rev-parse", "--verify", "nope")
    assert code not in (0, None) and "fatal" in out


@pytest.mark.parametrize("runner", ["sync", "async"])
async def test_a_git_call_past_its_timeout_is_stopped_with_what_it_started(tmp_path: Path, runner: str) -> None:
    repo = _repo(tmp_path / "repo")
    n = f"{200 + uuid.uuid4().int % 10_000}.{uuid.uuid4().int % 1000:03d}"
    started = time.monotonic()
    hang = ("-c", f"alias.hang=!sleep {n} & sleep {n}", "hang")
    try:
        if runner == "async":
            code, out = await asyncio.wait_for(run_git_async(repo, *hang, timeout=0.5), 20)
            assert code is None and "timed out after 0.5s" in out
        else:  # before: subprocess.run killed git alone, then waited for the pipes its children held
            assert await asyncio.wait_for(asyncio.to_thread(run_git, repo, *hang, timeout=0.5), 20) is None
        assert time.monotonic() - started < 10
    finally:
        _reap(n)


def _reap(n: str) -> None:
    """Wait for every `sleep n` to be gone; kill and fail on any left."""

    def alive() -> list[str]:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if f"sleep\0{n}".encode() in cmd and state != b"Z":
                found.append(pid)
        return found

    deadline = time.monotonic() + 5
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = alive()
    for pid in left:
        os.kill(int(pid), 9)
    assert left == [], "a process git started outlived the timeout"


def test_the_root_is_found_one_way(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    deep = repo / "x" / "y"
    deep.mkdir(parents=True)
    assert find_root(deep) == repo
    assert toplevel(deep) == repo.resolve()
    outside = tmp_path / "plain"
    outside.mkdir()
    if find_root(tmp_path) is None:  # the test folder itself is not inside a repository
        assert find_root(outside) is None and toplevel(outside) is None


@pytest.mark.parametrize("kept", [True, False])
def test_left_worktrees_use_the_safe_runner(tmp_path: Path, kept: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repo(tmp_path / "repo")
    marker = tmp_path / "ran"
    _plant(repo, marker)
    (repo / ".keel" / "worktrees").mkdir(parents=True)
    ident = [
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@localhost",
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
    ]
    subprocess.run(["git", "-C", str(repo), *ident, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    if kept:
        subprocess.run(
            ["git", "-C", str(repo), *ident, "worktree", "add", "-q", "-b", "keel-x", str(repo / ".keel/worktrees/x")],
            check=True,
        )
    marker.unlink(missing_ok=True)
    monkeypatch.setenv("GIT_DIR", str(_repo(tmp_path / "other") / ".git"))  # keel's env is not the repository's
    found = left_worktrees(repo)
    assert not marker.exists()
    assert (found is not None and "keel-x" in found) if kept else not found


def test_git_is_started_in_one_place() -> None:
    """keel's own git calls all go through internal/git.py (the Bash tool runs the user's git)."""
    src = Path(__file__).resolve().parents[3] / "src" / "agentkeel"
    starts = [
        f.relative_to(src).as_posix()
        for f in src.rglob("*.py")
        if re.search(r"\[\s*\"git\"\s*[,\]]", f.read_text(encoding="utf-8"))
    ]
    assert starts == ["internal/git.py"]
