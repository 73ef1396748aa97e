"""Putting a session's files back as its checkpoints recorded them: what a code rewind will do
(each path's target state, and the files changed since keel last changed them), and doing it.

A file is written to a temporary file beside it and renamed into place; a symbolic link is
replaced, never followed. A rewind killed mid-write leaves only such a temporary file, which
the recovery of the rewind removes (:func:`sweep_temp`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import stat
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agentkeel.core.events import Event
from agentkeel.session.events import Checkpoint
from agentkeel.session.objects import LINK, UNKNOWN, CheckpointError, ObjectStore, current

TMP_SUFFIX = ".keel-rewind-tmp"  # a rewind's temporary files (removed by the next start after a kill)


def files_before(events: list[Event], position: int) -> dict[str, str | None]:
    """Each path a checkpoint after ``position`` names, with its content at ``position``."""
    before: dict[str, str | None] = {}
    for event in events[position + 1 :]:
        if isinstance(event, Checkpoint):
            for path, sha in event.files.items():
                before.setdefault(path, sha)
    return before


def last_left(events: list[Event]) -> dict[str, str | None]:
    """Each path any checkpoint names, with the state keel last left it in (UNKNOWN when the log
    does not say: an older log, or a file keel could not read)."""
    left: dict[str, str | None] = {}
    for event in events:
        if isinstance(event, Checkpoint):
            for path in event.files:
                left[path] = event.after.get(path, UNKNOWN)
    return left


@dataclass
class _Plan:
    """What a code rewind will do: each path to change with its target state; the paths whose
    current content keel did not leave there (the user's, or unknown); what cannot be restored."""

    targets: dict[str, str | None] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def plan_rewind(store: ObjectStore, wanted: dict[str, str | None], left: dict[str, str | None]) -> _Plan:
    plan = _Plan()
    for path_s, want in sorted(wanted.items()):
        now = current(Path(path_s))
        if want == now and want != UNKNOWN:
            continue
        if want == UNKNOWN:
            plan.problems.append(
                f"{path_s}: its content before was not recorded (too large, unreadable, or the checkpoint "
                "store could not keep it)"
            )
            continue
        if want is not None and not want.startswith(LINK):
            try:
                store.get(want, path_s)  # verified now: a damaged object leaves the file as it is
            except CheckpointError as e:
                plan.problems.append(str(e))
                continue
        known = left.get(path_s, UNKNOWN)
        if known == UNKNOWN or now != known:
            plan.conflicts.append(path_s)
        plan.targets[path_s] = want
    return plan


def _tmp_prefix(path: Path) -> str:
    """The start of a rewind's temporary file's name beside ``path`` (kept within 255 bytes)."""
    return "." + (os.fsencode(path.name)[:200].decode("utf-8", "ignore") or "file") + "."


def _apply(store: ObjectStore, path: Path, want: str | None) -> None:
    """Put ``path`` in the state ``want``; a symbolic link is replaced, never followed."""
    if want is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    if want.startswith(LINK):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{_tmp_prefix(path)}{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
        tmp.symlink_to(want[len(LINK) :])
        try:
            tmp.replace(path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return
    _write_back(path, store.get(want, str(path)))


def _write_back(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        st: os.stat_result | None = path.lstat()
        if st is not None and not stat.S_ISREG(st.st_mode):
            st = None
    except OSError:
        st = None
    # a file that is not there now is made 0666 & ~umask (by the kernel), as any editor's would be
    tmp = path.parent / f"{_tmp_prefix(path)}{uuid.uuid4().hex[:8]}{TMP_SUFFIX}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if st is not None:  # the file keeps its owner (where this process may) and mode
                if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                    with contextlib.suppress(OSError):
                        os.fchown(f.fileno(), st.st_uid, st.st_gid)
                os.fchmod(f.fileno(), st.st_mode & 0o7777)
        tmp.replace(path)  # a link at ``path`` is replaced by the file, its target untouched
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def apply_all(store: ObjectStore, targets: dict[str, str | None]) -> tuple[list[str], list[str]]:
    """Apply each target; returns the paths now at their target and the problems."""
    done: list[str] = []
    problems: list[str] = []
    for path_s, want in targets.items():
        try:
            _apply(store, Path(path_s), want)
            done.append(path_s)
        except CheckpointError as e:
            problems.append(str(e))
        except OSError as e:
            problems.append(f"cannot restore {path_s}: {e.strerror or e}")
    return done, problems


def sweep_temp(paths: Iterable[str]) -> None:
    """A rewind killed mid-write leaves ``.<name>.*.keel-rewind-tmp`` next to the file: remove it
    (only a rewind's own temporary files, never another writer's)."""
    for path in map(Path, paths):
        with contextlib.suppress(OSError):
            for tmp in path.parent.glob(f"{glob.escape(_tmp_prefix(path))}*{TMP_SUFFIX}"):
                tmp.unlink(missing_ok=True)
