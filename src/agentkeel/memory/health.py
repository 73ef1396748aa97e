"""Damage to memory's SQLite files (``memory.db``, ``outbox.db``): recognised, checked for, named.

SQLite reports a damaged file as ``SQLITE_CORRUPT`` ("database disk image is malformed") or
``SQLITE_NOTADB`` ("file is not a database"), but only when a query reads a damaged page: a
search that never touches one answers from what it can read, and an index that lost rows
answers without them. So damage is looked for as well as caught:

- every read and write turns those two errors into :class:`MemoryDamaged`, whose one-line
  message names the file and the fix (``keel mem repair``);
- :func:`check_store` is ``PRAGMA quick_check`` (every b-tree page, no index cross-check:
  about 40 ms for 10k entries, 0.3 s for 100k) plus the word index's row count against the
  entries (an index that lost rows is invisible to quick_check). A session runs it in the
  background at its start; ``keel mem search`` runs it before answering "no memories
  match"; ``keel mem check`` and ``keel mem repair`` add FTS5's own integrity check, which
  reads the whole index (0.4 s for 10k entries, 4 s for 100k).
"""

from __future__ import annotations

import sqlite3 as stdlib_sqlite3
from pathlib import Path

from agentkeel.memory.lock import hold
from agentkeel.memory.sqlite_lib import close, connect, sqlite3

SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26
REPAIR = "run `keel mem repair` to rebuild it from what is readable (the damaged file is kept beside it)"


class MemoryDamaged(RuntimeError):
    """A memory file is damaged. The message is one line: the file, what is wrong, the fix."""

    def __init__(self, path: Path | str, detail: str, fix: str = REPAIR) -> None:
        self.path = str(path)
        self.detail = detail
        super().__init__(f"{path} is damaged ({detail}): {fix}")


def is_corruption(exc: BaseException) -> bool:
    """True for SQLite's "malformed" and "not a database" errors, whatever their extended code."""
    if not isinstance(exc, (sqlite3.DatabaseError, stdlib_sqlite3.DatabaseError)):  # either library's
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)
    text = str(exc)
    return "malformed" in text or "not a database" in text


def damaged(path: Path | str, exc: BaseException) -> MemoryDamaged:
    return MemoryDamaged(path, first_line(str(exc)) or type(exc).__name__)


EMPTY = "the file is empty (0 bytes)"
EMPTY_FIX = (
    "if it held memories, restore it from a backup; to start a new store, run `keel mem repair`"
    " (it keeps the empty file beside the new one)"
)


def is_empty(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size == 0
    except OSError:
        return False


UNFINISHED = "a repair was interrupted before the rebuilt file was put in place"
FINISH = "run `keel mem repair` to finish it"


def unfinished_repair(path: Path) -> bool:
    """A rebuilt file waits beside ``path`` (``repair.finish_repair`` puts it in place)."""
    return path.with_name(path.name + ".repaired").exists()


def refuse_empty(path: Path) -> None:
    """Raise :class:`MemoryDamaged` for a memory file that exists with 0 bytes: SQLite would take
    it for a new database and the store would start over without the user knowing."""
    if is_empty(path):
        raise MemoryDamaged(path, EMPTY, EMPTY_FIX)


def first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("***")]
    return lines[0] if lines else ""


def quick_check(db: sqlite3.Connection) -> list[str]:
    """``PRAGMA quick_check``: [] when every page of the file reads as a valid b-tree page."""
    try:
        rows = db.execute("PRAGMA quick_check(5)").fetchall()
    except sqlite3.DatabaseError as exc:
        if is_corruption(exc):
            return [first_line(str(exc))]
        raise
    found = [first_line(str(r[0])) for r in rows if r[0] != "ok"]
    return [f for f in found if f]


def check_store(path: Path, full: bool = False) -> list[str]:
    """What is wrong with a memory database, one short phrase per problem; [] when healthy.

    ``full`` adds FTS5's integrity check of the word index against the text it holds. A file
    that does not exist is healthy: the store creates it. The check only reads."""
    if not path.parent.is_dir():
        return []
    held = hold(path)  # shared: beside sessions, never in the middle of a repair's swap
    try:
        if unfinished_repair(path):
            return [UNFINISHED]
        if not path.exists():
            return []
        if is_empty(path):  # opening it would make it a new database (and delete its -wal)
            return [EMPTY]
        db = connect(str(path), timeout=30.0, isolation_level=None)
        try:
            problems = quick_check(db)
            if problems:
                return problems
            return _index_problems(db, full)
        except sqlite3.DatabaseError as exc:
            if is_corruption(exc):
                return [first_line(str(exc))]
            if "no such table" in str(exc):
                return [f"a table is missing: {first_line(str(exc))}"]
            raise
        finally:
            close(db)
    finally:
        held.release()


def _index_problems(db: sqlite3.Connection, full: bool) -> list[str]:
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "events" not in tables:
        return [] if not tables else ["it has no events table"]
    if "fts" not in tables:
        return ["the word index is missing"]
    indexed = int(db.execute("SELECT COUNT(*) FROM fts").fetchone()[0])
    live = int(db.execute("SELECT COUNT(*) FROM events WHERE forgotten = 0").fetchone()[0])
    if indexed != live:
        return [f"the word index holds {indexed} rows for {live} entries"]
    if full:
        try:
            db.execute("INSERT INTO fts(fts) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as exc:
            if is_corruption(exc):
                return [f"the word index is damaged: {first_line(str(exc))}"]
            raise
    return []


def check_outbox(path: Path) -> list[str]:
    """What is wrong with an outbox file; [] when healthy or absent (it is small: a full check)."""
    if not path.parent.is_dir():
        return []
    held = hold(path)
    try:
        if unfinished_repair(path):
            return [UNFINISHED]
        if not path.exists():
            return []
        db = connect(str(path), timeout=30.0, isolation_level=None)
        try:
            return quick_check(db)
        finally:
            close(db)
    finally:
        held.release()
