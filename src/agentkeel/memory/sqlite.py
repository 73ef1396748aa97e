"""The embedded memory store: one SQLite file (WAL) with an FTS5 index and a vector table.

Vectors are float32 blobs searched exactly with numpy from an in-process cache that reloads
only what changed (a version counter on every row). sqlite-vec would be the natural choice,
but this Python's ``sqlite3`` is built without ``enable_load_extension``, so it cannot load;
an exact scan of 100k x 384 floats costs a few milliseconds, well inside the search budget.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from agentkeel.internal.private import private_dir
from agentkeel.memory.backends import refuse_other_embedder
from agentkeel.memory.embed import Embedder
from agentkeel.memory.health import (
    FINISH,
    UNFINISHED,
    MemoryDamaged,
    check_store,
    damaged,
    is_corruption,
    refuse_empty,
    unfinished_repair,
)
from agentkeel.memory.lock import hold
from agentkeel.memory.model import EVENT_TYPES, Entry, Record, date_words
from agentkeel.memory.privacy import DEFAULT_MASKER, Masker
from agentkeel.memory.sql import (
    COLUMNS,
    EVENT_COLUMNS,
    Dialect,
    Filters,
    Row,
    SQLBackend,
    event_values,
    row_of,
    where_clause,
)
from agentkeel.memory.sqlite_file import SCHEMA, create
from agentkeel.memory.sqlite_lexical import SQLiteLexical
from agentkeel.memory.sqlite_lib import close, connect, sqlite3
from agentkeel.memory.store import StoreBase
from agentkeel.memory.vector_cache import VectorCache

FTS_TABLE = "CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(text, ctx, whn, tokenize='porter unicode61')"

F = TypeVar("F", bound=Callable[..., Any])


def _guarded(method: F) -> F:
    """A store method that names the file and the fix when SQLite finds it damaged."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if is_corruption(exc):
                raise damaged(getattr(args[0], "path", "memory.db"), exc) from None
            raise

    return cast(F, functools.wraps(method)(wrapper))


SQLITE = Dialect(
    table="events",
    vectors="vectors",
    ph="?",
    live="e.forgotten = 0",
    any_of=lambda n: f"e.type IN ({','.join('?' * n)})",
    list_param=False,
    contains="instr(e.files, ?) > 0",
)


def open_file(location: str, embedder: Embedder | None, masker: Masker) -> SQLiteStore:
    """The store in file ``location`` (``memory.db`` in it when it is a folder): ``backends.FILE``'s factory."""
    path = Path(location).expanduser()
    return SQLiteStore(path / "memory.db" if path.is_dir() else path, embedder=embedder, masker=masker)


class SQLiteStore(SQLiteLexical, SQLBackend, StoreBase):
    dialect = SQLITE

    def __init__(
        self, path: Path, embedder: Embedder | None = None, masker: Masker | None = None, *, lock: bool = True
    ) -> None:
        self.path = path
        self.embedder = embedder
        self.masker = masker or DEFAULT_MASKER
        private_dir(path.parent)
        # held until close: `keel mem repair` never swaps the file under an open store (lock.py);
        # ``lock=False`` is for the repair's own scratch file, which no other process knows of
        self._hold = hold(path) if lock else None
        try:
            self._open(path, embedder)
        except BaseException:
            self._release()
            raise

    def _open(self, path: Path, embedder: Embedder | None) -> None:
        # before anything creates the file: SQLite takes an empty file for a new database (and
        # deletes a -wal beside it), so a store emptied by a crash or a full disk would be
        # replaced by a new one without a word; that takes the user's say (`keel mem repair`)
        if unfinished_repair(path):
            raise MemoryDamaged(path, UNFINISHED, FINISH)
        if not path.exists():
            try:
                create(path)  # whole or not at all: a store being created is never seen half made
            except (OSError, sqlite3.Error) as exc:
                raise RuntimeError(
                    f"{path} cannot be created ({exc}): make its folder writable,"
                    " or set memory.store to a file elsewhere"
                ) from None
        refuse_empty(path)
        self._db = connect(str(path), timeout=30.0, check_same_thread=False, isolation_level=None)
        self._lock = threading.RLock()
        self._in_tx = False
        self._cache = VectorCache()
        self._joined: set[tuple[Any, ...]] = set()  # filters FTS5's own ranking did not serve (see ``_ranked``)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
            model = self._meta("embedder") if embedder is not None else None
        except sqlite3.DatabaseError as exc:
            close(self._db)
            if is_corruption(exc):
                raise damaged(path, exc) from None
            if not os.access(path.parent, os.W_OK) or not os.access(path, os.W_OK):  # e.g. a read-only mount
                raise RuntimeError(
                    f"{path} cannot be opened for writing ({exc}): it or its folder is read-only; nothing is "
                    "wrong with the file. Make the folder writable, or set memory.store to a file elsewhere"
                ) from None
            raise RuntimeError(
                f"{path} is not a usable memory database ({exc}): move it aside or set memory.store to another file"
            ) from None
        if embedder is not None:
            if model is None:
                self._set_meta("embedder", embedder.name)
            try:
                refuse_other_embedder(model, embedder, str(path))
            except RuntimeError:
                close(self._db)
                raise

    # -- plumbing ---------------------------------------------------------------------------------
    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # The connection's own ``in_transaction`` is the truth, not a flag of ours: SQLite may roll a
    # transaction back by itself (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM), and a flag left set
    # after that made every later write run outside any transaction, one statement at a time.
    def _begin(self) -> None:
        if not self._db.in_transaction:
            self._db.execute("BEGIN IMMEDIATE")
        self._in_tx = True

    def _commit(self) -> None:
        if self._in_tx:
            self._in_tx = False
            if self._db.in_transaction:
                try:
                    self._db.execute("COMMIT")
                except BaseException:
                    self._rollback()
                    raise

    def _next_ver(self) -> int:
        self._begin()
        ver = int(self._meta("ver") or 0) + 1
        self._set_meta("ver", str(ver))
        return ver

    def close(self) -> None:
        with self._lock:
            self._rollback()
            close(self._db)
            self._release()

    def _release(self) -> None:
        if self._hold is not None:
            self._hold.release()

    def _rollback(self) -> None:
        self._in_tx = False
        if self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.OperationalError:  # SQLite ended it already ("no transaction is active")
                pass

    # -- primitives ---------------------------------------------------------------------------------
    def _known_ids(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            found.update(r[0] for r in self._db.execute(f"SELECT id FROM events WHERE id IN ({marks})", chunk))
        return found

    def _insert(self, prepared: list[tuple[Record, str, list[float] | None]]) -> list[int]:
        ver = self._next_ver()
        rids: list[int] = []
        for record, when, vector in prepared:
            cursor = self._db.execute(
                f"INSERT INTO events({EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                event_values(record),
            )
            rid = int(cursor.lastrowid or 0)
            rids.append(rid)
            self._db.execute("INSERT INTO fts(rowid, text, ctx, whn) VALUES (?, ?, '', ?)", (rid, record.text, when))
            if vector is not None:
                self._db.execute(
                    "INSERT INTO vectors(rid, own, ctx, ver) VALUES (?, ?, NULL, ?)", (rid, _blob(vector), ver)
                )
        return rids

    def _session_tail(self, project: str, session: str, n: int) -> list[tuple[Row, list[float] | None]]:
        rows = self._db.execute(
            f"SELECT {COLUMNS}, v.own FROM events e LEFT JOIN vectors v ON v.rid = e.rid"
            " WHERE e.project = ? AND e.session = ? AND e.forgotten = 0 ORDER BY e.rid DESC LIMIT ?",
            (project, session, n),
        ).fetchall()
        return [(row_of(r), _unblob(r[-1])) for r in reversed(rows)]

    def _reset_vectors(self, name: str, dim: int) -> None:
        self._next_ver()
        self._db.execute("DELETE FROM vectors")
        self._set_meta("embedder", name)
        self._set_meta("epoch", str(int(self._meta("epoch") or 0) + 1))  # every reader's cache starts over

    def _begin_batch(self) -> None:
        self._next_ver()

    def _put_vectors(self, vectors: list[tuple[int, list[float]]]) -> None:
        """Store vectors, except for entries forgotten since they were read (a vector would keep
        a trace of the erased text)."""
        ver = int(self._meta("ver") or 0)
        self._db.executemany(
            "INSERT OR REPLACE INTO vectors(rid, own, ctx, ver) SELECT ?, ?, NULL, ?"
            " WHERE EXISTS (SELECT 1 FROM events WHERE rid = ? AND forgotten = 0)",
            [(rid, _blob(v), ver, rid) for rid, v in vectors],
        )

    def _vector_mark(self) -> int:
        return int(self._meta("vector_mark") or 0)

    def _set_vector_mark(self, rid: int) -> None:
        self._set_meta("vector_mark", str(rid))

    def _set_contexts(self, contexts: list[tuple[int, str, list[float] | None]]) -> None:
        for rid, context, vector in contexts:
            self._db.execute("UPDATE fts SET ctx = ? WHERE rowid = ?", (context, rid))
            if vector is not None:
                self._db.execute(
                    "UPDATE vectors SET ctx = ?, ver = (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'ver')"
                    " WHERE rid = ?",
                    (_blob(vector), rid),
                )

    def _mark_superseded(self, old_id: str, new_id: str) -> None:
        with self._writing():
            ver = self._next_ver()
            self._db.execute("UPDATE events SET superseded_by = ? WHERE id = ?", (new_id, old_id))
            self._db.execute(
                "UPDATE vectors SET ver = ? WHERE rid = (SELECT rid FROM events WHERE id = ?)", (ver, old_id)
            )

    def _forget(self, ids: Sequence[str]) -> int:
        """Erase entries for good (the user's right): text, metadata, index rows and vectors."""
        with self._writing():
            ver = self._next_ver()
            count = 0
            for record_id in ids:
                row = self._db.execute("SELECT rid FROM events WHERE id = ? AND forgotten = 0", (record_id,)).fetchone()
                if row is None:
                    continue
                rid = int(row[0])
                self._db.execute(
                    "UPDATE events SET text = '', metadata = '{}', files = '', forgotten = 1 WHERE rid = ?", (rid,)
                )
                self._db.execute("DELETE FROM fts WHERE rowid = ?", (rid,))
                self._db.execute("UPDATE vectors SET own = NULL, ctx = NULL, ver = ? WHERE rid = ?", (ver, rid))
                count += 1
            self._commit()
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return count

    @staticmethod
    def _where(filters: Filters) -> tuple[str, list[Any]]:
        return where_clause(filters, SQLITE)

    def _query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return list(self._db.execute(sql, list(params)).fetchall())

    def _vector(self, vector: list[float], column: str, filters: Filters, limit: int) -> list[int]:
        nearest = self._nearest_soon(filters)
        return nearest(vector, column, limit)

    def _nearest_soon(self, filters: Filters) -> Callable[[list[float], str, int], list[int]]:
        """The cache brought up to date and the filters' entries read now; the comparison after
        needs no connection (see ``StoreBase._nearest_soon``)."""
        with self._lock:
            self._cache.refresh(self._db)
            allowed = None
            project = filters.project
            if filters not in (Filters(), Filters(project=project)):  # a project alone is the cache's own filter
                project = None
                where, params = self._where(filters)
                allowed = {int(r[0]) for r in self._db.execute(f"SELECT e.rid FROM events e WHERE {where}", params)}
        cache = self._cache
        return lambda vector, column, limit: cache.nearest(vector, column, limit, allowed, project)

    def _own_vectors(self, rids: Sequence[int]) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        with self._lock:
            for start in range(0, len(rids), 500):
                chunk = list(rids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                for rid, own in self._db.execute(
                    f"SELECT rid, own FROM vectors WHERE rid IN ({marks}) AND own IS NOT NULL", chunk
                ):
                    vector = _unblob(own)
                    if vector is not None:
                        out[int(rid)] = vector
        return out

    def _rows_by_rid(self, rids: Sequence[int]) -> dict[int, Row]:
        if not rids:
            return {}
        marks = ",".join("?" * len(rids))
        with self._lock:
            rows = self._db.execute(f"SELECT {COLUMNS} FROM events e WHERE e.rid IN ({marks})", list(rids)).fetchall()
        return {int(r[0]): row_of(r) for r in rows}

    def _rows_by_id(self, ids: Sequence[str]) -> list[Row]:
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        with self._lock:
            rows = self._db.execute(
                f"SELECT {COLUMNS} FROM events e WHERE e.id IN ({marks}) AND e.forgotten = 0", list(ids)
            ).fetchall()
        return [row_of(r) for r in rows]

    # -- whole-store views ------------------------------------------------------------------------
    def _stats(self) -> dict[str, Any]:
        with self._lock:
            by_type = dict(
                self._db.execute("SELECT type, COUNT(*) FROM events WHERE forgotten = 0 GROUP BY type").fetchall()
            )
            projects = self._db.execute("SELECT COUNT(DISTINCT project) FROM events WHERE forgotten = 0").fetchone()[0]
            sessions = self._db.execute("SELECT COUNT(DISTINCT session) FROM events WHERE forgotten = 0").fetchone()[0]
            vectors = self._db.execute("SELECT COUNT(*) FROM vectors WHERE own IS NOT NULL").fetchone()[0]
            superseded = self._db.execute("SELECT COUNT(*) FROM events WHERE superseded_by IS NOT NULL").fetchone()[0]
        return {
            "backend": "sqlite",
            "location": str(self.path),
            "entries": sum(by_type.values()),
            "by_type": {t: by_type.get(t, 0) for t in EVENT_TYPES if by_type.get(t)},
            "projects": projects,
            "sessions": sessions,
            "vectors": vectors,
            "superseded": superseded,
            "embedder": self.embedder.name if self.embedder else None,
            "bytes": self.path.stat().st_size if self.path.exists() else 0,
        }

    # -- damage -----------------------------------------------------------------------------------
    def check(self, full: bool = False) -> list[str]:
        """What is wrong with the file (``health.check_store``); [] when healthy."""
        return check_store(self.path, full)

    def _rebuild_index(self) -> int:
        """Rebuild the word index and every entry's session context from the entries (``keel mem
        repair`` does this in the file it copies the readable entries into). Returns the count."""
        with self._writing():
            self._begin_batch()
            self._db.execute("DROP TABLE IF EXISTS fts")
            self._db.execute(FTS_TABLE)
            done, last = 0, 0
            while rows := self._live_rows(last, 1000):
                self._db.executemany(
                    "INSERT INTO fts(rowid, text, ctx, whn) VALUES (?, ?, '', ?)",
                    [(r.rid, r.text, date_words(r.ts)) for r in rows],
                )
                done += len(rows)
                last = rows[-1].rid
            for project, session in self._sessions():
                tail = self._session_tail(project, session, 1 << 30)
                self._write_contexts([(row.rid, row.text, v) for row, v in tail])
            self._commit()
        return done

    def export(self, **filters: Any) -> Iterator[Entry]:
        try:
            yield from super().export(**filters)
        except sqlite3.DatabaseError as exc:
            if is_corruption(exc):
                raise damaged(self.path, exc) from None
            raise

    # every read and write names the file and the fix when SQLite finds it damaged
    add_many = _guarded(StoreBase.add_many)
    search = _guarded(StoreBase.search)
    timeline = _guarded(StoreBase.timeline)
    get = _guarded(StoreBase.get)
    supersede = _guarded(StoreBase.supersede)
    recent = _guarded(StoreBase.recent)
    sessions = _guarded(StoreBase.sessions)
    reindex = _guarded(StoreBase.reindex)
    embed_pending = _guarded(StoreBase.embed_pending)
    pending_vectors = _guarded(StoreBase.pending_vectors)
    forget = _guarded(_forget)
    stats = _guarded(_stats)
    rebuild_index = _guarded(_rebuild_index)


def _blob(vector: list[float]) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype=np.float32).tobytes()


def _unblob(blob: bytes | None) -> list[float] | None:
    if blob is None:
        return None
    import numpy as np

    result: list[float] = np.frombuffer(blob, dtype=np.float32).tolist()
    return result
