"""The session's transcript: :class:`Log` (its file, held under a lock, and what it held when
resumed), and which file a session writes (a new one, or the one -r, -c or --fork-session names)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from agentkeel.app.assembly import KeelError, forked
from agentkeel.app.options import RuntimeOptions
from agentkeel.app.place import Place
from agentkeel.session.store import SessionLock, SessionLocked, SessionWriter

if TYPE_CHECKING:
    from agentkeel.session.load import LoadedSession  # session.load: only to resume (-r, -c)


class Log(msgspec.Struct):
    """The session's transcript: its file, held under a lock, and what it held when resumed."""

    path: Path
    prior: bool  # resumed (-r, -c)
    lock: SessionLock
    writer: SessionWriter
    resumed: LoadedSession | None = None

    @property
    def session_id(self) -> str:
        return self.path.stem


def open_log(place: Place, opts: RuntimeOptions) -> Log:
    path, prior = pick_session(place.sessions, opts)
    lock = SessionLock(path)
    try:
        lock.acquire()
    except SessionLocked as e:
        raise KeelError(str(e)) from None
    except OSError as e:
        raise KeelError(f"cannot lock session {path}: {e.strerror or e}") from None
    try:
        resumed = None
        if prior:  # session.load: only to resume (-r, -c)
            from agentkeel.session.load import load_session

            resumed = load_session(path)
        writer = SessionWriter(path, path.stem, parent_uuid=resumed.last_uuid if resumed else None)
    except OSError as e:
        lock.release()
        raise KeelError(f"cannot use session file {path}: {e.strerror or e}") from None
    return Log(path, prior, lock, writer, resumed)


def pick_session(sessions: Path, opts: RuntimeOptions) -> tuple[Path, bool]:
    """The session file to write: the one resumed (-r, -c; forked with --fork-session) or a new one."""
    if (opts.resume_session_at or opts.resume_drops_turn) and not (opts.fork_session and opts.resume is not None):
        raise KeelError("--resume-session-at and --resume-drops-turn need -r SESSION_ID and --fork-session")
    if opts.resume is not None or opts.continue_session:
        from agentkeel.session.load import AmbiguousSession, find_session, list_sessions
    if opts.resume is not None:
        ref = opts.resume.strip()
        if not ref:
            raise KeelError("-r needs a session id (or a unique prefix): see `keel sessions list`")
        try:
            found = find_session(sessions, ref)
        except AmbiguousSession as e:
            raise KeelError(str(e)) from None
        if found is None:
            raise KeelError(f"no session '{ref}' for this project: see `keel sessions list`")
        if not opts.fork_session:
            return found, True
        return forked(found, sessions, opts.resume_session_at, opts.resume_drops_turn), True
    if opts.continue_session:
        existing = list_sessions(sessions)
        if not existing:
            raise KeelError("no earlier session to continue in this directory: run without -c to start one")
        return forked(existing[0].path, sessions) if opts.fork_session else existing[0].path, True
    if opts.session_id is not None:
        try:
            chosen = str(uuid.UUID(opts.session_id))
        except ValueError:
            raise KeelError(f"--session-id must be a UUID, not {opts.session_id!r}") from None
        if (sessions / f"{chosen}.jsonl").exists():
            raise KeelError(f"session {chosen} already exists: resume it with -r {chosen}")
        return sessions / f"{chosen}.jsonl", False
    return sessions / f"{uuid.uuid4()}.jsonl", False
