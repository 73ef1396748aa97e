"""Session files: where they live, the per-session write lock, and the append-only writer.

A session file is JSONL; each line is one persisted event with ``uuid``, ``parentUuid``,
``sessionId``, ``timestamp`` and ``type``. Lines are written with a single ``write`` on an
``O_APPEND`` descriptor, so every acknowledged entry is in the file even after ``kill -9``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from agentkeel.core.events import Event

STALE_FOREIGN_LOCK_S = 3600.0


def keel_home(env: dict[str, str] | None = None) -> Path:
    env = env if env is not None else dict(os.environ)
    return Path(env.get("KEEL_HOME") or Path.home() / ".keel").expanduser()


def encode_project(path: Path) -> str:
    """Claude Code's folder name for a project path: every non-alphanumeric becomes '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(path))


def project_dir(home: Path, project: Path) -> Path:
    return home / "projects" / encode_project(project)


class SessionLocked(Exception):
    def __init__(self, path: Path, owner: dict[str, Any]) -> None:
        self.owner = owner
        super().__init__(
            f"session {path.stem} is in use by pid {owner.get('pid')} on {owner.get('host')} since "
            f"{owner.get('time')}; wait for it to finish, or start a new session (or use --fork-session)"
        )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SessionLock:
    """``O_CREAT|O_EXCL`` lock file next to the session; re-entrant within a process."""

    _held: ClassVar[dict[str, int]] = {}

    def __init__(self, session_file: Path) -> None:
        self.path = session_file.with_name(session_file.name + ".lock")

    def acquire(self) -> None:
        key = str(self.path)
        if self._held.get(key):
            self._held[key] += 1
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except FileExistsError:
                owner = self._owner()
                if self._stale(owner):
                    self.path.unlink(missing_ok=True)
                    continue
                raise SessionLocked(self.path.with_suffix(""), owner) from None
            with os.fdopen(fd, "w") as f:
                json.dump({"pid": os.getpid(), "host": socket.gethostname(), "time": time.time()}, f)
            self._held[key] = 1
            return
        raise SessionLocked(self.path.with_suffix(""), self._owner())

    def release(self) -> None:
        key = str(self.path)
        count = self._held.get(key, 0)
        if count > 1:
            self._held[key] = count - 1
            return
        self._held.pop(key, None)
        if self._owner().get("pid") == os.getpid():
            self.path.unlink(missing_ok=True)

    def _owner(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    @staticmethod
    def _stale(owner: dict[str, Any]) -> bool:
        pid, host, when = owner.get("pid"), owner.get("host"), owner.get("time")
        if not isinstance(pid, int) or not isinstance(when, int | float):
            return True  # unreadable or torn lock file
        if host == socket.gethostname():
            return not _pid_alive(pid)
        return time.time() - when > STALE_FOREIGN_LOCK_S

    def __enter__(self) -> SessionLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


Transform = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class WriteError:
    message: str


class SessionWriter:
    """Appends persisted events to a session file; subscribe it to the event bus."""

    def __init__(
        self, path: Path, session_id: str, *, transform: Transform | None = None, parent_uuid: str | None = None
    ) -> None:
        self.path = path
        self.session_id = session_id
        self.transform = transform
        self.last_uuid = parent_uuid
        self.errors: list[WriteError] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._needs_newline = self._ends_torn()

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
        if not event.persist or self._fd < 0:
            return
        entry: dict[str, Any] = {
            "uuid": event.uuid,
            "parentUuid": self.last_uuid,
            "sessionId": self.session_id,
            **event.model_dump(mode="json"),
        }
        if self.transform is not None:
            entry = self.transform(entry)
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
        if self._needs_newline:
            line = "\n" + line
            self._needs_newline = False
        data = line.encode("utf-8")
        try:
            written = os.write(self._fd, data)
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError as e:
            self.errors.append(WriteError(f"cannot write session {self.path}: {e.strerror}"))
            raise
        self.last_uuid = event.uuid

    def close(self) -> None:
        if self._fd >= 0:
            try:
                os.fsync(self._fd)
            except OSError:
                pass
            os.close(self._fd)
            self._fd = -1
