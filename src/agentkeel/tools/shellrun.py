"""One shell keel runs for a Bash call, and the session's watchdog.

The shell writes to a pipe keel made itself, read with ``add_reader``: asyncio's own
subprocess pipes make ``Process.wait()`` wait until every writer closed the pipe, so a
``sleep 777 &`` would hold the call to its timeout. Here the call ends when the shell exits;
what the shell left running (in its process group, or holding the pipe) is then known and
killable: the group is the shell's (started by keel's one runner, ``internal/procs.py``), and every
process carries the call's tag (see ``tools/procs.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

from agentkeel.internal import procs as runner
from agentkeel.tools import procs

log = logging.getLogger(__name__)

MAX_CAPTURE = 8 * 1024 * 1024  # bytes kept in memory per command (head and tail)
_READ = 65536


class Capture:
    """Output of a process: everything up to MAX_CAPTURE, then head and tail."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = MAX_CAPTURE // 2 - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            excess = len(self.tail) - MAX_CAPTURE // 2
            if excess > 0:
                del self.tail[:excess]
                self.dropped += excess

    def text(self) -> str:
        body = self.head.decode("utf-8", "replace")
        if self.tail:
            gap = f"\n… [{self.dropped} bytes of output dropped] …\n" if self.dropped else ""
            body += gap + self.tail.decode("utf-8", "replace")
        return body


class ShellRun:
    """A started shell: its process (leader of its own group), its tag, and keel's end of its output pipe."""

    def __init__(self, proc: asyncio.subprocess.Process, fd: int, tag: str, *, contained: bool = False) -> None:
        self.proc = proc
        self.tag = tag
        # it runs in a PID namespace of its own (the sandbox): once its first process has exited, the
        # kernel has killed everything inside, and nothing it started can be elsewhere in the group
        self.contained = contained
        self._eof = asyncio.Event()  # every writer of the output pipe has closed it
        self.capture = Capture()
        # called once when the session stops tracking it; what it returns is added to the output
        self.on_done: Callable[[], list[str]] | None = None
        self._fd: int | None = fd
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(fd, self._read, 1)

    @classmethod
    async def start(
        cls, argv: list[str], cwd: Path, env: dict[str, str], tag: str, *, contained: bool = False
    ) -> ShellRun:
        r, w = os.pipe()
        try:
            # no parent-death signal: the session's watchdog ends the group and everything tagged
            proc = await runner.spawn(
                argv,
                cwd=cwd,
                env={**env, procs.TAG_VAR: f"{env.get(procs.TAG_VAR, '')} {tag}".strip()},
                stdout=w,
                stderr=w,
            )
        except BaseException:
            os.close(r)
            raise
        finally:
            os.close(w)
        os.set_blocking(r, False)
        return cls(proc, r, tag, contained=contained)

    @property
    def pgid(self) -> int:
        return self.proc.pid

    @property
    def pipe_closed(self) -> bool:
        """Every writer of the output pipe has closed it, and all it held has been read."""
        return self._fd is None

    def drain(self) -> None:
        """Read what is in the pipe now (bounded: a writer that never stops cannot hold keel here)."""
        self._read(64)

    def _read(self, reads: int) -> None:
        for _ in range(reads):
            if self._fd is None:
                return
            try:
                data = os.read(self._fd, _READ)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.close()
                return
            self.capture.add(data)

    def close(self) -> None:
        """Stop reading (a writer still alive then gets EPIPE)."""
        if self._fd is not None:
            if not self._loop.is_closed():
                self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None
            self._eof.set()

    def running(self) -> bool:
        """The shell, a process of its group, or a writer of its pipe is still alive."""
        self.drain()
        return self.proc.returncode is None or not self.pipe_closed or self._group_alive()

    def _group_alive(self) -> bool:
        """A process of the group other than a zombie lives (a /proc scan, unless the run is contained
        and its first process has exited: then nothing of it can live on)."""
        if self.contained and self.proc.returncode is not None:
            return False
        return procs.group_alive(self.pgid)

    async def settle(self, grace: float) -> bool:
        """Once the shell has exited: True when nothing it started is left within ``grace`` seconds."""
        deadline = time.monotonic() + grace
        while True:
            self.drain()
            # a zombie left for init to reap does not count (group_alive reads /proc: only when the group exists)
            if self.pipe_closed and not self._group_alive():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            # woken at once when the pipe closes; a group that outlives the pipe is polled
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._eof.wait(), min(left, 0.005) if self.pipe_closed else left)

    async def kill(self, grace: float = 2.0) -> None:
        """SIGTERM the group and every process with the tag, SIGKILL what is left after ``grace``."""
        for pause in procs.sweep_steps(self.tag, {self.pgid}, prefix=False, grace=grace):
            await asyncio.sleep(pause)
        await self.reap()

    async def reap(self) -> None:
        """Wait (a little) for the shell's exit status, and take the last of its output."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 5)
        self.drain()


class Watchdog:
    """keel's end of the session watchdog (``procs.py`` run as a script), started on first use.

    It holds the write end of the watchdog's stdin; when keel exits or dies the kernel closes
    it and the watchdog kills what the session's shells left. Failing to start it is logged
    and Bash runs on (the calls still kill their own processes; only keel's death is uncovered).
    """

    def __init__(self, session: str) -> None:
        self.session = session
        self._fd: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._tried = False
        self._later: list[bytes] = []  # unregistrations, sent with the next registration
        self._release: weakref.finalize[[int, subprocess.Popen[bytes]], Watchdog] | None = None

    def ensure(self) -> None:
        if self._tried:
            return
        self._tried = True
        r, w = os.pipe()
        try:
            self._proc = runner.popen(  # a group of its own: a Ctrl-C at the terminal must not reach it
                [sys.executable, "-I", "-S", procs.__file__, self.session],
                cwd="/",
                env=None,
                stdin=r,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError as e:
            os.close(w)
            log.warning("no process watchdog for this session (%s): processes Bash started may outlive keel", e)
            return
        finally:
            os.close(r)
        os.set_blocking(w, False)
        self._fd = w
        self._release = weakref.finalize(self, _release, w, self._proc)  # when dropped without aclose

    @property
    def closed(self) -> bool:
        """Released at the session's end: what starts now is not swept (nor protected) by it."""
        return self._tried and self._fd is None and self._release is not None and not self._release.alive

    @property
    def running(self) -> bool:
        return self._fd is not None and self._proc is not None and self._proc.poll() is None

    def register(self, pgid: int) -> None:
        later, self._later = self._later, []
        self._send(b"".join(later) + b"+%d\n" % pgid)

    def unregister(self, pgid: int) -> None:
        # Not urgent, so it waits for the next registration (one write, one wake-up of the watchdog
        # per call): a group the watchdog still counts is signalled only while a process tagged with
        # the session is in it (``procs.sweep_steps``), so an ended group whose number was reused is safe.
        self._later.append(b"-%d\n" % pgid)

    def _send(self, line: bytes) -> None:
        if self._fd is None:
            return
        try:
            os.write(self._fd, line)
        except OSError:  # gone (EPIPE) or not reading (EAGAIN): the tag sweep at exit still covers the group
            pass

    def close(self) -> None:
        """Close keel's end, once the session's processes are killed: the watchdog sweeps again (finding
        nothing) and exits on its own; keel does not wait for it."""
        if self._release is not None:
            self._release()
        self._fd = None


def _release(fd: int, proc: subprocess.Popen[bytes]) -> None:
    """Close keel's end; the watchdog exits once it has swept, and a daemon thread collects its status
    (no zombie, no ResourceWarning)."""
    os.close(fd)
    threading.Thread(target=proc.wait, name="keel-watchdog-reaper", daemon=True).start()
