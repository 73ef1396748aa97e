"""Store fixtures shared by the memory tests: the same suite runs on SQLite and on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_PG: dict[str, Any] = {}


def postgres_dsn(tmp_root: Path) -> str:
    """One real PostgreSQL (pgserver bundles it with pgvector) per test session."""
    if "server" not in _PG:
        import pgserver  # type: ignore[import-untyped]

        _PG["server"] = pgserver.get_server(tmp_root / "pg", cleanup_mode="stop")
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
