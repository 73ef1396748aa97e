"""Claude Code's async hook protocol: a command whose first stdout line is
``{"async": true, "asyncTimeout": MS}`` runs on in the background for at most ``asyncTimeout``
milliseconds (the Claude Agent SDKs write it in milliseconds); then its whole process group ends."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from agentkeel.config.hooks import Handler
from agentkeel.hooks.runners import async_timeout, run_command
from kit import wait_until


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_an_async_hook_ends_at_its_async_timeout(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    command = f'echo \'{{"async": true, "asyncTimeout": 300}}\'; sleep 30 & echo $! > {pids}; wait'
    handler = Handler(type="command", command=command, timeout=60)

    async def go() -> tuple[float, str]:
        raw = await run_command(handler, b"{}", cwd=str(tmp_path), env=dict(os.environ), timeout=60)
        assert raw.detached is not None and '"async": true' in raw.stdout  # keel went on at once
        start = time.monotonic()
        done = await asyncio.wait_for(raw.detached, 10)
        return time.monotonic() - start, done.error

    took, error = asyncio.run(go())
    assert took < 5 and "asyncTimeout" in error
    sleeper = int(pids.read_text())
    wait_until(lambda: not _alive(sleeper), 10, "the hook's background sleep to end with its group")


def test_the_async_line_is_read_in_milliseconds() -> None:
    assert async_timeout('{"async": true, "asyncTimeout": 15000}') == 15.0
    assert async_timeout('{"async": true}') is None
    assert async_timeout('{"async": true, "asyncTimeout": true}') is None
    assert async_timeout('{"async": true, "asyncTimeout": -5}') is None
