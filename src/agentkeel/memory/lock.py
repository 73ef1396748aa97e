"""Who may have a memory file open: a lock file beside each one, so a repair never swaps a file
another process still writes to.

``keel mem repair`` puts a rebuilt file in the place of a damaged one by renaming. A process
that had the old file open (a session, `keel serve`, `keel mem mcp` or `web`, the background
embedding pass) would go on writing to the renamed-away file, and those writes would be lost.
So every process that opens ``memory.db`` or an outbox holds a *shared* ``flock`` on
``<name>.lock`` beside it for as long as it has the file open, and a repair takes it
*exclusive*:

- a store or outbox takes the lock once, when it opens the file, and lets it go when it closes
  (one lock per process and file, counted: nothing is locked per read or write);
- ``keel mem repair`` waits ``EXCLUSIVE_WAIT_S`` for the exclusive lock; if another process
  holds the file, it changes nothing and says which process (from ``/proc/locks``) in one line;
- a process that opens the file while a repair runs waits for it (``SHARED_WAIT_S``), then opens
  the rebuilt file, never the old one;
- ``keel mem check`` only reads: it takes the shared lock and runs beside sessions.

The kernel drops a flock when its holder exits, however it ends (kill -9 included), so a dead
process never blocks a repair. The lock file is never deleted or renamed (deleting a lock file
lets two processes lock two different files). A folder where the lock file cannot be made
(a read-only mount) is used without a lock: no repair can rename anything there either.
PostgreSQL stores take no lock (a repair does not apply to them); their outbox file does.
Linux and macOS (``fcntl.flock``); naming the holder needs ``/proc/locks`` (Linux).
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SHARED_WAIT_S = 20.0  # opening a file a repair holds: repairs take seconds
EXCLUSIVE_WAIT_S = 2.0  # a repair waits this long for the processes using the file to close it
POLL_S = 0.05
LOCK_SUFFIX = ".lock"

# `keel mem ACTION` names what a `keel mem` process holding a store is doing
MEM_ACTIONS = frozenset(
    "search timeline get import export stats forget mirror sync retry check repair reindex embed mcp web".split()
)


class MemoryBusy(RuntimeError):
    """Another process holds a memory file in a way that forbids what was asked. One line."""


def lock_file(path: Path) -> Path:
    return path.with_name(path.name + LOCK_SUFFIX)


@dataclass
class _Entry:
    fd: int | None  # None: no lock could be made here (a read-only folder)
    exclusive: bool
    count: int


_held: dict[str, _Entry] = {}
_guard = threading.RLock()  # reentrant: a collected Hold may release while this thread holds it


class Hold:
    """This process's hold on a memory file's lock; ``release`` once it closes the file (again is a no-op)."""

    def __init__(self, key: str) -> None:
        self._key: str | None = key

    def __del__(self) -> None:
        # a store or outbox dropped without close(): its SQLite connection is closed as it is
        # collected, and so is its hold, with it (the file is no longer open here)
        if self._key is not None:
            try:
                self.release()
            except Exception:  # at interpreter exit the module may be gone; the kernel frees the lock
                pass

    def release(self) -> None:
        with _guard:
            key, self._key = self._key, None
            if key is None:
                return
            entry = _held[key]
            entry.count -= 1
            if entry.count == 0:
                del _held[key]
                if entry.fd is not None:
                    os.close(entry.fd)  # the kernel drops the flock with the last descriptor


def hold(path: Path, *, exclusive: bool = False, wait_s: float | None = None) -> Hold:
    """Lock ``path``'s lock file shared (a process using the file) or exclusive (a repair).

    Waits up to ``wait_s`` (``SHARED_WAIT_S`` / ``EXCLUSIVE_WAIT_S``), then raises
    :class:`MemoryBusy` naming the process in the way. Within one process the lock is taken once
    and counted: a repair opens the store it holds exclusively without waiting on itself."""
    lock = lock_file(path)
    key = str(lock.parent.resolve() / lock.name)
    wait = (EXCLUSIVE_WAIT_S if exclusive else SHARED_WAIT_S) if wait_s is None else wait_s
    with _guard:
        if _join(key, path, exclusive):
            return Hold(key)
    fd = _open(lock)
    if fd is not None:
        try:
            _acquire(fd, path, lock, exclusive, wait)  # without the guard: other files' holds go on meanwhile
        except BaseException:
            os.close(fd)
            raise
    with _guard:
        try:
            joined = _join(key, path, exclusive)
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
        if not joined:
            _held[key] = _Entry(fd, exclusive, 1)
            return Hold(key)
    if fd is not None:
        os.close(fd)  # another thread of this process took it meanwhile: its hold is counted instead
    return Hold(key)


def _join(key: str, path: Path, exclusive: bool) -> bool:
    """Count one more hold on a lock this process has already (under ``_guard``); False if it has none."""
    entry = _held.get(key)
    if entry is None:
        return False
    if exclusive and not entry.exclusive:
        raise MemoryBusy(f"{path} is open in this process (pid {os.getpid()}): close it before repairing it")
    entry.count += 1
    return True


def _open(lock: Path) -> int | None:
    try:
        return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
    try:
        return os.open(lock, os.O_RDONLY | os.O_CLOEXEC)  # flock needs no write access
    except OSError:
        return None  # a read-only folder without a lock file: nothing here can be renamed either


def _acquire(fd: int, path: Path, lock: Path, exclusive: bool, wait_s: float) -> None:
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    who = describe(holders(lock))
    if exclusive:
        raise MemoryBusy(
            f"{who} {'is' if _one(who) else 'are'} using the memory store ({path}); "
            f"end {'it' if _one(who) else 'them'}, then run `keel mem repair`"
        )
    raise MemoryBusy(f"{path} is being repaired by {who}; try again once it has finished")


def _one(who: str) -> bool:
    return " and " not in who


def holders(lock: Path) -> list[int]:
    """The processes holding a flock on ``lock`` (from ``/proc/locks``; [] where there is none)."""
    try:
        st = lock.stat()
        table = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return []
    exact = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    by_dev: list[int] = []
    by_inode: list[int] = []  # an overlay mount reports the inode under the lower file system's device
    for line in table.splitlines():
        parts = line.split()
        if len(parts) < 6 or "->" in parts or parts[1] != "FLOCK":  # "->": waiting, not holding
            continue
        try:
            pid = int(parts[4])
        except ValueError:
            continue
        if pid <= 0 or pid == os.getpid():
            continue
        if parts[5] == exact:
            by_dev.append(pid)
        elif parts[5].rsplit(":", 1)[-1] == str(st.st_ino):
            by_inode.append(pid)
    return sorted(set(by_dev or by_inode))


def describe(pids: list[int]) -> str:
    """ "a keel session (pid 12)", "`keel serve` (pid 34) and `keel mem mcp` (pid 56)"..."""
    if not pids:
        return "another keel process"
    named = [_describe(pid) for pid in pids[:3]]
    if len(pids) > 3:
        named.append(f"{len(pids) - 3} more")
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def _describe(pid: int) -> str:
    try:
        argv = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return f"a keel session (pid {pid})"
    words = argv[1:]
    if "mem" in words:
        action = next((w for w in words[words.index("mem") + 1 :] if w in MEM_ACTIONS), None)
        if action is not None:
            return f"`keel mem {action}` (pid {pid})"
    if "serve" in words[:3]:
        return f"`keel serve` (pid {pid})"
    if any(Path(a).name == "keel" or "agentkeel" in a for a in argv[:3]):
        return f"a keel session (pid {pid})"
    name = Path(argv[0]).name if argv else "?"
    return f"a process using keel's memory (pid {pid}, {name})"
