"""keel's one way to run a short-lived command: its own process group, a hard timeout, the whole
group killed on timeout, on too much output or when the caller is cancelled.

:func:`run` is what hook commands, skills' `` !`cmd` `` and the hook environment file use. The
command's group is its own (``start_new_session``), so a Ctrl-C at the terminal does not reach it
and ``killpg`` reaches everything it started that stayed in the group (``sleep 100 & sleep 100``).
The timeout holds when the command never reads stdin or never closes stdout; once the command
exits, children still holding its pipes get :data:`GRACE_S`, then the group goes. asyncio's
``Process.wait()`` returns only once every pipe has closed (Python 3.11), so the exit is watched
through the protocol instead.

:func:`die_with_parent` (for ``preexec_fn``) asks Linux to kill a child when keel dies, for long
runners started without the session's watchdog (a batch task). The Bash tool's own runner
(``tools/shellrun.py``) uses :func:`kill_group` and keeps its own lifecycle (background shells,
moved output).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

OUTPUT_CAP = 1 << 20  # bytes kept of a command's stdout (and, apart, of its stderr)
GRACE_S = 0.5  # after a command exits, how long a child may keep its pipes open
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Ran:
    """How a command ended. ``exit_code`` None: it did not finish (``error`` says why)."""

    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    error: str = ""  # why it did not run or finish: spawn, timeout, output cap
    timed_out: bool = False


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a process group; one already gone (or not ours) is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """``preexec_fn``: SIGKILL this child when the process that started it dies (Linux)."""
    import ctypes

    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class _Sink:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[bytes] = []
        self.size = 0
        self.over = False

    def add(self, chunk: bytes) -> None:
        room = self.cap - self.size
        if len(chunk) > room:
            self.over = True
            chunk = chunk[: max(room, 0)]
        self.parts.append(chunk)
        self.size += len(chunk)

    def data(self) -> bytes:
        return b"".join(self.parts)


async def _pump(
    stream: asyncio.StreamReader | None, sink: _Sink, full: asyncio.Event, seen: Callable[[bytes], None] | None = None
) -> None:
    if stream is None:
        return
    while chunk := await stream.read(65536):
        sink.add(chunk)
        if seen is not None:
            seen(chunk)
        if sink.over:
            full.set()
            return


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
        proc.stdin.write(data)
        await proc.stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
        proc.stdin.close()


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's own protocol, which also says when the process exits."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=1 << 16, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


async def run(
    argv: Sequence[str],
    *,
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
    timeout: float,
    stdin: bytes | None = None,
    cap: int = OUTPUT_CAP,
    merge_stderr: bool = False,
    on_start: Callable[[int], None] | None = None,
    on_end: Callable[[int], None] | None = None,
    on_stdout: Callable[[bytes], None] | None = None,
) -> Ran:
    """Run ``argv`` to its end or its timeout; never raises for the command's own failures.

    ``stdin``: bytes fed then closed (None: ``/dev/null``). ``merge_stderr``: stderr goes to
    stdout. ``on_start``/``on_end`` get the process group id (to register it with a watchdog);
    ``on_stdout`` sees each chunk of stdout as it arrives (a hook's async line)."""
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(loop),
            *argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as e:
        return Ran(None, error=f"cannot run {argv[0]}: {e.strerror or e}")
    proc = asyncio.subprocess.Process(transport, protocol, loop)
    if on_start is not None:
        on_start(proc.pid)
    out, err, full = _Sink(cap), _Sink(cap), asyncio.Event()
    tasks = [
        asyncio.ensure_future(_pump(proc.stdout, out, full, on_stdout)),
        asyncio.ensure_future(_pump(proc.stderr, err, full)),
    ]
    if stdin is not None:
        tasks.append(asyncio.ensure_future(_feed(proc, stdin)))
    waiter = asyncio.ensure_future(protocol.exited.wait())
    capped = asyncio.ensure_future(full.wait())
    error = ""
    timed_out = False
    try:
        done, _ = await asyncio.wait({waiter, capped}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if capped in done:
            error = f"printed more than {cap // 1024} KiB; stopped"
        elif waiter not in done:
            timed_out = True
            error = f"timed out after {timeout:g}s; stopped"
        else:  # exited: give children that still hold the pipes a moment, then end them
            _, pending = await asyncio.wait(tasks[:2], timeout=GRACE_S)
            if pending:
                kill_group(proc.pid)
    finally:  # a timeout, the cap, or the caller cancelling us: the whole group goes
        if error or not waiter.done():
            kill_group(proc.pid)
        capped.cancel()
        with contextlib.suppress(TimeoutError, asyncio.CancelledError, ProcessLookupError):
            await asyncio.wait_for(asyncio.shield(waiter), 5)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # asyncio keeps the transport until every pipe closes; one a stray child still holds (it left
        # the group: setsid) would be closed by the garbage collector after the loop is gone
        transport.close()
        if on_end is not None:
            on_end(proc.pid)
    return Ran(None if error else proc.returncode, out.data(), err.data(), error, timed_out)


def run_sync(
    argv: Sequence[str],
    *,
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
    timeout: float | None,
    stdin: bytes | None = None,
) -> Ran:
    """:func:`run` for code without an event loop: own process group, the group killed on the
    timeout (None: no limit, for a clone a batch task waits on), output kept whole."""
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as e:
        return Ran(None, error=f"cannot run {argv[0]}: {e.strerror or e}")
    with proc:
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            try:
                out, err = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:  # a child that left the group holds the pipes
                out, err = b"", b""
            return Ran(None, out, err, f"timed out after {timeout:g}s; stopped", True)
        except BaseException:  # interrupted: nothing it started outlives the wait
            kill_group(proc.pid)
            raise
    return Ran(proc.returncode, out, err)
