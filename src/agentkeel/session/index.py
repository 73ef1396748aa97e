"""The SQLite index of sessions (``$KEEL_HOME/sessions.db``), kept in step with the JSONL files.

The JSONL files are the truth; the index is a cache of what listing needs (title, first prompt,
cwd, cost, last activity, turns, parent). Each row remembers the file's size, mtime and how far
it has been read: a listing stats the session files and reads only the bytes appended since
(sessions only ever grow), re-reads a file that shrank or was replaced, drops the rows of files
that are gone, and rebuilds the whole index when the database is missing or damaged. A running
session updates its row when a run ends (a bus subscriber), so the index is current even
before anyone lists.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkeel.core.events import (
    AssistantMessage,
    Event,
    OpaqueEvent,
    RunFinished,
    SessionStarted,
    UserMessage,
)
from agentkeel.core.types import TextBlock
from agentkeel.internal.private import private_dir, private_file
from agentkeel.session.events import RewindMarker, SessionForked
from agentkeel.session.load import LoadReport, parse_lines
from agentkeel.session.store import encode_project

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
_COLUMNS = (
    "session_id TEXT PRIMARY KEY, path TEXT NOT NULL, project TEXT NOT NULL, cwd TEXT, title TEXT, "
    "first_prompt TEXT, cost_usd REAL, last_activity TEXT, turns INTEGER, parent_id TEXT, "
    "size INTEGER, mtime_ns INTEGER, offset INTEGER, fold TEXT"
)


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    path: Path
    cwd: str
    title: str
    first_prompt: str
    cost_usd: float
    last_activity: str  # ISO 8601, UTC
    turns: int
    parent_id: str | None  # the session this one was forked from


class _Fold:
    """What the index keeps of a session, folded event by event (so appended lines are enough)."""

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        d = data or {}
        self.cwd: str = d.get("cwd", "")
        self.title: str = d.get("title", "")
        self.first_prompt: str = d.get("first_prompt", "")
        self.cost: float = float(d.get("cost", 0.0))
        self.last: str = d.get("last", "")
        self.turns: list[str] = list(d.get("turns", []))
        self.parent: str | None = d.get("parent")
        self.boundary: bool = bool(d.get("boundary", True))

    def data(self) -> dict[str, Any]:
        return {
            "cwd": self.cwd,
            "title": self.title,
            "first_prompt": self.first_prompt,
            "cost": self.cost,
            "last": self.last,
            "turns": self.turns,
            "parent": self.parent,
            "boundary": self.boundary,
        }

    def add(self, event: Event) -> None:
        """The same notion of a user turn as ``history.user_turns``."""
        if event.timestamp:
            self.last = max(self.last, event.timestamp)
        if isinstance(event, RewindMarker):
            if event.target_uuid in self.turns:
                del self.turns[self.turns.index(event.target_uuid) :]
            else:
                del self.turns[min(event.turn_index, len(self.turns)) :]
            self.boundary = True
        elif isinstance(event, SessionStarted):
            self.cwd = self.cwd or event.cwd
            self.boundary = True
        elif isinstance(event, RunFinished):
            self.boundary = True
        elif isinstance(event, SessionForked):
            self.parent = event.parent_id
            self.boundary = True
        elif isinstance(event, UserMessage):
            first = next((b for b in event.message.content if isinstance(b, TextBlock)), None)
            if self.boundary and first is not None:
                self.turns.append(event.uuid)
                if not self.first_prompt:
                    self.first_prompt = first.text[:200].replace("\n", " ")
            self.boundary = False
        elif isinstance(event, AssistantMessage):
            self.cost += event.cost_usd
            self.boundary = False
        elif isinstance(event, OpaqueEvent) and event.type in ("summary", "custom-title"):
            text = event.data.get("summary") or event.data.get("customTitle") or event.data.get("title")
            if isinstance(text, str) and text.strip():
                self.title = text.strip()[:200]


def _connect(path: Path) -> sqlite3.Connection:
    new = not path.exists()
    db = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
    if new:
        private_file(path)  # before the first write: its -wal and -shm files take its mode
    db.execute("PRAGMA journal_mode=WAL")
    # Not synced: the index is a cache of the session files, rebuilt from them when it is missing or
    # damaged (``SessionIndex._open``); an fsync at each update and close only slowed a session's end.
    db.execute("PRAGMA synchronous=OFF")
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
    row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    if row is None or row[0] != SCHEMA_VERSION:
        db.execute("DROP TABLE IF EXISTS sessions")
        db.execute(f"CREATE TABLE sessions ({_COLUMNS})")
        db.execute("CREATE INDEX IF NOT EXISTS sessions_project ON sessions (project, last_activity)")
        db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
    return db


class SessionIndex:
    """``list`` is the way to read it; ``update`` refreshes one session's row (a running session)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / "sessions.db"
        self.rebuilt = False  # this instance found the database missing or damaged and rebuilt it
        self.warning: str | None = None  # the index could not be written: listing read the files
        self._kept: sqlite3.Connection | None = None  # a running session's connection (``update(keep=True)``)

    def _open(self) -> sqlite3.Connection:
        existed = self.path.exists()
        try:
            private_dir(self.home)
        except OSError as e:
            raise sqlite3.OperationalError(f"cannot create {self.home}: {e.strerror or e}") from None
        try:
            db = _connect(self.path)
            db.execute("SELECT count(*) FROM sessions").fetchone()
        except sqlite3.OperationalError:
            raise  # locked or not writable: the caller lists from the files
        except sqlite3.DatabaseError:  # not a database, or damaged: it is only a cache, start it over
            try:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            except OSError as e:
                raise sqlite3.OperationalError(f"cannot replace the damaged {self.path}: {e.strerror or e}") from None
            db = _connect(self.path)
            existed = False
        self.rebuilt = self.rebuilt or not existed
        return db

    def list(self, cwd: Path | None = None, limit: int = 100) -> list[SessionRow]:
        """Sessions newest first (of one project when ``cwd`` is given), kept in step with the
        JSONL files, rebuilt when missing."""
        project = encode_project(cwd.resolve()) if cwd is not None else None
        try:
            db = self._open()
            try:
                self._sync(db, project)
            except BaseException:
                db.close()
                raise
        except sqlite3.Error as e:  # locked for too long, read-only, damaged mid-way: list from the files
            self.warning = f"the session index {self.path} is unusable ({e}); listed from the session files"
            db = _connect(Path(":memory:"))
            self._sync(db, project)
        try:
            rows = db.execute(
                "SELECT * FROM sessions WHERE ? IS NULL OR project = ? "
                "ORDER BY last_activity DESC, mtime_ns DESC LIMIT ?",
                (project, project, limit),
            ).fetchall()
            return [_row(r) for r in rows]
        finally:
            db.close()

    def update(self, session_file: Path, *, keep: bool = False) -> None:
        """Bring one session's row up to date (cheap: only the bytes appended since); raises
        ``sqlite3.Error`` when the index cannot be written (the caller fails open). With ``keep``,
        the connection stays open for the next update (a running session updates at each run's
        end; ``close`` at its end), so only the last one pays the close (SQLite's checkpoint)."""
        db = self._kept or self._open()
        self._kept = None
        try:
            self._refresh(db, session_file, session_file.parent.name)
        except BaseException:
            db.close()
            raise
        if keep:
            self._kept = db
        else:
            db.close()

    def close(self) -> None:
        db, self._kept = self._kept, None
        if db is not None:
            db.close()

    def _sync(self, db: sqlite3.Connection, project: str | None) -> None:
        root = self.home / "projects"
        dirs = [root / project] if project is not None else _subdirs(root)
        known = {
            r[0]: (r[1], r[2], r[3])
            for r in db.execute(
                "SELECT session_id, size, mtime_ns, path FROM sessions WHERE ? IS NULL OR project = ?",
                (project, project),
            )
        }
        seen: set[str] = set()
        db.execute("BEGIN")
        try:
            for d in dirs:
                for f in _session_files(d):
                    seen.add(f.stem)
                    self._refresh(db, f, d.name, known.get(f.stem))
            gone = [(g,) for g in known if g not in seen]
            db.executemany("DELETE FROM sessions WHERE session_id = ?", gone)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _refresh(self, db: sqlite3.Connection, f: Path, project: str, seen: tuple[int, int, str] | None = None) -> None:
        try:
            st = f.stat()
        except OSError:
            return
        if not stat.S_ISREG(st.st_mode):
            return  # a FIFO named like a session: never opened
        if seen is not None and seen == (st.st_size, st.st_mtime_ns, str(f)):
            return  # unchanged since the index read it: not even a query
        row = db.execute(
            "SELECT size, mtime_ns, offset, fold, path FROM sessions WHERE session_id = ?", (f.stem,)
        ).fetchone()
        if row is not None and row[0] == st.st_size and row[1] == st.st_mtime_ns and row[4] == str(f):
            return
        fold, offset = _Fold(), 0
        if row is not None and row[4] == str(f) and st.st_size >= row[2]:
            fold, offset = _Fold(json.loads(row[3])), row[2]
        try:
            with f.open("rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1  # a torn last line is read again once it is whole
        _fold_lines(fold, data[:end], LoadReport(f))
        last = fold.last or time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(st.st_mtime))
        db.execute(
            "INSERT OR REPLACE INTO sessions VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                f.stem,
                str(f),
                project,
                fold.cwd,
                fold.title or fold.first_prompt[:80],
                fold.first_prompt,
                round(fold.cost, 6),
                last,
                len(fold.turns),
                fold.parent,
                st.st_size,
                st.st_mtime_ns,
                offset + end,
                json.dumps(fold.data()),
            ),
        )


# The entries _Fold reads whole; of any other only the timestamp counts (its last activity).
_FOLDED = frozenset({"user", "assistant", "session_start", "result", "rewind", "fork", "summary", "custom-title"})


def _fold_lines(fold: _Fold, data: bytes, report: LoadReport) -> None:
    """``fold.add`` of each entry in data (whole lines). A long session's log is mostly tool results
    and compactions, which the fold reads only the timestamp of: their lines are read for ``type``
    and ``timestamp`` alone (msgspec skips the rest without building it), not parsed into events,
    which took 0.2 s per 15 MB (400 turns) when a run ended. A line that read fails to parse that
    way (damage, NUL bytes) goes the whole way, as every line used to. Unlike the whole way, a
    line of a known type whose body does not validate counts its timestamp."""
    for raw in data.split(b"\n"):
        if not raw.strip(b" \t\r\x00"):
            continue
        kind, stamp = _head(raw) if b"\x00" not in raw else (None, None)
        if kind is not None and stamp is not None and kind not in _FOLDED:
            if stamp:
                fold.last = max(fold.last, stamp)
            continue
        for event in parse_lines(raw, report):
            fold.add(event)


_HEAD_DECODER: Any = None  # msgspec's decoder of (type, timestamp), made on first use


def _head(raw: bytes) -> tuple[str | None, str | None]:
    """(type, timestamp) of an entry's line, or (None, None) when it is not an object with a
    non-empty string type and a string timestamp (if any)."""
    global _HEAD_DECODER
    import msgspec  # loaded with the events already

    if _HEAD_DECODER is None:

        class Head(msgspec.Struct):
            type: str = ""
            timestamp: str = ""

        _HEAD_DECODER = msgspec.json.Decoder(Head)
    try:
        head = _HEAD_DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None, None
    return (head.type, head.timestamp) if head.type else (None, None)


def _subdirs(root: Path) -> list[Path]:
    try:
        return [d for d in root.iterdir() if d.is_dir()]
    except OSError:
        return []


def _session_files(d: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(d) if e.name.endswith(".jsonl")]
    except OSError:
        return []


def _row(r: tuple[Any, ...]) -> SessionRow:
    return SessionRow(
        session_id=r[0],
        path=Path(r[1]),
        cwd=r[3] or "",
        title=r[4] or "",
        first_prompt=r[5] or "",
        cost_usd=float(r[6] or 0.0),
        last_activity=r[7] or "",
        turns=int(r[8] or 0),
        parent_id=r[9],
    )


def home_of(session_file: Path) -> Path:
    """``$KEEL_HOME`` of a session file (``<home>/projects/<project>/<id>.jsonl``)."""
    return session_file.parent.parent.parent
