"""Session files: where they live, the per-session write lock, and the append-only writer.

A session file is JSONL; each line is one persisted event with ``uuid``, ``parentUuid``,
``sessionId``, ``timestamp`` and ``type``. Lines are written with a single ``write`` on an
``O_APPEND`` descriptor, so every acknowledged entry is in the file even after ``kill -9``.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

from agentkeel.core.events import Event, OpaqueEvent, event_data
from agentkeel.internal.home import keel_home as keel_home
from agentkeel.internal.private import private_dir


def encode_project(path: Path) -> str:
    """Claude Code's folder name for a project path: every non-alphanumeric becomes '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(path))


def project_dir(home: Path, project: Path) -> Path:
    return home / "projects" / encode_project(project)


class SessionLocked(Exception):
    def __init__(self, path: Path, owner: dict[str, Any]) -> None:
        self.owner = owner
        when = owner.get("time")
        since = time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(when)) if isinstance(when, int | float) else ""
        who = f"pid {owner.get('pid')} on {owner.get('host')}" if owner.get("pid") else "another keel process"
        super().__init__(
            f"session {path.stem} is in use by {who}{since}; wait for it to finish, or start a new session"
        )


class SessionLock:
    """An exclusive ``flock`` on ``<session>.jsonl.lock``, held for the life of the session.

    The kernel releases it when the holder dies, so there is no stale-lock guessing, and
    ``flock`` locks belong to one open file description: two SessionLocks on one session
    conflict even inside one process (two SDK clients, a server). The file records the
    holder (pid, host, time) for the message a second process gets. It is never unlinked: a
    lock on an unlinked file protects nothing against a newcomer who creates a new one.
    """

    def __init__(self, session_file: Path) -> None:
        self.path = session_file.with_name(session_file.name + ".lock")
        self._fd = -1

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def acquire(self) -> None:
        if self._fd >= 0:
            raise RuntimeError(f"{self.path} is already held by this SessionLock")
        private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _owner_of(fd)
            os.close(fd)
            raise SessionLocked(self.path.with_suffix(""), owner) from None
        except BaseException:
            os.close(fd)
            raise
        info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "time": time.time()}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, info, 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        try:
            os.ftruncate(fd, 0)  # no holder any more
        except OSError:
            pass
        os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> SessionLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _owner_of(fd: int) -> dict[str, Any]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class SessionWriteError(OSError):
    """The session file could not take an entry; the message names the file and the cause."""

    def __str__(self) -> str:
        return str(self.strerror) if self.strerror else super().__str__()


class SessionWriter:
    """Appends persisted events to a session file; subscribe it to the bus as *critical*.

    A failed append (a full disk, a read-only or vanished folder) raises
    :class:`SessionWriteError` once and the writer stops: nothing later is written after a
    gap, and the run is stopped by its owner with that one line. So does a file that was
    deleted under the open descriptor (``KEEL_HOME`` removed mid-session): writes to it would
    still succeed, into an inode no name reaches, and the transcript written so far is gone
    with it; it is not recreated (a log without its beginning is not the session). Entries are
    written as given; redaction happens once, on the bus, before any reader sees the event.
    """

    def __init__(self, path: Path, session_id: str, *, parent_uuid: str | None = None) -> None:
        self.path = path
        self.session_id = session_id
        self.last_uuid = parent_uuid
        self.failure: str | None = None
        private_dir(path.parent)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._needs_newline = self._ends_torn()
        # a file system that reports no link count (0 from the start) is never taken for a deleted file
        self._watch_links = os.fstat(self._fd).st_nlink > 0

    def _ends_torn(self) -> bool:
        """A previous crash may have left a partial last line: start ours on a fresh line."""
        try:
            with self.path.open("rb") as f:
                f.seek(0, os.SEEK_END)
                if f.tell() == 0:
                    return False
                f.seek(-1, os.SEEK_END)
                return f.read(1) != b"\n"
        except OSError:
            return False

    def __call__(self, event: Event) -> None:
        if not event.persist or self._fd < 0 or self.failure is not None:
            return
        data = _entry(event, self.last_uuid, self.session_id) + b"\n"
        if self._needs_newline:
            data = b"\n" + data
            self._needs_newline = False
        try:
            if self._watch_links and os.fstat(self._fd).st_nlink == 0:
                self._deleted()
            written = os.write(self._fd, data)
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError as e:
            if isinstance(e, SessionWriteError):
                raise
            self.failure = f"cannot write the session file {self.path}: {e.strerror or e}"
            raise SessionWriteError(e.errno, self.failure) from None
        self.last_uuid = event.uuid

    def _deleted(self) -> None:
        """The file has no name left: stop, saying so (a full stop, not a recreated half log)."""
        self.failure = (
            f"the session file {self.path} was deleted while the session was running (KEEL_HOME removed?); "
            "its transcript is lost, so the run stopped"
        )
        raise SessionWriteError(errno.ENOENT, self.failure)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                os.fsync(self._fd)
            except OSError:
                pass
            os.close(self._fd)
            self._fd = -1


def _entry(event: Event, parent: str | None, session: str) -> bytes:
    """The log line of an event: ``{"uuid", "parentUuid", "sessionId", **event_data(event)}`` encoded
    by ``_encode``. A typed event is encoded straight from its Struct (no plain-data copy of it
    first: a compaction's kept messages, a tool result's text), which writes ``"type"``, its uuid,
    then the rest; the uuid moves to the front with the two fields the log adds, byte for byte the
    line the plain-data way writes."""
    import msgspec  # loaded with the events already

    tag = event.__struct_config__.tag
    if isinstance(tag, str) and event.__struct_config__.tag_field == "type" and not isinstance(event, OpaqueEvent):
        try:
            body = msgspec.json.encode(event)
        except (TypeError, ValueError, OverflowError):
            body = b""  # the plain-data way encodes it (or raises) as it did
        encode = msgspec.json.encode
        kind = b'"type":' + encode(tag) + b","
        head = b"{" + kind + b'"uuid":' + encode(event.uuid) + b","
        if body.startswith(head):
            front = encode({"uuid": event.uuid, "parentUuid": parent, "sessionId": session})
            return front[:-1] + b"," + kind + body[len(head) :]
    return _encode({"uuid": event.uuid, "parentUuid": parent, "sessionId": session, **event_data(event)})


def _encode(entry: dict[str, Any]) -> bytes:
    """One entry as compact UTF-8 JSON. msgspec writes what ``json.dumps(ensure_ascii=False,
    separators=(",", ":"))`` writes (but for a float's exponent, written without "+" or a leading
    zero, and NaN or infinity, which JSON has not, written null), ten times faster on a tool
    result's long text. What it cannot encode goes the ``json`` way: encoded, or raised as before."""
    import msgspec  # loaded with the events already

    try:
        return msgspec.json.encode(entry)
    except (TypeError, ValueError, OverflowError):
        return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
