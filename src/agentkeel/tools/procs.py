"""The processes Bash starts: tagged, found, killed; and the watchdog that kills them if keel dies.

Every shell keel starts has ``KEEL_SHELL_TAG`` in its environment: ``<session>:<call>``,
appended (space-separated) to a tag it inherited, so a keel run inside a keel Bash call
keeps the outer tag too. Everything the shell starts inherits it, also what leaves the
shell's process group (``setsid``, a double fork). keel finds a call's processes by group
(``killpg``) and by tag (``/proc/<pid>/environ``, Linux). A group is signalled only while
a tagged process is in it (its number may have been reused once it emptied), so a process
that clears its environment dies with a tagged member of its group, or escapes.

Run as a script, ``python -I -S procs.py SESSION``, this file is a session's watchdog: it
reads a pipe from keel on stdin until EOF, which comes when keel exits or is killed (also by
``kill -9``, when none of keel's own cleanup runs), then kills every process tagged with the
session and every process group keel registered (``+PGID`` / ``-PGID`` lines) in which a
tagged process still lives. It cannot outlive keel for long: EOF is its only way out. It
imports nothing from keel (nor ``site``), so it starts in about 10 ms.
"""

from __future__ import annotations

import os
import sys
import time
from _collections_abc import Iterable, Iterator  # what os already loaded: collections.abc would cost 7 ms

# Not the signal module: it imports enum, 6 ms of the watchdog's start. These numbers are fixed (POSIX kill -l).
SIGTERM = 15
SIGKILL = 9

TAG_VAR = "KEEL_SHELL_TAG"
_PROC = "/proc"


def has_proc() -> bool:
    return os.access(f"{_PROC}/self/stat", os.R_OK)


_KEY = b"\0" + TAG_VAR.encode() + b"="


def _tags(environ: bytes) -> list[bytes]:
    at = (b"\0" + environ).find(_KEY)
    if at < 0:
        return []
    start = at + len(_KEY) - 1
    end = environ.find(b"\0", start)
    return environ[start : end if end >= 0 else len(environ)].split()


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # gone, or not ours
        return None
    try:
        return os.read(fd, 1 << 20)
    except OSError:
        return None
    finally:
        os.close(fd)


def tagged(tag: str, *, prefix: bool = False) -> list[int]:
    """Pids of the live processes whose tag is ``tag`` (or starts with it, with ``prefix``); Linux only."""
    want = tag.encode()
    me = os.getpid()
    found: list[int] = []
    try:
        names = [e.name for e in os.scandir(_PROC)]
    except OSError:
        return found
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        environ = _read(f"{_PROC}/{name}/environ")
        if not environ or _KEY[1:] not in environ:
            continue
        if any(t.startswith(want) if prefix else t == want for t in _tags(environ)):
            found.append(int(name))
    return found


def _stat_fields(pid: int) -> list[str] | None:
    raw = _read(f"{_PROC}/{pid}/stat")
    if raw is None:
        return None
    return raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()  # after "pid (comm) ": state, ppid, pgrp


def group_exists(pgid: int) -> bool:
    """Whether any process, a zombie too, is in the group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int) -> bool:
    """Whether a process other than a zombie is in the group (zombies only count where /proc cannot tell)."""
    if not group_exists(pgid):
        return False
    if not has_proc():
        return True
    for entry in os.scandir(_PROC):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                return True
    return False


def describe(pids: Iterable[int], limit: int = 5) -> str:
    """``sleep 777 (pid 12)``, ... for a note to the model."""
    parts = []
    for pid in sorted(pids)[:limit]:
        raw = _read(f"{_PROC}/{pid}/cmdline")
        argv = (raw or b"").rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
        if argv:
            parts.append(f"{argv[:80]} (pid {pid})")
    return ", ".join(parts)


def signal_processes(sig: int, pgids: Iterable[int] = (), pids: Iterable[int] = ()) -> None:
    for pgid in pgids:
        try:
            os.killpg(pgid, sig)
        except OSError:  # gone, or not ours
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def sweep_steps(tag: str, groups: Iterable[int], *, prefix: bool, grace: float) -> Iterator[float]:
    """Kill the processes tagged ``tag`` (or ``tag...``, with ``prefix``) and the groups of ``groups`` that
    still hold one of them (where /proc cannot tell, every group of ``groups`` that exists): SIGTERM, then
    SIGKILL to what is left after ``grace`` seconds. Sans-IO about time: yields how long to sleep."""
    groups = set(groups)

    def targets() -> tuple[set[int], list[int]]:
        if not has_proc():
            return {g for g in groups if group_exists(g)}, []
        pids = tagged(tag, prefix=prefix)
        return {g for g in map(_pgid, pids) if g in groups}, pids

    live, pids = targets()
    if not live and not pids:
        return
    signal_processes(SIGTERM, live, pids)
    deadline = time.monotonic() + grace
    while True:
        yield 0.02
        live, pids = targets()
        if not live and not pids:
            return
        if time.monotonic() >= deadline:
            break
    for _ in range(5):
        signal_processes(SIGKILL, live, pids)
        yield 0.02
        live, pids = targets()
        if not live and not pids:
            return


def _read_until_eof(fd: int) -> bytes:
    """All keel writes to the pipe, once it closes its end. Woken by that hang-up, not by each line
    (a line per Bash call: a wake-up of this process each time, on the machine keel runs on); what is
    in the pipe is collected once a second, long before 64 kB of lines could fill it."""
    import select  # a module of the interpreter's own, as os is

    os.set_blocking(fd, False)
    poller = select.poll()
    poller.register(fd, 0)  # no event asked for: a hang-up (and an error) is always reported
    chunks: list[bytes] = []
    while True:
        poller.poll(1000)
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                break  # nothing more for now, and keel's end is still open
            except OSError:
                return b"".join(chunks)
            if not data:
                return b"".join(chunks)  # EOF: every writer closed
            chunks.append(data)


def watchdog(session: str) -> None:
    """Wait for EOF on stdin, then sweep the session. No signal handlers: the watchdog runs in a process
    group of its own, so a Ctrl-C or a hang-up at keel's terminal does not reach it."""
    data = _read_until_eof(sys.stdin.fileno())  # keel has exited or was killed
    groups: set[int] = set()
    for line in data.split(b"\n"):
        sign, number = line[:1], line[1:]
        if number.isdigit():
            if sign == b"+":
                groups.add(int(number))
            elif sign == b"-":
                groups.discard(int(number))
    for pause in sweep_steps(f"{session}:", groups, prefix=True, grace=1.0):
        time.sleep(pause)


if __name__ == "__main__":
    watchdog(sys.argv[1])
