"""The memory store's seam: what every store offers its callers (``MemoryStore``), what a backend
gives the store (``Backend``: the primitives a store needs of its database; ``store.StoreBase``
is the retrieval recipe written once over them), and which backend holds a store: one table,
from a location's scheme to the factory that opens it.

A location is a file path (SQLite) or a URL whose scheme names its backend (``postgresql://``).
Adding a backend is its module (a ``store.StoreBase`` implementing ``Backend``, opened as
``Store(location, embedder, masker)``) and one line: in ``BACKENDS`` (``"redis":
lazy("agentkeel.memory.redis", "RedisStore")``), or a ``register`` call in the module itself (the
tests' in-memory fake). A factory imports its module when first called: nothing heavy is
imported until a store is opened.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from agentkeel.memory.embed import Embedder
    from agentkeel.memory.model import Entry, Hit, Record
    from agentkeel.memory.privacy import Masker
    from agentkeel.memory.sql import Filters, Row


@runtime_checkable
class MemoryStore(Protocol):
    """What every backend offers; the CLI, the tools, the MCP server and capture use only this."""

    def add_many(self, records: Iterable[dict[str, Any] | Record]) -> int: ...
    def search(self, query: str, k: int = 10, **filters: Any) -> list[Hit]: ...
    def timeline(self, anchor: str, before: int = 3, after: int = 3, budget_tokens: int | None = None) -> list[Hit]: ...
    def get(self, ids: Sequence[str], budget_tokens: int | None = None) -> list[Entry]: ...
    def supersede(self, old_id: str, new_record: dict[str, Any] | Record) -> str: ...
    def forget(self, ids: Sequence[str]) -> int: ...
    def export(self, **filters: Any) -> Iterable[Entry]: ...
    def stats(self) -> dict[str, Any]: ...
    def recent(self, types: Sequence[str], project: str | None = None, limit: int = 5) -> list[Entry]: ...
    def sessions(self, project: str | None = None, limit: int = 50) -> list[dict[str, Any]]: ...
    def reindex(self, embedder: Embedder, batch: int = 256, progress: Callable[[int], None] | None = None) -> int: ...
    def embed_pending(self, limit: int = 512) -> int: ...
    def pending_vectors(self) -> int: ...
    def check(self, full: bool = False) -> list[str]: ...
    def close(self) -> None: ...


class Backend(Protocol):
    """What a store needs of its database: the whole seam between the retrieval recipe
    (``StoreBase``) and one backend. A backend is one class (``StoreBase`` + these primitives)
    and one line in ``BACKENDS``; the SQL backends share their SQL (``sql.SQLBackend``).

    A backend's factory opens it, creating or migrating its schema, and refuses an index built
    with another embedder (``refuse_other_embedder``). Rows are ``sql.Row``s; a ``rid`` is the
    backend's insertion order (ascending, never reused); ``Filters`` says which entries pass (an
    entry forgotten never does). A primitive "in the open transaction" runs under ``_lock`` inside
    its caller's work; the others take the lock and end their read themselves.
    """

    _lock: threading.RLock

    # -- transactions ------------------------------------------------------------------------------
    def _begin_batch(self) -> None:
        """Open a write batch (SQLite bumps the row version its vector cache follows)."""

    def _commit(self) -> None:
        """Make the open write transaction durable."""

    def _rollback(self) -> None:
        """Undo the open write transaction."""

    def _end_read(self) -> None:
        """End a read-only transaction (PostgreSQL would otherwise sit idle in one)."""

    # -- writes (in the open transaction) -----------------------------------------------------------
    def _known_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are stored (forgotten ones included: an id is never reused)."""
        ...

    def _insert(self, prepared: list[tuple[Record, str, list[float] | None]]) -> list[int]:
        """Append (record, its date words, its own vector or None); the new rids, in order."""
        ...

    def _set_contexts(self, contexts: list[tuple[int, str, list[float] | None]]) -> None:
        """Set entries' session context: its text (a lexical field) and mean vector (if any)."""

    def _mark_superseded(self, old_id: str, new_id: str) -> None:
        """Hide ``old_id`` from search, keeping it (``Row.superseded_by``)."""

    def forget(self, ids: Sequence[str]) -> int:
        """Erase entries for good (text, metadata, index and vectors; the id stays known), committed."""
        ...

    # -- vectors (in the open transaction) ---------------------------------------------------------
    def _reset_vectors(self, name: str, dim: int) -> None:
        """Drop every vector: the store is now indexed with embedder ``name`` of ``dim``."""

    def _put_vectors(self, vectors: list[tuple[int, list[float]]]) -> None:
        """Store own vectors, except for entries forgotten meanwhile."""

    def _vector_mark(self) -> int:
        """The rid up to which every live entry has been given a vector."""
        ...

    def _set_vector_mark(self, rid: int) -> None: ...

    def _unembedded(self, after_rid: int, limit: int) -> tuple[list[Row], int]:
        """Live rows past ``after_rid`` without a vector, in rid order, and the highest rid stored."""
        ...

    def _pending(self, after_rid: int) -> int:
        """How many live entries past ``after_rid`` have no vector."""
        ...

    # -- reads in the open transaction --------------------------------------------------------------
    def _scan(self, flt: Filters, after_rid: int, limit: int) -> list[Row]:
        """The entries passing ``flt`` past ``after_rid``, in rid order."""
        ...

    def _session_tail(self, project: str, session: str, n: int) -> list[tuple[Row, list[float] | None]]:
        """A session's last ``n`` live entries in rid order, each with its own vector or None."""
        ...

    def _sessions(self) -> list[tuple[str, str]]:
        """Every (project, session) holding a live entry."""
        ...

    # -- reads on their own --------------------------------------------------------------------------
    def _rows_by_rid(self, rids: Sequence[int]) -> dict[int, Row]: ...

    def _rows_by_id(self, ids: Sequence[str]) -> list[Row]:
        """The live entries of ``ids`` (any order)."""
        ...

    def _neighbours(self, row: Row, before: int, after: int) -> list[Row]:
        """``row`` and up to ``before``/``after`` live entries of its session around it, in order."""
        ...

    def _latest(self, flt: Filters, limit: int) -> list[Row]:
        """The newest entries passing ``flt`` (by time, then rid, descending)."""
        ...

    def _session_list(self, project: str | None, limit: int) -> list[tuple[str, str, str, str, int, Row | None]]:
        """Sessions, newest first: project, session, first and last timestamp, entry count, first prompt."""
        ...

    def _newest(self, rids: Sequence[int]) -> float:
        """The latest time among ``rids`` (0.0 for none)."""
        ...

    # -- search ----------------------------------------------------------------------------------------
    def _lexical(self, terms: list[str], filters: Filters, limit: int) -> list[int]:
        """The first ``limit`` rids by BM25 over the three fields with ``tuning``'s weights and
        its common-word rule (see the module doc), ties by rid."""
        ...

    def _vector(self, vector: list[float], column: str, filters: Filters, limit: int) -> list[int]:
        """The first ``limit`` rids by cosine against ``column``: "own" or "context"."""
        ...

    def _own_vectors(self, rids: Sequence[int]) -> dict[int, list[float]]:
        """The entries' own vectors (those that have one)."""
        ...

    # -- whole store -----------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def refuse_other_embedder(stored: str | None, embedder: Embedder | None, where: str) -> None:
    """A store indexed with one embedder opens only with it (another's vectors would mislead)."""
    if embedder is not None and stored is not None and stored != embedder.name:
        raise RuntimeError(
            f"{where} was indexed with embedder {stored!r}, not {embedder.name!r}: "
            f"set memory.embedder to {stored!r} or run `keel mem reindex`"
        )


Factory = Callable[[str, "Embedder | None", "Masker"], "MemoryStore"]
FILE = "sqlite"  # the backend of a location without a scheme: a file path


def lazy(module: str, name: str) -> Factory:
    """The factory ``module.name(location, embedder, masker)``, its module imported at the first call."""

    def factory(location: str, embedder: Embedder | None, masker: Masker) -> MemoryStore:
        opened: MemoryStore = getattr(importlib.import_module(module), name)(location, embedder, masker)
        return opened

    return factory


_POSTGRES = lazy("agentkeel.memory.postgres", "PostgresStore")
BACKENDS: dict[str, Factory] = {
    FILE: lazy("agentkeel.memory.sqlite", "open_file"),
    "postgresql": _POSTGRES,
    "postgres": _POSTGRES,  # libpq takes both spellings
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


def known_scheme(location: str) -> str:
    """The backend ``location`` names; a scheme no backend has is one line saying what would work."""
    scheme = scheme_of(location)
    if scheme not in BACKENDS or (scheme == FILE and "://" in location):
        known = ", ".join(f"{s}://" for s in sorted(BACKENDS) if s != FILE)
        named = location.partition("://")[0]  # never the rest: a URL may hold a password
        raise RuntimeError(f"memory.store {named}://...: no memory backend has that scheme; use a file path or {known}")
    return scheme


def open_location(location: str, embedder: Embedder | None, masker: Masker) -> MemoryStore:
    """Open (creating if needed) the store at ``location`` with its backend's factory."""
    return BACKENDS[known_scheme(location)](location, embedder, masker)
