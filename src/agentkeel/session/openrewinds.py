"""The project's register of open rewinds: ``projects/<p>/open-rewinds/<session id>``.

A code rewind writes its session's marker (durably: the file and its folder fsynced) before it
logs its ``rewind_intent``, and removes it after its ``rewind_done``. Every session start in the
project (new or resumed, headless, TUI, SDK) lists the folder and, when a marker names another
session, finishes that session's open rewind (:func:`agentkeel.session.history.recover_open_rewinds`),
so a rewind killed half-way does not wait for its own session to be resumed. A start with no
marker costs this one listing and imports nothing more.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from agentkeel.internal.private import FILE_MODE, private_dir

FOLDER = "open-rewinds"


def marker(session_file: Path) -> Path:
    return session_file.parent / FOLDER / session_file.stem


def listed(sessions: Path) -> list[str]:
    """The session ids with a marker in the project folder ``sessions`` (none: the folder is absent
    or empty). Dot names are a marker being written."""
    try:
        names = [entry.name for entry in (sessions / FOLDER).iterdir()]
    except OSError:
        return []
    return sorted(n for n in names if not n.startswith("."))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_marker(session_file: Path, rewind_id: str) -> None:
    """Write the session's marker and make it durable; raises OSError when it cannot be."""
    path = marker(session_file)
    made = not path.parent.is_dir()
    private_dir(path.parent)
    if made:
        _fsync_dir(path.parent.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    try:
        os.write(fd, rewind_id.encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_dir(path.parent)


def close_marker(session_file: Path) -> None:
    """Remove the session's marker, if any (a marker left by a failed removal is found stale later)."""
    with contextlib.suppress(OSError):
        marker(session_file).unlink(missing_ok=True)
