"""keel's one way to start a process: its own process group, a hard timeout, the whole group
killed on timeout, on too much output or when the caller is cancelled, and (when asked) a signal
from the kernel when keel dies.

:func:`run` is what hook commands, skills' `` !`cmd` ``, the hook environment file, git and the Grep
tool's ripgrep use. The command's group is its own (``start_new_session``), so a Ctrl-C at the
terminal does not reach it and ``killpg`` reaches everything it started that stayed in the group
(``sleep 100 & sleep 100``). The timeout holds when the command never reads stdin or never closes
stdout; once the command exits, children still holding its pipes get :data:`GRACE_S`, then the
group goes. asyncio's ``Process.wait()`` returns only once every pipe has closed (Python 3.11), so
the exit is watched through the protocol instead. :func:`run_sync` is the same for code without an
event loop (the sandbox probe, a batch task).

:func:`spawn` starts a process that outlives the call, in its own group, for callers that manage
its life: the Bash tool (output to a pipe keel reads itself; its watchdog rules are in
``tools/procs.py``) and the SDK's subprocess transport (a long-lived streaming child); :func:`stop`
ends one (a signal to its leader, then the whole group killed after a grace). :func:`popen` is the
synchronous :func:`spawn` (the Bash tool's watchdog).

``die_with=SIG`` asks Linux to send SIG to the child when keel dies, even by ``kill -9`` (the
parent-death signal). It is set through ``setpriv --pdeathsig`` when that is installed (an exec of
a small binary, about a millisecond), else in the forked child (``preexec_fn``: Python then forks
instead of using vfork, 10-50 ms per start in a large process). The signal reaches the leader
only; processes left in its group are the caller's (or the Bash watchdog's) to kill.

One spawn is not here, on purpose: ``/memory edit`` runs ``$EDITOR`` in keel's own process group
(``context/commands.py``). An interactive editor must stay in the terminal's foreground group to
read the keyboard (a child in another group gets SIGTTIN) and to get the terminal's Ctrl-C and
window-size signals; it is waited on in the foreground, so keel cannot leave it behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

OUTPUT_CAP = 1 << 20  # bytes kept of a command's stdout (and, apart, of its stderr)
GRACE_S = 0.5  # after a command exits, how long a child may keep its pipes open
_PR_SET_PDEATHSIG = 1

#: what a pipe end may be: asyncio/subprocess constants (PIPE, DEVNULL, STDOUT), a descriptor, a file
Stream = int | IO[Any] | None
#: signals sent to a process group in turn, each followed by at most that many seconds of waiting
Steps = Sequence[tuple[int, float]]


@dataclass(frozen=True)
class Ran:
    """How a command ended. ``exit_code`` None: it did not finish (``error`` says why)."""

    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    error: str = ""  # why it did not run or finish: spawn, timeout, output cap
    timed_out: bool = False
    status: int | None = None  # the process's own status, also when it was stopped (-9: killed)


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a process group; one already gone (or not ours) is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@functools.cache
def _setpriv() -> str | None:
    return shutil.which("setpriv")


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up in keel (the child between fork and exec must import nothing)."""
    try:
        import ctypes

        fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return fn


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``preexec_fn`` that has the kernel send ``sig`` to this child when keel dies (Linux)."""
    prctl = _prctl()

    def preexec() -> None:  # pragma: no cover - runs in the child between fork and exec
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, sig)

    return preexec


def _with_death_signal(
    argv: Sequence[str], env: Mapping[str, str] | None, sig: int | None
) -> tuple[list[str], Callable[[], None] | None]:
    """``argv`` (and a ``preexec_fn``) so that the child gets ``sig`` when keel dies. A program that
    cannot be found is left for the spawn to report (one ``cannot run`` line, not setpriv's)."""
    if sig is None:
        return list(argv), None
    setpriv = _setpriv()
    path = (env or os.environ).get("PATH")
    if setpriv is not None and argv and shutil.which(argv[0], path=path) is not None:
        name = signal.Signals(sig).name.removeprefix("SIG")
        return [setpriv, f"--pdeathsig={name}", "--", *argv], None
    return list(argv), die_with_parent(sig)


class _Sink:
    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.parts: list[bytes] = []
        self.size = 0
        self.over = False

    def add(self, chunk: bytes) -> None:
        if self.cap is not None:
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

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int = 1 << 16) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


async def _start(
    argv: Sequence[str],
    *,
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
    stdin: Stream,
    stdout: Stream,
    stderr: Stream,
    limit: int,
    die_with: int | None,
) -> tuple[asyncio.SubprocessTransport, _Protocol]:
    loop = asyncio.get_running_loop()
    full_argv, preexec = _with_death_signal(argv, env, die_with)
    transport, protocol = await loop.subprocess_exec(
        lambda: _Protocol(loop, limit),
        *full_argv,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        preexec_fn=preexec,
    )
    return transport, protocol


async def spawn(
    argv: Sequence[str],
    *,
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
    stdin: Stream = asyncio.subprocess.DEVNULL,
    stdout: Stream = asyncio.subprocess.PIPE,
    stderr: Stream = asyncio.subprocess.PIPE,
    limit: int = 1 << 16,
    die_with: int | None = None,
) -> asyncio.subprocess.Process:
    """Start ``argv`` as the leader of a process group of its own and hand it over: the caller owns
    its life and ends it with :func:`stop`. ``die_with``: the signal it gets when keel dies.
    Raises ``OSError`` when it cannot start."""
    transport, protocol = await _start(
        argv, cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr, limit=limit, die_with=die_with
    )
    return asyncio.subprocess.Process(transport, protocol, asyncio.get_running_loop())


async def stop(proc: asyncio.subprocess.Process, *, first: int = signal.SIGTERM, grace: float = 5.0) -> None:
    """End a process from :func:`spawn`: ``first`` to its leader (a chance to close cleanly), then,
    after ``grace`` seconds or at once when the caller is cancelled, SIGKILL to its whole group. What
    it left in its group goes too, also when it exited on its own."""
    try:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(first)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), grace)
    finally:
        kill_group(proc.pid)
        if proc.returncode is None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), 5)


async def run(
    argv: Sequence[str],
    *,
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
    timeout: float | None,
    stdin: bytes | None = None,
    cap: int | None = OUTPUT_CAP,
    merge_stderr: bool = False,
    die_with: int | None = None,
    on_start: Callable[[int], None] | None = None,
    on_end: Callable[[int], None] | None = None,
    on_stdout: Callable[[bytes], None] | None = None,
) -> Ran:
    """Run ``argv`` to its end or its timeout; never raises for the command's own failures.

    ``timeout`` None: no limit of its own (the caller's cancel still kills the group). ``stdin``:
    bytes fed then closed (None: ``/dev/null``). ``cap`` None: all output is kept. ``merge_stderr``:
    stderr goes to stdout. ``die_with``: the signal the command gets when keel dies.
    ``on_start``/``on_end`` get the process group id (to register it with a watchdog);
    ``on_stdout`` sees each chunk of stdout as it arrives (a hook's async line)."""
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await _start(
            argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
            limit=1 << 16,
            die_with=die_with,
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
            error = f"printed more than {(cap or 0) // 1024} KiB; stopped"
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
    return Ran(None if error else proc.returncode, out.data(), err.data(), error, timed_out, proc.returncode)


def popen(
    argv: Sequence[str],
    *,
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
    stdin: Stream = subprocess.DEVNULL,
    stdout: Stream = subprocess.PIPE,
    stderr: Stream = subprocess.PIPE,
    die_with: int | None = None,
) -> subprocess.Popen[bytes]:
    """:func:`spawn` without an event loop. Raises ``OSError`` when it cannot start."""
    full_argv, preexec = _with_death_signal(argv, env, die_with)
    return subprocess.Popen(
        full_argv,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        preexec_fn=preexec,
    )


def _stop_sync(proc: subprocess.Popen[bytes], steps: Steps, *, collect: bool = True) -> tuple[bytes, bytes]:
    """Signal the group in ``steps``, reading its output while waiting after each (a child blocked on
    a full pipe could not exit); the group is killed at the end (what the leader left in it too).
    Returns what was read (``collect`` False: no further wait for output once the group is killed)."""
    for sig, wait_s in steps:
        kill_group(proc.pid, sig)
        try:
            out, err = proc.communicate(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        kill_group(proc.pid)
        return out or b"", err or b""
    kill_group(proc.pid)
    if not collect:
        return b"", b""
    try:
        out, err = proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:  # a child that left the group holds the pipes
        return b"", b""
    return out or b"", err or b""


def run_sync(
    argv: Sequence[str],
    *,
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
    timeout: float | None,
    stdin: bytes | None = None,
    die_with: int | None = None,
    on_start: Callable[[int], None] | None = None,
    stop_steps: Steps = ((signal.SIGKILL, 5.0),),
    interrupt_steps: Steps = (),
) -> Ran:
    """:func:`run` for code without an event loop: own process group, the group stopped on the
    timeout (None: no limit, for a clone a batch task waits on) with ``stop_steps`` and, when the
    wait is interrupted (KeyboardInterrupt, re-raised), with ``interrupt_steps`` (none: killed at
    once); output kept whole. Whatever the steps, the group is killed at the end of them.
    ``die_with``: the signal it gets when keel dies. ``on_start`` gets the process group id."""
    try:
        proc = popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            die_with=die_with,
        )
    except OSError as e:
        return Ran(None, error=f"cannot run {argv[0]}: {e.strerror or e}")
    if on_start is not None:
        on_start(proc.pid)
    with proc:
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            out, err = _stop_sync(proc, stop_steps)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)  # its leader is killed: its status, even when a stray holds the pipes
            return Ran(None, out, err, f"timed out after {timeout:g}s; stopped", True, proc.returncode)
        except BaseException:  # interrupted: nothing it started outlives the wait
            _stop_sync(proc, interrupt_steps, collect=False)
            raise
    return Ran(proc.returncode, out, err, status=proc.returncode)
