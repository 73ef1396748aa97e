"""The embedded memory store's file: its schema, and creating it whole or not at all.

The schema is written to a private file beside the store, which is then hard-linked into
place, so no process ever sees a store half made (see :func:`create`). Every open and close
goes through ``sqlite_lib`` (its lock keeps SQLite's VFS from deadlocking).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from agentkeel.internal.private import private_file, sync_to_disk
from agentkeel.memory.sqlite_lib import close, connect

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    rid INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    project TEXT NOT NULL DEFAULT '',
    session TEXT NOT NULL DEFAULT '',
    ts REAL NOT NULL,
    timestamp TEXT NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    files TEXT NOT NULL DEFAULT '',
    superseded_by TEXT,
    forgotten INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS events_session ON events(project, session, rid);
CREATE INDEX IF NOT EXISTS events_type_ts ON events(type, ts);
CREATE INDEX IF NOT EXISTS events_filter ON events(rid, project, session, type, ts, forgotten, superseded_by);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(text, ctx, whn, tokenize='porter unicode61');
CREATE TABLE IF NOT EXISTS vectors (
    rid INTEGER PRIMARY KEY,
    own BLOB,
    ctx BLOB,
    ver INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS vectors_ver ON vectors(ver);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


CREATING = ".creating-"  # memory.db.creating-<pid>-<thread>: a new store until it is linked in place
STALE_S = 60.0  # a creation takes milliseconds; a dead creator's file older than this is a leftover


def create(path: Path) -> None:
    """Create the store file ``path`` atomically, schema and all (nothing if it exists meanwhile).

    SQLite creates a database file when it opens it and writes its first page only later, and a
    schema of several statements in several transactions. A file seen in between (by the session
    start check, another store of the same process, another keel process) looked empty (0 bytes)
    or without its word index: damaged. So the schema is written to a private file beside it,
    which is then hard-linked into place: a link never replaces a file, so when another process
    or thread created the store first, its file stays and this one is dropped. Only a file keel
    did not finish creating is ever empty now: one a crash or a full disk emptied, reported as
    damaged as before."""
    _sweep(path)
    tmp = path.with_name(f"{path.name}{CREATING}{os.getpid()}-{threading.get_native_id()}")
    _remove_db(tmp)
    try:
        db = connect(str(tmp), timeout=30.0, isolation_level=None)
        try:
            private_file(tmp)  # before the first write; the link keeps the mode (0600)
            db.execute("PRAGMA journal_mode=DELETE")
            db.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")
            db.execute("PRAGMA journal_mode=WAL")  # persistent: stored in the header
        finally:
            close(db)  # the last connection: the -wal is checkpointed and removed
        if Path(f"{tmp}-wal").exists():  # not everything is in the file itself: never link half
            raise RuntimeError(f"{tmp}: SQLite kept a -wal after closing the new store")
        sync_to_disk(tmp)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return  # another creator won: its store is the store
        except OSError:  # a file system without hard links: rename, unless the store appeared
            if path.exists():
                return
            tmp.replace(path)
        sync_to_disk(path.parent)
    finally:
        _remove_db(tmp)


def _remove_db(path: Path) -> None:
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _sweep(path: Path) -> None:
    """Remove what a creator killed mid-creation left beside ``path``: its process is gone and the
    file is over a minute old (a pid of another machine sharing the folder may be alive there)."""
    try:
        left = list(path.parent.glob(f"{path.name}{CREATING}*"))
    except OSError:
        return
    for file in left:
        pid = file.name[len(path.name) + len(CREATING) :].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            try:
                if time.time() - file.stat().st_mtime > STALE_S:
                    file.unlink()
            except OSError:
                pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process
    return True
