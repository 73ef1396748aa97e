"""Store fixtures shared by the memory tests: the same suite runs on SQLite and on a real PostgreSQL.

Registered for every test file by ``pytest_plugins`` in conftest.py: ``pg_root`` (one PostgreSQL
per test session), ``backend`` (a store's path or DSN, once per backend) and ``store`` (an open
store without an embedder on it). A test file may define its own ``store``; it takes precedence."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkeel.memory import open_store
from agentkeel.memory.store import MemoryStore

_PG: dict[str, Any] = {}


def postgres_dsn(tmp_root: Path) -> str:
    """One real PostgreSQL (pgserver bundles it with pgvector) per test session."""
    if "server" not in _PG:
        from pgserver import get_server  # type: ignore[attr-defined]

        _PG["server"] = get_server(tmp_root / "pg", cleanup_mode="stop")
        _PG["n"] = 0
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


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return postgres_dsn(request.getfixturevalue("pg_root"))
    return str(tmp_path / "mem.db")


@pytest.fixture
def store(backend: str) -> Iterator[MemoryStore]:
    s = open_store(backend, embedder="none")
    yield s
    s.close()
