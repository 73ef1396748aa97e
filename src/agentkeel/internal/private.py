"""keel's own files are private to the user: KEEL_HOME and every folder keel makes in it 0700,
transcripts, the session index, the memory store and logs 0600.

Modes are given at creation (``mkdir(mode=)``, ``os.open(..., 0o600)``, a ``chmod`` of a SQLite file
right after it was created and before anything is written to it: SQLite gives its ``-wal``,
``-shm`` and ``-journal`` files the database's mode). The process umask is never changed: the
Write tool must keep honouring it for the user's project files.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """``mkdir -p`` whose every newly made folder is 0700 (folders that already exist are left alone)."""
    missing: list[Path] = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            folder.mkdir(mode=DIR_MODE)
    if not path.is_dir():
        path.mkdir()  # the usual FileExistsError / NotADirectoryError for a file in the way
    return path


def private_home(home: Path) -> str | None:
    """Create KEEL_HOME 0700, or tighten an existing one other users can enter to 0700.

    Returns a line for the log when it changed or could not change an existing folder's mode.
    Only a folder of this user, not world-writable and without the sticky bit (never ``/tmp``),
    is tightened; any other too-open one is reported, not changed."""
    if not home.exists():
        private_dir(home)
        return None
    try:
        st = home.stat()
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or not st.st_mode & 0o077:
        return None
    mode = stat.S_IMODE(st.st_mode)
    shared = mode & (stat.S_ISVTX | stat.S_IWOTH) or st.st_uid != os.getuid()
    if not shared:
        try:
            home.chmod(DIR_MODE)
            return f"KEEL_HOME {home} was open to other users (mode {mode:o}): made it {DIR_MODE:o}"
        except OSError:
            pass
    return (
        f"KEEL_HOME {home} is open to other users (mode {mode:o}) and was left as it is: "
        f"`chmod 700 {home}` or point KEEL_HOME at a private folder"
    )


def private_file(path: Path) -> None:
    """Make a file keel has just created 0600 (a SQLite database before its first write)."""
    with contextlib.suppress(OSError):
        path.chmod(FILE_MODE)


def open_private(path: Path, flags: int = os.O_WRONLY | os.O_APPEND | os.O_CREAT) -> int:
    """``os.open`` with 0600 for a file keel creates (a log)."""
    return os.open(path, flags | os.O_CLOEXEC, FILE_MODE)


def sync_to_disk(path: Path) -> None:
    """Best effort: ``fsync`` a file or a folder (its new entries), so a rename or a link survives a
    crash where the file system allows it; a path that cannot be opened or synced is left as is."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
