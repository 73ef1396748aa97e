"""Which backend holds a memory store: one table, from a location's scheme to the factory that opens it.

A location is a file path (SQLite) or a URL whose scheme names its backend (``postgresql://``).
Adding a backend is its module (a ``store.StoreBase`` implementing ``store.Backend``) and one
line here, or one ``register`` call from elsewhere (a test's fake). The factories import their
module when first called, so nothing heavy is imported until a store is opened.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentkeel.memory.embed import Embedder
    from agentkeel.memory.privacy import Masker
    from agentkeel.memory.store import MemoryStore

Factory = Callable[[str, "Embedder | None", "Masker"], "MemoryStore"]
FILE = "sqlite"  # the backend of a location without a scheme: a file path


def _sqlite(location: str, embedder: Embedder | None, masker: Masker) -> MemoryStore:
    from agentkeel.memory.sqlite import SQLiteStore

    path = Path(location).expanduser()
    if path.is_dir():
        path = path / "memory.db"
    return SQLiteStore(path, embedder=embedder, masker=masker)


def _postgres(location: str, embedder: Embedder | None, masker: Masker) -> MemoryStore:
    from agentkeel.memory.postgres import PostgresStore

    return PostgresStore(location, embedder=embedder, masker=masker)


BACKENDS: dict[str, Factory] = {
    FILE: _sqlite,
    "postgresql": _postgres,
    "postgres": _postgres,  # libpq takes both spellings
}


def register(scheme: str, factory: Factory) -> None:
    """Open ``<scheme>://...`` locations with ``factory``."""
    BACKENDS[scheme] = factory


def scheme_of(location: str) -> str:
    """The backend a location names: its URL scheme, or ``FILE`` for a path."""
    scheme, sep, _ = location.partition("://")
    return scheme.lower() if sep and scheme.isidentifier() else FILE


def is_file(location: str) -> bool:
    """Whether the store is a file keel opens itself (check, repair and the lock apply to it)."""
    return scheme_of(location) == FILE


def open_location(location: str, embedder: Embedder | None, masker: Masker) -> MemoryStore:
    """Open (creating if needed) the store at ``location`` with its backend's factory."""
    scheme = scheme_of(location)
    factory = BACKENDS.get(scheme)
    if factory is None or (scheme == FILE and "://" in location):
        known = ", ".join(f"{s}://" for s in sorted(BACKENDS) if s != FILE)
        named = location.partition("://")[0]  # never the rest: a URL may hold a password
        raise RuntimeError(f"memory.store {named}://...: no memory backend has that scheme; use a file path or {known}")
    return factory(location, embedder, masker)
