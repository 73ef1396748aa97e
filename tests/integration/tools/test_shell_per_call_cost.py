"""The Bash tool's per-call cost: the file a shell reports its final directory in is reused from
call to call (no file created and removed per call), and a report left there by an earlier call
is never taken for the current call's."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from agentkeel.core.events import CwdChanged
from agentkeel.core.tools import Workdir
from agentkeel.tools.shell import ShellState
from kit import wait_until
from tests.integration.tools.test_builtin_tools import Harness  # the tool harness of the tool tests


@pytest.fixture
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp dir of the test's own, where the shells' report files go."""
    where = tmp_path / "tmp"
    where.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    return where


async def test_the_report_file_is_reused_and_removed_at_the_end(tmp_path: Path, tmp: Path) -> None:
    t = Harness(tmp_path)
    for i in range(12):
        (tmp_path / f"d{i}").mkdir()
        await t("Bash", command=f"cd {tmp_path / f'd{i}'}")
        assert (await t("Bash", command="pwd")).text() == str((tmp_path / f"d{i}").resolve())
        assert len(list(tmp.glob("keel-cwd-*"))) == 1, "one file for the session's calls, not one per call"
    moves = [e for e in t.events if isinstance(e, CwdChanged)]
    assert [Path(e.new_cwd).name for e in moves] == [f"d{i}" for i in range(12)]
    await t.ctx.services.get(ShellState).aclose()
    assert list(tmp.glob("keel-cwd-*")) == []


async def test_an_earlier_calls_report_is_not_taken_for_this_one(tmp_path: Path, tmp: Path) -> None:
    t = Harness(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "other").mkdir()
    await t("Bash", command="cd sub")  # the reused file now says: call 1 ended in sub
    workdir = t.ctx.services.get(Workdir)
    assert workdir.path == (tmp_path / "sub").resolve()
    workdir.path = tmp_path / "other"  # another tool moved the session (as EnterWorktree does)
    out = await t("Bash", command="cd /; kill -9 $$")  # the shell dies before its trap can report
    assert out.metadata["exit_code"] == -9  # killed by SIGKILL
    assert workdir.path == tmp_path / "other", "the stale report of call 1 moved the session back"
    await t.ctx.services.get(ShellState).aclose()


def test_the_watchdog_takes_every_line_without_waking_for_each(tmp_path: Path) -> None:
    """It sleeps until keel's end hangs up, and empties the pipe once a second meanwhile: a session's
    registrations (here 100 kB, more than a pipe holds) are never refused, and at the hang-up it sweeps
    the session: a process tagged with it and left running dies."""
    import contextlib
    import os
    import subprocess
    import sys

    from agentkeel.tools import procs

    session = "turnwatch" + str(os.getpid())
    victim = subprocess.Popen(
        ["sleep", "60"], env={**os.environ, procs.TAG_VAR: f"{session}:1"}, start_new_session=True
    )
    r, w = os.pipe()
    dog = subprocess.Popen([sys.executable, "-I", "-S", procs.__file__, session], stdin=r)
    os.close(r)
    os.set_blocking(w, False)
    line = b"+%d\n-%d\n" % (victim.pid, victim.pid)
    sent = 0

    def written() -> bool:
        nonlocal sent
        with contextlib.suppress(BlockingIOError):  # full: wait for the watchdog's next collection
            while sent < 100_000:
                sent += os.write(w, line * 100)
        return sent >= 100_000

    wait_until(written, 30, "the watchdog to go on emptying its pipe")
    os.write(w, b"+%d\n" % victim.pid)
    os.close(w)  # keel "exits"
    assert dog.wait(timeout=30) == 0
    assert victim.wait(timeout=10) != 0  # killed by the sweep
