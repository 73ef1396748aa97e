"""Writing a user's file: whole or not at all, through symlinks, with the mode the user expects, no litter.

:func:`atomic_write` writes a temporary file beside the target and renames it over the target,
so a reader (or a kill) sees the old file or the new one, never half of one. Around that:

* **Symlinks.** A path that is a symlink (or runs through one) is written at its real path: the
  link stays a link and its target changes. The permission engine checks a file tool's path
  both as given and with symlinks resolved (``permissions/paths.candidates``), so the real path
  was allowed before the call ran.
* **Read-only files.** A file this process may not write (``os.access``) is refused, as an
  in-place write would be: renaming over it would get round its mode.
* **Modes.** An existing file keeps its permission bits, and its owner and group where this
  process may set them (root editing a user's file leaves it the user's); a new one gets
  ``0666 & ~umask``, as any editor's would (the kernel applies the umask and any default ACL to the ``open``).
* **No temporary file left in the project.** Before a temporary file is created, its path is
  recorded in ``$KEEL_HOME/tmp/pending/`` in an entry this process holds an ``flock`` on until
  the rename is done. A keel killed in between leaves the entry unlocked; the next keel to start
  (:func:`sweep`, run when the built-in tools are made) removes the temporary file it names, and
  the entry. An entry is only ever acted on when no live process holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from pathlib import Path

from agentkeel.core.tools import ToolError

TMP_SUFFIX = ".keel-tmp"
_TMP_NAME = re.compile(r"^\..+\.[0-9a-f]{16}\.keel-tmp$")
_NEW = os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


def pending_dir(env: dict[str, str] | None = None) -> Path:
    from agentkeel.internal.home import keel_home

    return keel_home(env) / "tmp" / "pending"


def real_target(path: Path) -> Path:
    """Where writing ``path`` lands: the path with every symlink resolved (a dangling link: its target)."""
    return Path(os.path.realpath(path))


class _Pending:
    """The record of one temporary file while it exists (see the module's doc)."""

    def __init__(self, tmp: Path) -> None:
        self.fd: int | None = None
        self.entry: Path | None = None
        try:
            where = pending_dir()
            where.mkdir(parents=True, exist_ok=True)
            entry = where / f"{os.getpid()}-{os.urandom(8).hex()}"
            fd = os.open(entry, _NEW | os.O_RDWR, 0o600)
        except OSError:
            return  # keel's home is not writable: the write goes on (a convenience lost, not the user's file)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, os.fsencode(tmp))
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                entry.unlink()
            return
        self.fd, self.entry = fd, entry

    def done(self) -> None:
        if self.entry is not None:
            with contextlib.suppress(OSError):
                self.entry.unlink()
        if self.fd is not None:
            os.close(self.fd)
        self.fd = self.entry = None


def sweep(env: dict[str, str] | None = None) -> list[Path]:
    """Remove the temporary files of keel processes that were killed mid-write; the files removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(pending_dir(env)))
    except OSError:
        return removed
    for e in entries:
        try:
            fd = os.open(e.path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # its writer is alive
        try:
            raw = os.read(fd, 1 << 16)
            if not raw and time.time() - os.fstat(fd).st_mtime < 60:
                continue  # just made: its writer has not locked it yet
            tmp = Path(os.fsdecode(raw))
            if tmp.is_absolute() and _TMP_NAME.match(tmp.name) and tmp.is_file() and not tmp.is_symlink():
                tmp.unlink()
                removed.append(tmp)
            Path(e.path).unlink()
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def _keep_owner_and_mode(fd: int, st: os.stat_result) -> None:
    """The new file gets the old one's owner and group where this process may give them (root
    editing a user's file leaves it the user's; a group kept when the user is in it), then its mode."""
    if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(OSError):
            os.fchown(fd, st.st_uid, st.st_gid)
        if st.st_gid != os.getegid():
            with contextlib.suppress(OSError):
                os.fchown(fd, -1, st.st_gid)
    os.fchmod(fd, st.st_mode & 0o7777)  # after the chown, which may clear set-id bits


def atomic_write(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` (see the module's doc); the real path written."""
    target = real_target(path)
    try:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):  # a file where a folder of the path should be
            blocker = next((p for p in (target.parent, *target.parent.parents) if p.exists() and not p.is_dir()), None)
            raise ToolError(f"Cannot write {path}: {blocker or target.parent} is a file, not a folder") from None
        try:
            st: os.stat_result | None = target.stat()
        except FileNotFoundError:
            st = None
        if st is not None and not os.access(target, os.W_OK):  # the rename would get round the file's mode
            raise ToolError(
                f"Cannot write {path}: the file is read-only (mode {st.st_mode & 0o777:o}); "
                "it was left as it is (make it writable first if it should change)"
            )
        short = os.fsencode(target.name)[:200].decode("utf-8", "ignore") or "file"  # a name fits in 255 bytes
        tmp = target.parent / f".{short}.{os.urandom(8).hex()}{TMP_SUFFIX}"
        pending = _Pending(tmp)
        try:
            fd = os.open(tmp, _NEW | os.O_WRONLY, 0o666)  # a new file: 0666 & ~umask, by the kernel
            try:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                    if st is not None:
                        _keep_owner_and_mode(fd, st)
                finally:
                    os.close(fd)
                tmp.replace(target)
            except BaseException:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                raise
        finally:
            pending.done()
    except OSError as e:
        raise ToolError(f"Cannot write {path}: {e.strerror or e}") from None
    return target
