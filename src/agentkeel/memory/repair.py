"""``keel mem repair``: rebuild a damaged ``memory.db`` or outbox from what is still readable.

A repair never deletes: it copies every row it can read into a new file, moves the damaged
file (with its ``-wal`` and ``-shm``) aside as ``<name>.damaged-<time>``, and puts the new file
in its place (a journaled swap: see ``finish_repair``). Rows are read in key order, a stretch at
a time; where a stretch cannot be read (a damaged page), its keys are read one by one, so one
bad page costs only the rows on it. A file whose 100-byte header alone is damaged is read
through a copy with a header rebuilt from the format (``template_header``); an empty (0-byte)
file has nothing to read and is kept aside like any other.

- ``memory.db``: the entries (with their superseded / forgotten state) and their vectors are
  copied; the word index and every entry's session context are rebuilt from the entries
  (``SQLiteStore.rebuild_index``). Entries whose vector was lost wait for the next embedding
  pass. What the outbox still holds is indexed afterwards (the CLI drains it).
- ``outbox.db``: the pending and dead-lettered records, with their attempts.

No process may have the files open meanwhile: one that kept the old file open would go on
writing to it after it was moved aside, and those writes would be lost. ``repair_files`` takes
both files' locks exclusive first (``lock.py``: every store and outbox holds them shared while
open) and, if a session, `keel serve` or `keel mem mcp` holds one, refuses without changing
anything.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkeel.internal.private import sync_to_disk
from agentkeel.memory.health import is_corruption
from agentkeel.memory.lock import Hold, hold
from agentkeel.memory.model import EVENT_TYPES
from agentkeel.memory.sqlite_lib import sqlite3

STRETCH = 256  # keys read per query
GIVE_UP_AFTER = 64  # unreadable stretches in a row after which, with no known last key, reading stops


@dataclass
class Repaired:
    """What a repair did: the file rebuilt, where the damaged one went, rows kept and lost."""

    path: Path
    kept_as: Path
    rows: int
    unreadable: int  # keys up to the highest known one that could not be read (0 when unknown)
    vectors: int = 0


def readable_rows(db: sqlite3.Connection, table: str, columns: str, key: str) -> Iterator[tuple[Any, ...]]:
    """Every row of ``table`` that can still be read, in ``key`` order (``key`` is ``columns``' first)."""
    top = _highest_key(db, table, key)
    last, empty = 0, 0
    while True:
        rows: list[tuple[Any, ...]] | None
        try:
            rows = db.execute(
                f"SELECT {columns} FROM {table} WHERE {key} > ? ORDER BY {key} LIMIT ?",  # noqa: S608 (constant names)
                (last, STRETCH),
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                raise
            rows = None
        if rows:
            yield from rows
            last = int(rows[-1][0])
            continue
        if rows is not None:  # read to the end without trouble
            return
        found = False  # a damaged stretch: one key at a time
        for k in range(last + 1, last + STRETCH + 1):
            try:
                row = db.execute(f"SELECT {columns} FROM {table} WHERE {key} = ?", (k,)).fetchone()  # noqa: S608
            except sqlite3.DatabaseError as exc:
                if not is_corruption(exc):
                    raise
                continue
            if row is not None:
                found = True
                yield row
        last += STRETCH
        empty = 0 if found else empty + 1
        if (top is not None and last >= top) or (top is None and empty >= GIVE_UP_AFTER):
            return


def _highest_key(db: sqlite3.Connection, table: str, key: str) -> int | None:
    """The highest key the table ever held, from wherever it can still be read."""
    found: list[int] = []
    for sql, params in (
        (f"SELECT MAX({key}) FROM {table}", ()),  # noqa: S608
        ("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)),
    ):
        try:
            row = db.execute(sql, params).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None and isinstance(row[0], int):
            found.append(row[0])
    return max(found) if found else None


def aside_name(path: Path) -> Path:
    """A free ``<name>.damaged-<time>`` beside ``path``, where a damaged file is kept."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while any(Path(str(target) + suffix).exists() for suffix in ("", "-wal", "-shm")):
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    return target


def move_aside(path: Path, target: Path | None = None) -> Path:
    """Rename a damaged file, with its -wal and -shm, to ``target`` (default: ``aside_name``)."""
    target = target or aside_name(path)
    for suffix in ("-wal", "-shm", ""):  # the main file last: until then the pair stays together
        side = Path(str(path) + suffix)
        if side.exists():
            side.replace(Path(str(target) + suffix))
    return target


# -- putting a rebuilt file in place ----------------------------------------------------------------
#
# The damaged file cannot be swapped with the rebuilt one in a single rename (its -wal and -shm
# go with it), so the swap is journaled: ``<name>.repair-journal`` names where the damaged file
# goes, then the rebuilt file is renamed ``<name>.repaired`` (from then on the repair is done,
# not undone), then the damaged file moves aside and the rebuilt one takes its name. A kill
# anywhere in between leaves either the damaged file in place (the repair runs again) or a
# ``.repaired`` file that ``finish_repair`` (``keel mem repair``) puts in place; ``keel mem
# check`` names it and the store refuses to open until then.


def ready_file(path: Path) -> Path:
    return path.with_name(path.name + ".repaired")


def journal_file(path: Path) -> Path:
    return path.with_name(path.name + ".repair-journal")


def _sync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def finish_repair(path: Path) -> Path | None:
    """Finish a swap a kill interrupted; returns where the damaged file went, None if none was pending."""
    ready, journal = ready_file(path), journal_file(path)
    if not ready.exists():
        journal.unlink(missing_ok=True)  # the kill came before the rebuilt file was complete
        return None
    try:
        kept = Path(json.loads(journal.read_text(encoding="utf-8"))["kept_as"])
        if kept.parent != path.parent:
            raise ValueError(kept)
    except (OSError, ValueError, KeyError, TypeError):
        kept = aside_name(path)
    move_aside(path, kept)
    ready.replace(path)
    sync_to_disk(path.parent)
    journal.unlink(missing_ok=True)
    return kept


def _fresh(path: Path) -> Path:
    tmp = path.with_name(path.name + ".repairing")
    _remove(tmp)
    _remove(tmp.with_name(tmp.name + "-source"))
    return tmp


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def _open_damaged(path: Path, scratch: Path) -> sqlite3.Connection | None:
    """A connection that reads what it can of ``path``; None when not even its schema reads.

    A truncated file is read through a copy padded back to the size its header gives (SQLite
    reads nothing at all from a file shorter than that): the missing pages read as damaged."""
    source = path
    with path.open("rb") as f:
        header = f.read(100)
    if path.stat().st_size == 0:
        return None  # nothing to read (and SQLite would delete a -wal beside an empty file)
    if not _sane_header(header):
        return _open_rebuilt_header(path, scratch)
    # the header's page count holds when its "version valid for" matches the change counter
    if header.startswith(b"SQLite format 3\x00") and header[92:96] == header[24:28]:
        page = int.from_bytes(header[16:18], "big")
        page = 65536 if page == 1 else page
        want = int.from_bytes(header[28:32], "big") * page
        if path.stat().st_size < want:
            shutil.copyfile(path, scratch)
            with scratch.open("r+b") as f:
                f.truncate(want)
            wal = Path(str(path) + "-wal")
            if wal.exists():
                shutil.copyfile(wal, Path(str(scratch) + "-wal"))
            source = scratch
    db = sqlite3.connect(str(source), timeout=30.0, isolation_level=None)
    try:
        db.execute("SELECT name FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError as exc:
        db.close()
        if not is_corruption(exc):
            raise
        return None  # the schema page is gone: nothing can be found by name
    return db


MAGIC = b"SQLite format 3\x00"
PAGE_SIZES = (4096, 1024, 2048, 8192, 16384, 32768, 65536, 512)


def _sane_header(header: bytes) -> bool:
    """The file's first 100 bytes look like a SQLite header SQLite can read the rest by."""
    if len(header) < 100 or not header.startswith(MAGIC):
        return False
    page = int.from_bytes(header[16:18], "big")
    return (
        (page == 1 or (512 <= page <= 32768 and page & (page - 1) == 0))
        and header[18] in (1, 2)
        and header[19] in (1, 2)
        and header[21:24] == bytes((64, 32, 32))
        and int.from_bytes(header[56:60], "big") in (0, 1, 2, 3)
        and int.from_bytes(header[44:48], "big") in (0, 1, 2, 3, 4)
    )


def template_header(page: int, pages: int, wal: bool) -> bytes:
    """A valid database header for a file of ``pages`` pages of ``page`` bytes (SQLite's file
    format, sqlite.org/fileformat2.html 1.3): what keel's stores write there, with no free-page
    list (free pages read as unused) and the counters at 1."""
    h = bytearray(100)
    h[0:16] = MAGIC
    h[16:18] = (1 if page == 65536 else page).to_bytes(2, "big")
    h[18] = h[19] = 2 if wal else 1  # file format versions: 2 reads the -wal beside it
    h[21:24] = bytes((64, 32, 32))  # payload fractions, fixed by the format
    h[24:28] = (1).to_bytes(4, "big")  # change counter
    h[28:32] = pages.to_bytes(4, "big")
    h[40:44] = (1).to_bytes(4, "big")  # schema cookie
    h[44:48] = (4).to_bytes(4, "big")  # schema format
    h[56:60] = (1).to_bytes(4, "big")  # UTF-8
    h[92:96] = h[24:28]  # "version valid for": the page count holds
    major, minor, patch = sqlite3.sqlite_version_info
    h[96:100] = (major * 1000000 + minor * 1000 + patch).to_bytes(4, "big")  # the library that wrote it
    return bytes(h)


def _open_rebuilt_header(path: Path, scratch: Path) -> sqlite3.Connection | None:
    """Read a file whose 100-byte header is damaged through a copy with a rebuilt one.

    Every other page may be intact (the header is one sector SQLite rewrites on each commit),
    but SQLite reads nothing at all past a bad header. The page size is the one unknown that
    matters: each size the file's length allows is tried until the schema and the entries read.
    (SQLite's own recovery extension is in the sqlite3 shell, not in Python's module; keel does
    not depend on a command-line tool at run time.)"""
    size = path.stat().st_size
    wal = Path(str(path) + "-wal")
    has_wal = wal.exists() and wal.stat().st_size > 0
    for page in PAGE_SIZES:
        if size % page or size < page:
            continue
        _remove(scratch)
        shutil.copyfile(path, scratch)
        if has_wal:
            shutil.copyfile(wal, Path(str(scratch) + "-wal"))
        with scratch.open("r+b") as f:
            f.write(template_header(page, size // page, has_wal))
        db = sqlite3.connect(str(scratch), timeout=30.0, isolation_level=None)
        try:
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
            if names & {"events", "outbox"}:
                return db
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                db.close()
                raise
        db.close()
    return None


def _swap(path: Path, tmp: Path) -> Path:
    """Put the rebuilt file in place (all in the one file: out of WAL mode first); keep the damaged one."""
    db = sqlite3.connect(str(tmp), isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=DELETE")
    finally:
        db.close()
    for suffix in ("-wal", "-shm"):  # empty once out of WAL mode
        Path(str(tmp) + suffix).unlink(missing_ok=True)
    _sync_file(tmp)
    journal = journal_file(path)
    scratch = journal.with_name(journal.name + ".tmp")
    scratch.write_text(json.dumps({"kept_as": str(aside_name(path))}), encoding="utf-8")
    _sync_file(scratch)
    scratch.replace(journal)
    tmp.replace(ready_file(path))  # the rebuilt file is complete: from here the repair is finished
    sync_to_disk(path.parent)
    kept = finish_repair(path)
    assert kept is not None
    return kept


EVENT_COLUMNS = "rid, id, type, project, session, ts, timestamp, text, metadata, files, superseded_by, forgotten"
MARKS = ",".join("?" * 12)


def _valid_event(row: tuple[Any, ...]) -> bool:
    rid, rec_id, kind, project, session, ts, timestamp, text, metadata, files, superseded, forgotten = row
    return (
        isinstance(rid, int)
        and isinstance(rec_id, str)
        and bool(rec_id)
        and kind in EVENT_TYPES
        and isinstance(ts, int | float)
        and all(isinstance(v, str) for v in (project, session, timestamp, text, metadata, files))
        and (superseded is None or isinstance(superseded, str))
        and forgotten in (0, 1)
    )


def repair_store(path: Path) -> Repaired:
    """Rebuild ``path`` (a SQLite memory database) from its readable entries and vectors."""
    from agentkeel.memory.sqlite import SQLiteStore

    tmp = _fresh(path)
    SQLiteStore(tmp, lock=False).close()  # the schema
    out = sqlite3.connect(str(tmp), timeout=30.0, isolation_level=None)
    rows = vectors = 0
    top = 0
    scratch = tmp.with_name(tmp.name + "-source")
    src = _open_damaged(path, scratch)
    try:
        out.execute("BEGIN")
        if src is not None:
            top = _highest_key(src, "events", "rid") or 0
            kept: set[int] = set()
            for row in readable_rows(src, "events", EVENT_COLUMNS, "rid"):
                if not _valid_event(row):
                    continue
                cursor = out.execute(f"INSERT OR IGNORE INTO events({EVENT_COLUMNS}) VALUES ({MARKS})", row)  # noqa: S608
                if cursor.rowcount:
                    kept.add(int(row[0]))
            rows = len(kept)
            vectors = _copy_vectors(src, out, kept)
        out.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('ver', '1')")
        out.execute("COMMIT")
    finally:
        out.close()
        if src is not None:
            src.close()
        _remove(scratch)
    store = SQLiteStore(tmp, lock=False)
    try:
        store.rebuild_index()
    finally:
        store.close()
    return Repaired(path, _swap(path, tmp), rows, max(0, top - rows), vectors)


def _copy_vectors(src: sqlite3.Connection, out: sqlite3.Connection, kept: set[int]) -> int:
    """The readable vectors of the entries kept, if they all have one size; the embedder's name with them."""
    try:
        row = src.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
    except sqlite3.DatabaseError:
        return 0  # which model made them is unknown: the embedding pass makes new ones
    if row is None:
        return 0
    size = 0
    copied = 0
    for rid, own in readable_rows(src, "vectors", "rid, own", "rid"):
        if rid not in kept or not isinstance(own, bytes) or not own or len(own) % 4:
            continue
        size = size or len(own)
        if len(own) != size:
            continue
        out.execute("INSERT INTO vectors(rid, own, ctx, ver) VALUES (?, ?, NULL, 1)", (rid, own))
        copied += 1
    if copied:
        out.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('embedder', ?)", (str(row[0]),))
    return copied


def repair_outbox(path: Path) -> Repaired:
    """Rebuild an outbox file from its readable records (pending and dead-lettered, attempts kept)."""
    from agentkeel.memory.capture import OUTBOX_SCHEMA

    tmp = _fresh(path)
    out = sqlite3.connect(str(tmp), timeout=30.0, isolation_level=None)
    rows = 0
    scratch = tmp.with_name(tmp.name + "-source")
    src = _open_damaged(path, scratch)
    try:
        out.execute("PRAGMA journal_mode=WAL")
        out.execute(OUTBOX_SCHEMA)
        out.execute("BEGIN")
        if src is not None:
            columns = "seq, record, attempts, next_try, last_error, dead"
            for row in readable_rows(src, "outbox", columns, "seq"):
                if not _valid_record(row[1]):
                    continue
                out.execute(f"INSERT OR IGNORE INTO outbox({columns}) VALUES (?, ?, ?, ?, ?, ?)", row)  # noqa: S608
                rows += 1
        out.execute("COMMIT")
    finally:
        out.close()
        if src is not None:
            src.close()
        _remove(scratch)
    return Repaired(path, _swap(path, tmp), rows, 0)  # indexed records leave the outbox: no count to miss


def _valid_record(text: Any) -> bool:
    if not isinstance(text, str):
        return False
    try:
        record = json.loads(text)
    except ValueError:
        return False
    return isinstance(record, dict) and isinstance(record.get("id"), str) and isinstance(record.get("text"), str)


# -- the files of one store -------------------------------------------------------------------------


def store_file(location: Path) -> Path:
    return location / "memory.db" if location.is_dir() else location


def check_files(location: Path, keel_home: Path) -> list[tuple[Path, list[str]]]:
    """Each file of a SQLite store (the database, its outbox) with its problems ([] when healthy)."""
    from agentkeel.memory.capture import outbox_path
    from agentkeel.memory.health import check_outbox, check_store

    path = store_file(location)
    outbox = outbox_path(keel_home, str(path))
    return [(path, check_store(path, full=True)), (outbox, check_outbox(outbox))]


def repair_files(location: Path, keel_home: Path, masks: tuple[str, ...] = ()) -> list[str]:
    """Repair what ``check_files`` finds damaged, then index the outbox; one report line per step.

    Both files are locked exclusive first; :class:`~agentkeel.memory.lock.MemoryBusy` (nothing
    changed) when another process has either open."""
    from agentkeel.memory.capture import outbox_path

    path = store_file(location)
    outbox_file = outbox_path(keel_home, str(path))
    holds: list[Hold] = []
    try:
        for file in (path, outbox_file):
            if file.parent.is_dir():  # no folder, nothing to repair (and no lock file to make)
                holds.append(hold(file, exclusive=True))
        return _repair_files(path, outbox_file, masks)
    finally:
        for held in reversed(holds):
            held.release()


def _repair_files(path: Path, outbox_file: Path, masks: tuple[str, ...]) -> list[str]:
    from agentkeel.memory import open_store
    from agentkeel.memory.capture import Outbox
    from agentkeel.memory.health import check_outbox, check_store

    lines: list[str] = []
    for file in (outbox_file, path):
        kept = finish_repair(file)
        if kept is not None:
            lines.append(
                f"finished an interrupted repair: {file} is the rebuilt file; the damaged one is kept as {kept}"
            )
    problems = check_outbox(outbox_file)
    if problems:
        done = repair_outbox(outbox_file)
        lines.append(
            f"{outbox_file} was damaged ({problems[0]}): rebuilt with the {done.rows} records still readable;"
            f" the damaged file is kept as {done.kept_as}"
        )
    problems = check_store(path, full=True)
    if problems:
        done = repair_store(path)
        lost = f", {done.unreadable} could not be read" if done.unreadable else ""
        lines.append(
            f"{path} was damaged ({problems[0]}): rebuilt with {done.rows} entries{lost}"
            f" ({done.vectors} vectors kept); the damaged file is kept as {done.kept_as}"
        )
    if outbox_file.exists():
        store = open_store(path, embedder="none", mask_patterns=masks)
        outbox = Outbox(outbox_file, store)
        try:
            indexed = outbox.drain(force=True)
            counts = outbox.counts()
        finally:
            outbox.close()
            store.close()
        if indexed:
            lines.append(f"indexed {indexed} records the outbox held")
        if counts["dead"]:
            lines.append(f"{counts['dead']} dead-lettered records stay in the outbox: `keel mem retry` requeues them")
    if not lines:
        lines.append(f"{path} and {outbox_file} are healthy: nothing to repair")
    return lines
