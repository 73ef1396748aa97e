"""A session's end: the session index keeps one connection for a running session's updates (the
close, SQLite's checkpoint, is paid once, at the session's end), and what it wrote is seen by any
other reader at once."""

from __future__ import annotations

from pathlib import Path

from agentkeel.session.index import SessionIndex, home_of
from kit import session


async def test_runs_of_a_session_update_the_index_through_one_connection(tmp_path: Path, project: Path) -> None:
    rt = session(project, ["first answer", "second answer"], retries=None, permission_mode="bypassPermissions")
    home = home_of(rt.session_path)
    wal = home / "sessions.db-wal"
    try:
        await rt.run("the first prompt")
        assert wal.exists(), "the connection was closed (and checkpointed) at the run's end"
        rows = SessionIndex(home).list(None)  # another reader, as `keel sessions` in another process
        assert [(r.first_prompt, r.turns) for r in rows] == [("the first prompt", 1)]
        await rt.run("the second prompt")
        assert [r.turns for r in SessionIndex(home).list(None)] == [2]
    finally:
        await rt.aclose()
    assert not wal.exists(), "the session's end closes the index's connection"
    assert [r.turns for r in SessionIndex(home).list(None)] == [2]
