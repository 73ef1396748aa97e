"""The test run's own services: a PostgreSQL that dies under the run is restarted (and said so once),
not a cascade of errors in every later ``[postgres]`` test."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from agentkeel.memory import open_store
from memory_fixtures import _PG, postgres_dsn


def _postmaster_pid() -> int:
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(_PG["server"].pgdata)
    assert info is not None and info.pid is not None
    return int(info.pid)


def test_a_postgres_killed_mid_run_is_restarted_with_one_warning(pg_root: Path) -> None:
    import psutil

    postgres_dsn(pg_root)  # the run's server is up
    pid = _postmaster_pid()
    proc = psutil.Process(pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    with pytest.warns(UserWarning, match="PostgreSQL .* died; restarting"):
        dsn = postgres_dsn(pg_root)
    assert _postmaster_pid() != pid
    store = open_store(dsn, embedder="none")
    try:
        record = {"id": "r1", "type": "fact", "project": "p", "session": "s1", "timestamp": "2026-11-28T09:00:00Z"}
        assert store.add_many([{**record, "text": "the restarted server stores and finds entries"}]) == 1
        assert [h.id for h in store.search("restarted server", k=3)] == ["r1"]
    finally:
        store.close()
