"""Store fixtures shared by the memory tests: the same suite runs on SQLite and on a real PostgreSQL.

Registered for every test file by ``pytest_plugins`` in conftest.py: ``pg_root`` (one PostgreSQL
per test session), ``backend`` (a store's location, once per registered backend: SQLite,
PostgreSQL and the in-memory fake of ``memory_fake_backend``) and ``store`` (an open store
without an embedder on it). A test file may define its own ``store``; it takes precedence."""

from __future__ import annotations

import atexit
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memory_fake_backend  # noqa: F401  (registers the in-memory backend the suite also runs on)
from agentkeel.memory import open_store
from agentkeel.memory.backends import BACKENDS, FILE
from agentkeel.memory.store import MemoryStore

_PG: dict[str, Any] = {}
START_TRIES = 3  # pg_ctl gives a start 10 s; a loaded machine can need more than one try


class PostgresUnavailable(RuntimeError):
    """This test run's PostgreSQL could not be started (or restarted): the message says why, once."""


def _alive(server: Any) -> bool:
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(server.pgdata)
    return info is not None and info.is_running()


def _log_tail(pgdata: Path, lines: int = 5) -> str:
    try:
        text = (pgdata / "log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no server log)"
    return " | ".join(text[-lines:]) or "(empty server log)"


def _start(tmp_root: Path) -> Any:
    """A fresh PostgreSQL in a data directory of this test run's own (never shared with another run)."""
    from pgserver import get_server  # type: ignore[attr-defined]

    _PG["starts"] = _PG.get("starts", 0) + 1
    pgdata = tmp_root / f"pg{_PG['starts']}"
    error: BaseException | None = None
    from pgserver.postgres_server import PostgresServer

    for _ in range(START_TRIES):
        try:
            return get_server(pgdata, cleanup_mode="stop")
        except (subprocess.SubprocessError, OSError, AssertionError) as exc:
            error = exc
            # pgserver keeps the half-made handle and would hand it back: drop it, so the next try
            # finds the server pg_ctl was still starting (or starts it)
            half = PostgresServer._instances.pop(pgdata.resolve(), None)
            if half is not None:
                atexit.unregister(half._cleanup)
    raise PostgresUnavailable(
        f"the test run's PostgreSQL did not start after {START_TRIES} tries ({type(error).__name__}: {error}); "
        f"server log: {_log_tail(pgdata)}"
    )


def postgres_dsn(tmp_root: Path) -> str:
    """One real PostgreSQL (pgserver bundles it with pgvector) per test session (per xdist worker).

    A server that died under the run (a loaded machine, an OOM kill) is reported once, as a warning
    with the tail of its log, and restarted in a new data directory; a server that cannot be started
    fails every test that needs it with the same one-line reason instead of a cascade of errors."""
    if "down" in _PG:
        pytest.fail(f"PostgreSQL for this test run is unavailable: {_PG['down']}", pytrace=False)
    server = _PG.get("server")
    if server is not None and not _alive(server):
        warnings.warn(
            f"the test run's PostgreSQL ({server.pgdata}) died; restarting it in a new data directory. "
            f"Its log ended: {_log_tail(server.pgdata)}",
            stacklevel=2,
        )
        atexit.unregister(server._cleanup)  # nothing left to stop; the new server has its own directory
        _PG.pop("server")
    if "server" not in _PG:
        try:
            _PG["server"] = _start(tmp_root)
        except PostgresUnavailable as exc:
            _PG["down"] = str(exc)
            pytest.fail(f"PostgreSQL for this test run is unavailable: {exc}", pytrace=False)
        _PG.setdefault("n", 0)
    _PG["n"] += 1
    server = _PG["server"]
    name = f"keel_test_{_PG['n']}"
    server.psql(f"CREATE DATABASE {name};")
    return str(server.get_uri(name))


def stop_postgres() -> None:
    server = _PG.pop("server", None)
    if server is not None:
        server.cleanup()


@pytest.fixture(scope="session")
def pg_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("pgserver")
    yield root
    stop_postgres()


def registered() -> list[str]:
    """Every registered backend, once each (``postgres`` is another name of ``postgresql``)."""
    named: dict[Any, str] = {}
    for name, factory in BACKENDS.items():
        named.setdefault(factory, name)
    return list(named.values())


def location(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store's location on backend ``name``: a file, a database on the test run's
    PostgreSQL, or ``<scheme>://<this test's directory>`` for any other."""
    if name == FILE:
        return str(tmp_path / "mem.db")
    if name == "postgresql":
        return postgres_dsn(request.getfixturevalue("pg_root"))
    return f"{name}://{tmp_path}"


@pytest.fixture(params=registered())
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store's location, once per registered backend."""
    return location(request.param, request, tmp_path)


@pytest.fixture
def store(backend: str) -> Iterator[MemoryStore]:
    s = open_store(backend, embedder="none")
    yield s
    s.close()
