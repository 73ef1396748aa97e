"""The one subprocess runner (``agentkeel.internal.procs``): own process group, hard timeout, the
whole group killed on timeout or cancel; and skills' `` !`cmd` `` run through it."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import pytest

from agentkeel.internal import procs
from agentkeel.skills import expand


def _running(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != b"Z" and int(entry) != os.getpid():
            found.append(int(entry))
    return found


def _gone(marker: str, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while _running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _sleep_arg() -> str:
    """A sleep length no other process uses, to find ours in /proc."""
    return f"{100 + uuid.uuid4().int % 10_000}.{uuid.uuid4().int % 1000:03d}"


async def _allow(tool: str, tool_input: dict[str, object]) -> str | None:
    return None


async def test_a_skill_command_that_times_out_leaves_no_process_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(expand, "BANG_TIMEOUT_S", 0.5)
    n = _sleep_arg()
    body = f"state: !`sleep {n} & sleep {n}`"
    started = time.monotonic()
    try:
        out = await asyncio.wait_for(expand.substitute_commands(body, tmp_path, _allow), 20)
        assert "timed out after 0.5s" in out
        assert time.monotonic() - started < 10
        assert _gone(f"sleep\0{n}"), "the backgrounded sleep outlived the timed-out skill command"
    finally:
        for pid in _running(f"sleep\0{n}"):
            os.kill(pid, 9)


async def test_a_skill_command_that_leaves_a_child_returns_its_output_without_waiting(tmp_path: Path) -> None:
    n = _sleep_arg()
    started = time.monotonic()
    try:
        out = await asyncio.wait_for(expand.run_bang(f"sleep {n} & echo ready", tmp_path, timeout=20), 15)
        assert out == "ready"
        assert time.monotonic() - started < 10
        assert _gone(f"sleep\0{n}")
    finally:
        for pid in _running(f"sleep\0{n}"):
            os.kill(pid, 9)


async def test_run_reports_exit_output_and_stderr_apart(tmp_path: Path) -> None:
    ran = await procs.run(
        ["/bin/sh", "-c", "cat; echo err >&2; exit 3"], cwd=tmp_path, env=None, timeout=10, stdin=b"in"
    )
    assert (ran.exit_code, ran.stdout, ran.stderr, ran.error) == (3, b"in", b"err\n", "")


async def test_run_stops_a_command_past_the_output_cap(tmp_path: Path) -> None:
    ran = await procs.run(["/bin/sh", "-c", "yes"], cwd=tmp_path, env=None, timeout=10, cap=4096)
    assert ran.exit_code is None and "printed more than 4 KiB" in ran.error
    assert len(ran.stdout) == 4096


async def test_cancelling_run_kills_the_group(tmp_path: Path) -> None:
    n = _sleep_arg()
    task = asyncio.ensure_future(
        procs.run(["/bin/sh", "-c", f"sleep {n} & sleep {n}"], cwd=tmp_path, env=None, timeout=60)
    )
    deadline = time.monotonic() + 10
    while len(_running(f"sleep\0{n}")) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _gone(f"sleep\0{n}")


async def test_a_command_that_cannot_start_is_one_line(tmp_path: Path) -> None:
    ran = await procs.run([str(tmp_path / "missing")], cwd=tmp_path, env=None, timeout=5)
    assert ran.exit_code is None and ran.error.startswith("cannot run ")


def test_no_shell_is_started_outside_a_process_group() -> None:
    """``create_subprocess_shell`` starts ``/bin/sh`` in keel's own group: a timeout could kill only the shell."""
    src = Path(__file__).resolve().parents[3] / "src" / "agentkeel"
    assert [f.name for f in src.rglob("*.py") if "create_subprocess_shell" in f.read_text(encoding="utf-8")] == []
