"""Content-addressed storage of file contents for checkpoints: ``objects/<sha256>``.

A checkpoint names a path's content by a *state*: the sha256 of a stored object, ``None`` (no
such file), ``UNKNOWN`` (not recorded) or ``link:<target>`` (a symbolic link, recorded as a
link: never followed, never stored as its target's bytes)."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

MAX_OBJECT = 32 * 1024 * 1024  # a file larger than this is not snapshotted (its checkpoint says so)
UNKNOWN = ""  # a checkpoint's "before" that was not recorded (too large, unreadable)
LINK = "link:"  # a symbolic link: "link:<target>" (the target as os.readlink gives it)


class CheckpointError(Exception):
    """A checkpoint object is missing or does not hold what its name says; the message is one line."""


class StoreError(CheckpointError):
    """The store could not be written (disk full, read-only, gone): a content cannot be kept."""


def link_state(target: str) -> str:
    return LINK + target


class ObjectStore:
    """Content-addressed blobs: ``objects/<sha256>``, written once (temp file + rename), never changed."""

    def __init__(self, root: Path) -> None:
        self.root = root / "objects"

    def path(self, sha: str) -> Path:
        return self.root / sha

    def put(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        target = self.root / sha
        if target.exists():
            return sha
        tmp: str | None = None
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".obj-", dir=self.root)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            Path(tmp).replace(target)
        except OSError as e:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            raise StoreError(f"the checkpoint store {self.root} cannot be written: {e.strerror or e}") from None
        except BaseException:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            raise
        return sha

    def snapshot(self, path: Path) -> str | None:
        """Store ``path``'s content and give its state: a sha, None when it does not exist,
        ``link:<target>`` for a symbolic link (not followed), UNKNOWN when it cannot be read (or is
        too large). Raises StoreError when the content was read but the store cannot keep it."""
        state, st = _lstat_state(path)
        if st is None:
            return state
        if st.st_size > MAX_OBJECT:
            return UNKNOWN
        try:
            data = path.read_bytes()
        except OSError:
            return UNKNOWN
        return self.put(data)

    def get(self, sha: str, for_path: str = "") -> bytes:
        where = f" for {for_path}" if for_path else ""
        try:
            data = self.path(sha).read_bytes()
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint object {sha[:12]}{where} is missing ({self.root})") from None
        except OSError as e:
            raise CheckpointError(f"checkpoint object {sha[:12]}{where} is unreadable: {e.strerror or e}") from None
        if hashlib.sha256(data).hexdigest() != sha:
            raise CheckpointError(f"checkpoint object {sha[:12]}{where} is corrupt (its content does not match)")
        return data


def current(path: Path) -> str | None:
    """A path's state now, as a checkpoint names it (the link itself for a symbolic link)."""
    state, st = _lstat_state(path)
    return state if st is None else file_sha(path)


def _lstat_state(path: Path) -> tuple[str | None, os.stat_result | None]:
    """What ``lstat`` alone tells of a path's state: ``(state, None)`` for a missing path (None), one
    that cannot be read or is not a regular file (UNKNOWN) and a symbolic link (``link:<target>``,
    not followed); ``("", stat)`` for a regular file, whose state is its content's."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None, None
    except OSError:
        return UNKNOWN, None
    if stat.S_ISLNK(st.st_mode):
        try:
            return link_state(str(path.readlink())), None
        except OSError:
            return UNKNOWN, None
    if not stat.S_ISREG(st.st_mode):
        return UNKNOWN, None
    return "", st


def file_sha(path: Path) -> str | None:
    """The sha256 of a file's content now (None: absent; UNKNOWN: not a readable regular file)."""
    try:
        with path.open("rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return UNKNOWN
            h = hashlib.sha256()
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
            return h.hexdigest()
    except FileNotFoundError:
        return None
    except OSError:
        return UNKNOWN
