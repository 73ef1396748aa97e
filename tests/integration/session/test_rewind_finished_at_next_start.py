"""A rewind killed half-way is finished at the next keel start in the project, whichever session
that start opens (issue #31 item 5): a plain `keel -p` in a new session completes or rolls back
the killed session's rewind, in that session's log. A session whose rewind is live in another
process (its lock held) is left to it; a marker left after the rewind was closed is removed.

The kill machinery (a real `keel -p "/rewind 0 code"` signalled once the journal's intent is in
the log and some files are back) is tests/integration/session/test_rewind_killed.py's.
"""

from __future__ import annotations

import contextlib
import json
import signal
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import wait_until
from tests.integration.session.test_rewind_killed import (
    BASH_SIZE,
    BYPASS,
    FILES,
    ORIGINAL_SIZE,
    Rewritten,
    original,
    rewritten,
    signal_mid_rewind,
)

Start = Callable[[Any], FakeLLMServer]


def _entries(log: Path) -> list[dict[str, Any]]:
    out = []
    for line in log.read_bytes().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line (the kill): the loader skips it too
    return out


def _marker(r: Rewritten) -> Path:
    return r.log.parent / "open-rewinds" / r.sid


def _wait_stopped(pid: int) -> None:
    """Until every thread of ``pid`` is stopped (SIGSTOP is delivered asynchronously: a write
    under way when it is sent may still finish)."""

    def stopped() -> bool:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        return bool(states) and all(s in ("T", "t") for s in states)

    wait_until(stopped, 30, f"pid {pid} to stop", interval=0.005)


def _new_session(r: Rewritten) -> Any:
    """A plain new session in the project (no -c, no -r)."""
    run = r.keel("-p", "hello", *BYPASS)
    assert run.returncode == 0, run.stderr
    return run


@pytest.mark.parametrize("mode", ["code", "both"])
def test_a_new_session_finishes_a_rewind_killed_in_another(tmp_path: Path, fake_llm: Start, mode: str) -> None:
    r = rewritten(tmp_path, mode, fake_llm)
    proc = r.start_rewind(mode)
    killed_at = signal_mid_rewind(r, proc, FILES // 2, signal.SIGKILL)
    proc.wait()
    assert killed_at is not None, "the rewind ended before the kill"
    [intent] = [e for e in _entries(r.log) if e["type"] == "rewind_intent"]
    assert not [e for e in _entries(r.log) if e["type"] == "rewind_done"], "killed after the rewind closed"

    new = _new_session(r)
    at_target = [p.read_bytes() == original(i) for i, p in enumerate(r.names)]
    at_prior = [p.read_bytes() == b"b" * BASH_SIZE for p in r.names]
    assert all(at_target) or all(at_prior), f"half-restored: {sum(at_target)} at the target, {sum(at_prior)} as before"
    assert not list(r.project.glob(".*keel*tmp")), "a temporary file was left in the project"
    [done] = [e for e in _entries(r.log) if e["type"] == "rewind_done"]  # in the killed session's own log
    assert done["rewind_id"] == intent["rewind_id"] and done["recovered"] is True, done
    assert done["outcome"] == ("completed" if all(at_target) else "rolled_back"), done
    assert r.sid in new.stderr and "interrupted" in new.stderr, new.stderr
    assert not _marker(r).exists()
    if mode == "both":  # the conversation goes with the files, in the killed session
        turns = json.loads(r.keel("sessions", "turns", r.sid, "--json").stdout)
        assert len(turns) == (0 if all(at_target) else 1), turns
    again = _new_session(r)  # closed: nothing more to say or do
    assert r.sid not in again.stderr, again.stderr
    assert len([e for e in _entries(r.log) if e["type"] == "rewind_done"]) == 1


def test_a_rewind_live_in_another_process_is_left_alone(tmp_path: Path, fake_llm: Start) -> None:
    r = rewritten(tmp_path, "live", fake_llm)
    proc = r.start_rewind()
    try:
        stopped_at = signal_mid_rewind(r, proc, FILES // 3, signal.SIGSTOP)
        assert stopped_at is not None, "the rewind ended before it could be stopped"
        _wait_stopped(proc.pid)
        back = r.back()
        log_before = r.log.read_bytes()
        assert _marker(r).exists()

        new = _new_session(r)  # the rewinding process holds the session's lock
        assert f"session {r.sid} has a rewind in progress in another keel process (pid {proc.pid})" in new.stderr
        assert r.back() == back, "a live rewind's files were touched"
        assert r.log.read_bytes() == log_before, "a live session's log was written to"
        assert _marker(r).exists()
    finally:
        proc.send_signal(signal.SIGCONT)
    assert proc.wait(timeout=120) == 0
    assert all(p.stat().st_size == ORIGINAL_SIZE for p in r.names)
    [done] = [e for e in _entries(r.log) if e["type"] == "rewind_done"]
    assert done["outcome"] == "completed" and not done.get("recovered"), done
    assert not _marker(r).exists()


def test_stale_markers_are_removed_and_nothing_is_written(tmp_path: Path, fake_llm: Start) -> None:
    r = rewritten(tmp_path, "stale", fake_llm)
    done_run = r.keel("-p", "/rewind 0 code", "-r", r.sid, *BYPASS)
    assert done_run.returncode == 0, done_run.stderr
    assert all(p.stat().st_size == ORIGINAL_SIZE for p in r.names)
    assert not _marker(r).exists()
    # a kill after the rewind_done, before the marker went; and markers of a session gone or never rewound
    _marker(r).write_text("killed-after-done\n")
    gone = _marker(r).with_name(str(uuid.uuid4()))
    gone.write_text("no such session\n")
    log_before = r.log.read_bytes()
    for p in r.names:  # a user edit since: must not be touched
        p.write_bytes(b"mine")

    new = _new_session(r)
    assert not _marker(r).exists() and not gone.exists()
    assert r.log.read_bytes() == log_before
    assert all(p.read_bytes() == b"mine" for p in r.names)
    assert "rewind" not in new.stderr, new.stderr
