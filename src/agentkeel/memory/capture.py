"""Capture: session events -> memory records, through a durable outbox, off the loop's thread.

``MemoryCapture`` subscribes to the event bus. Its handler only turns an event into a small
dict (tool output compressed per tool, secrets masked) and puts it on an in-memory queue:
no I/O, no model call, so the loop never waits on memory. A writer thread appends batches
to the outbox (a SQLite file; a committed row is *acknowledged*), then indexes them into
the store. A batch that fails is retried with backoff; after ``MAX_ATTEMPTS`` its records
go to the dead-letter list (``keel mem stats`` shows it; ``keel mem retry`` requeues).
Whatever was acknowledged survives kill -9: the next ``Outbox`` on that file drains it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentkeel.core.events import (
    AssistantMessage,
    Event,
    SessionEnded,
    ToolFinished,
    ToolResults,
    ToolStarted,
    UserMessage,
)
from agentkeel.core.types import TextBlock, ToolResultBlock, ToolUseBlock
from agentkeel.internal.private import private_dir, private_file
from agentkeel.memory.health import MemoryDamaged, damaged, first_line, is_corruption, quick_check
from agentkeel.memory.lock import hold
from agentkeel.memory.model import Record, new_record_id, now_iso
from agentkeel.memory.privacy import DEFAULT_MASKER, Masker
from agentkeel.memory.sqlite_lib import close, connect, sqlite3
from agentkeel.memory.store import MemoryStore
from agentkeel.memory.toolnames import MEMORY_TOOLS
from agentkeel.tools.views import UNCAPTURED
from agentkeel.tools.views import not_run as not_run  # re-exported: memory's hook bridge records calls with them
from agentkeel.tools.views import observe as observe

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
BATCH = 64
WINDOW_S = 0.05  # a batch gathers the records put this long after its first
CONTEXT_TAG = "<memory-context"  # injected context is not captured back as a prompt
DEFAULT_EXCLUDED = UNCAPTURED | set(MEMORY_TOOLS)
OUTBOX_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL,"
    " attempts INTEGER NOT NULL DEFAULT 0, next_try REAL NOT NULL DEFAULT 0, last_error TEXT,"
    " dead INTEGER NOT NULL DEFAULT 0)"
)


def outbox_path(keel_home: Path, location: str) -> Path:
    """One outbox per store: records a session acknowledged are only ever indexed into its own store.

    The default store keeps the plain ``outbox.db``; any other location gets its own file."""
    import hashlib

    from agentkeel.memory.backends import is_file

    def canonical(where: str) -> str:
        return str(Path(where).expanduser().resolve()) if is_file(where) else where

    location = canonical(location)
    if location == canonical(str(keel_home / "memory" / "memory.db")):
        return keel_home / "memory" / "outbox.db"

    return keel_home / "memory" / f"outbox-{hashlib.sha256(location.encode()).hexdigest()[:16]}.db"


class Outbox:
    """A durable queue in front of a store: put -> acknowledged (on disk) -> indexed -> deleted.

    A damaged outbox file (``damaged`` is set, checked with ``PRAGMA quick_check`` at open and
    caught on every read and write) is never written to: capture stops, what the file holds
    stays for `keel mem repair` to salvage. A damaged *store* leaves records pending without
    spending their attempts: they are indexed once the store is repaired.
    """

    def __init__(
        self,
        path: Path,
        store: MemoryStore | Callable[[], MemoryStore],
        retry_base_s: float = 0.5,
        window_s: float = WINDOW_S,
    ) -> None:
        private_dir(path.parent)
        self.path = path
        self.window_s = window_s
        self._store = store if isinstance(store, MemoryStore) else None
        self._factory = None if isinstance(store, MemoryStore) else store
        self.retry_base_s = retry_base_s
        self.damaged: MemoryDamaged | None = None
        self.dropped = 0  # records capture could not acknowledge because the file is damaged
        # held until close: `keel mem repair` never swaps the file under an open outbox (lock.py)
        self._hold = hold(path)
        try:
            new = not path.exists()
            self._db = connect(str(path), timeout=30.0, check_same_thread=False, isolation_level=None)
        except BaseException:
            self._hold.release()
            raise
        if new:
            private_file(path)  # before the first write: its -wal and -shm files take its mode
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(OUTBOX_SCHEMA)
            problems = quick_check(self._db)
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                close(self._db)
                self._hold.release()
                raise
            problems = [first_line(str(exc))]
        if problems:  # its owner says so: the session in a notice, `keel mem` on stderr
            self.damaged = MemoryDamaged(path, problems[0])
        self._lock = threading.Lock()
        self._drain_lock = threading.Lock()
        # records put and not yet taken by the writer; ``_wake`` guards it and the two flags
        self._queued: list[dict[str, Any]] = []
        self._wake = threading.Condition(threading.Lock())
        self._urgent = False  # flush() or close() waits: write what is queued without the window
        self._closing = False
        self._thread: threading.Thread | None = None
        self._idle = threading.Event()
        self._idle.set()
        self.on_ack: Callable[[list[str]], None] | None = None

    @contextmanager
    def _using(self) -> Iterator[None]:
        """Hold the lock for the outbox file; a damaged file is named (``damaged``) and never used again."""
        if self.damaged is not None:
            raise self.damaged
        with self._lock:
            try:
                yield
            except sqlite3.DatabaseError as exc:
                if not is_corruption(exc):
                    raise
                self.damaged = damaged(self.path, exc)
                raise self.damaged from None

    @property
    def store(self) -> MemoryStore:
        """The store given, or the factory's answer, asked for each batch (it may cache, or refuse)."""
        if self._store is not None:
            return self._store
        assert self._factory is not None
        return self._factory()

    # -- writing ------------------------------------------------------------------------------------
    def put(self, record: dict[str, Any]) -> None:
        """Queue a record without waiting (the capture path); the writer thread acknowledges it."""
        if self.damaged is not None:
            self.dropped += 1
            return
        with self._wake:
            self._idle.clear()
            self._queued.append(record)
            # the writer is woken by a batch's first record (it then waits out the window) or a full
            # batch, not by every record: a turn's records cost an append, not a thread switch each
            if len(self._queued) == 1 or len(self._queued) >= BATCH:
                self._wake.notify()
        self._ensure_thread()

    def put_durable(self, records: Iterable[dict[str, Any]]) -> list[str]:
        """Write records to the outbox and return once they are on disk (acknowledged)."""
        rows = [Record.from_dict(r).to_dict() for r in records]
        with self._using():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT INTO outbox(record) VALUES (?)", [(json.dumps(r),) for r in rows])
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        ids = [r["id"] for r in rows]
        if self.on_ack is not None:
            self.on_ack(ids)
        return ids

    # -- draining -----------------------------------------------------------------------------------
    def resume(self) -> None:
        """Index, in the background, what an earlier process acknowledged but did not index."""
        if self.damaged is None and self.counts()["pending"]:
            threading.Thread(target=self._drain_quietly, name="keel-memory-resume", daemon=True).start()

    def _drain_quietly(self) -> None:
        try:
            self.drain()
        except Exception:
            log.exception("memory indexing failed; the records stay in %s", self.path)

    def drain(self, force: bool = False) -> int:
        """Index every pending record whose retry time has come; returns how many were indexed."""
        if self.damaged is not None:
            return 0
        with self._drain_lock:
            return self._drain(force)

    def _drain(self, force: bool) -> int:
        done = 0
        while True:
            with self._using():
                rows = self._db.execute(
                    "SELECT seq, record, attempts FROM outbox WHERE dead = 0 AND next_try <= ? ORDER BY seq LIMIT ?",
                    (float("inf") if force else time.time(), BATCH * 4),
                ).fetchall()
            if not rows:
                return done
            try:
                self.store.add_many(json.loads(r[1]) for r in rows)
            except MemoryDamaged as exc:  # the store's fault, not the records': they wait for the repair
                log.warning("memory indexing stopped: %s", exc)
                return done
            except Exception as exc:  # the store is down or rejected the batch: retry, then dead-letter
                log.warning("memory indexing failed (%s); will retry", exc)
                self._failed(rows, f"{type(exc).__name__}: {exc}")
                if not force:
                    return done
                continue
            with self._using():
                # one commit, not synced: a delete lost to a crash only indexes the rows again, and
                # the store skips the ids it holds (``add_many``)
                self._db.execute("PRAGMA synchronous=NORMAL")
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                    self._db.executemany("DELETE FROM outbox WHERE seq = ?", [(r[0],) for r in rows])
                    self._db.execute("COMMIT")
                finally:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    self._db.execute("PRAGMA synchronous=FULL")
            done += len(rows)

    def _failed(self, rows: list[tuple[Any, ...]], error: str) -> None:
        with self._using():
            self._db.execute("BEGIN IMMEDIATE")
            for seq, _, attempts in rows:
                dead = attempts + 1 >= MAX_ATTEMPTS
                delay = self.retry_base_s * (2**attempts)
                self._db.execute(
                    "UPDATE outbox SET attempts = attempts + 1, last_error = ?, dead = ?, next_try = ? WHERE seq = ?",
                    (error[:500], int(dead), time.time() + delay, seq),
                )
            self._db.execute("COMMIT")

    def counts(self) -> dict[str, int]:
        with self._using():
            pending, dead = self._db.execute(
                "SELECT COALESCE(SUM(dead = 0), 0), COALESCE(SUM(dead = 1), 0) FROM outbox"
            ).fetchone()
        return {"pending": int(pending), "dead": int(dead)}

    def dead_letters(self) -> list[dict[str, Any]]:
        with self._using():
            rows = self._db.execute("SELECT seq, record, attempts, last_error FROM outbox WHERE dead = 1").fetchall()
        return [{"seq": r[0], "id": json.loads(r[1]).get("id"), "attempts": r[2], "error": r[3]} for r in rows]

    def retry_dead(self) -> int:
        with self._using():
            cursor = self._db.execute("UPDATE outbox SET dead = 0, attempts = 0, next_try = 0 WHERE dead = 1")
        return cursor.rowcount

    # -- the writer thread --------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="keel-memory-outbox", daemon=True)
            self._thread.start()

    def _take(self) -> list[dict[str, Any]] | None:
        """The next batch: wait for a first record, then up to ``window_s`` for more (less when a
        batch is full or someone waits); None once closing with nothing left."""
        with self._wake:
            while not self._queued and not self._closing:
                self._wake.wait()
            if not self._queued:
                self._idle.set()
                return None
            deadline = time.monotonic() + self.window_s
            while len(self._queued) < BATCH and not (self._urgent or self._closing):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._wake.wait(left)
            batch, self._queued = self._queued, []
            self._urgent = False
            return batch

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            try:
                self.put_durable(batch)
            except MemoryDamaged as exc:
                self.dropped += len(batch)
                log.warning("memory capture stopped: %s", exc)
            except Exception:
                log.exception("memory capture could not write its outbox %s", self.path)
            with self._wake:
                if not self._queued:
                    self._idle.set()  # acknowledged; indexing below may take longer and may be cut short
            try:
                self.drain()
            except Exception:
                log.exception("memory indexing failed; the records stay in %s", self.path)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued is acknowledged (on disk); indexing may still be running."""
        if self._thread is not None and self._thread.is_alive():
            with self._wake:
                self._urgent = True
                self._wake.notify()
            return self._idle.wait(timeout)
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Stop the writer after it has indexed what it holds (within timeout); pending rows stay durable."""
        if self._thread is not None and self._thread.is_alive():
            with self._wake:
                self._closing = True
                self._wake.notify()
            self._thread.join(timeout)
            if self._thread.is_alive():
                return  # still indexing: the daemon thread dies with the process; the outbox keeps the rows
        with self._lock:
            close(self._db)
            self._hold.release()  # after the close: the file is no longer open here


# -- events -> records --------------------------------------------------------------------------------
# (what a tool call is summarised as is the tool's business: tools/views.py ``observe``/``not_run``)


def _result_text(block: ToolResultBlock) -> str:
    if isinstance(block.content, str):
        return block.content
    return "\n".join(getattr(part, "text", "") for part in block.content if getattr(part, "type", "") == "text")


class MemoryCapture:
    """Bus subscriber: user prompts, assistant text and tool observations -> the outbox."""

    def __init__(
        self,
        outbox: Outbox,
        project: str,
        session: str,
        excluded_tools: Iterable[str] = (),
        masker: Masker | None = None,
    ) -> None:
        self.outbox = outbox
        self.project = project
        self.session = session
        self.excluded = DEFAULT_EXCLUDED | frozenset(excluded_tools)
        self.masker = masker or DEFAULT_MASKER
        self._pending: dict[str, tuple[str, dict[str, Any], float]] = {}
        self._finished: dict[str, ToolFinished] = {}  # the tool's own facts, until its result arrives
        self._refused: dict[str, ToolFinished] = {}  # calls that finished without starting (denied, invalid)
        self.captured: list[dict[str, Any]] = []  # this session's records, for the end-of-session summary

    def __call__(self, event: Event) -> None:
        try:
            self._handle(event)
        except Exception:  # capture is a convenience: it never stops the agent
            log.exception("memory capture failed on %s", event.type)

    def _record(self, kind: str, text: str, metadata: dict[str, Any]) -> None:
        if not text.strip():
            return
        record = {
            "id": new_record_id(),
            "type": kind,
            "project": self.project,
            "session": self.session,
            "timestamp": now_iso(),
            "text": self.masker.text(text),
            "metadata": self.masker.obj(metadata),
        }
        self.outbox.put(record)
        if len(self.captured) < 2000:
            self.captured.append(record)

    def _handle(self, event: Event) -> None:
        if isinstance(event, ToolStarted):
            if event.name not in self.excluded:
                self._pending[event.tool_use_id] = (event.name, dict(event.input), time.monotonic())
        elif isinstance(event, ToolFinished):
            if event.tool_use_id in self._pending:
                self._finished[event.tool_use_id] = event
            elif event.name not in self.excluded:  # finished without starting: denied, or refused as invalid
                self._refused[event.tool_use_id] = event
        elif isinstance(event, UserMessage):
            text = "\n".join(
                b.text for b in event.message.content if isinstance(b, TextBlock) and not b.text.startswith(CONTEXT_TAG)
            )
            self._record("user_prompt", text, {})
        elif isinstance(event, AssistantMessage):
            text = "\n".join(b.text for b in event.message.content if isinstance(b, TextBlock))
            tools = [b.name for b in event.message.content if isinstance(b, ToolUseBlock)]
            self._record("assistant_response", text, {"tools": tools} if tools else {})
        elif isinstance(event, ToolResults):
            for block in event.message.content:
                if not isinstance(block, ToolResultBlock):
                    continue
                started = self._pending.pop(block.tool_use_id, None)
                if started is None:
                    refused = self._refused.pop(block.tool_use_id, None)
                    if refused is not None:
                        self._record("tool_observation", *not_run(refused.name, dict(refused.input), refused.summary))
                    continue
                name, tool_input, t0 = started
                finished = self._finished.pop(block.tool_use_id, None)
                facts = dict(finished.metadata) if finished is not None else None
                text, meta = observe(name, tool_input, _result_text(block), block.is_error, facts)
                meta["duration_ms"] = (
                    finished.duration_ms if finished is not None else int((time.monotonic() - t0) * 1000)
                )
                self._record("tool_observation", text, meta)
        elif isinstance(event, SessionEnded):
            self._pending.clear()
            self._finished.clear()
            self._refused.clear()
