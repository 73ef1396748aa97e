"""Running one handler: a process, a URL, an in-process callable or a model call.

Every runner returns a :class:`Raw` (exit code, stdout, stderr, or an error line) and never
raises for the handler's own failures. A command runs in its own process group with the
payload on stdin; the timeout is hard (it holds when the handler never reads stdin or never
closes stdout) and ends with the group killed; output past the cap stops the handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import os
import re
import shutil
import signal
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import msgspec

from agentkeel.extensions.hooks.config import Handler
from agentkeel.tools.procs import TAG_VAR

OUTPUT_CAP = 1 << 20  # bytes kept of a handler's stdout (and, apart, of its stderr)
_GRACE_S = 0.5  # after a command exits, how long a child may keep its pipes open
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


class Raw(msgspec.Struct, frozen=True):
    exit_code: int | None = 0  # None: the handler did not finish (see error)
    stdout: str = ""
    stderr: str = ""
    error: str = ""  # why the handler failed to run or finish: spawn, timeout, cap, crash
    parsed: Any = None  # a python handler's return value, or a prompt handler's answer


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

    def text(self) -> str:
        return b"".join(self.parts).decode("utf-8", errors="replace")


async def _pump(stream: asyncio.StreamReader | None, sink: _Sink, full: asyncio.Event) -> None:
    if stream is None:
        return
    while chunk := await stream.read(65536):
        sink.add(chunk)
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


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _shell() -> str:
    return shutil.which("bash") or "/bin/sh"


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's own protocol, which also says when the process exits. ``Process.wait()`` returns
    only once every pipe has closed (Python 3.11), so a child the hook left running with its
    stdout (``(server &)``, ``setsid daemon &``) would hold keel until the hook's timeout."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=1 << 16, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


class Spawned(Protocol):
    """Where a hook's process group is registered while it runs, so that it dies with keel, even
    with keel killed (the session's watchdog, ``tools/procs.py``); ``tag`` goes in its environment."""

    @property
    def tag(self) -> str: ...

    def started(self, pgid: int) -> None: ...

    def ended(self, pgid: int) -> None: ...


async def run_command(
    handler: Handler,
    payload: bytes,
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
    cap: int = OUTPUT_CAP,
    spawned: Spawned | None = None,
) -> Raw:
    argv = [_shell(), "-c", handler.command] if isinstance(handler.command, str) else list(handler.command)
    child_env = dict(env)
    tag = spawned.tag if spawned is not None else ""
    if tag:
        child_env[TAG_VAR] = f"{child_env.get(TAG_VAR, '')} {tag}".strip()
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(loop),
            *argv,
            cwd=cwd,
            env=child_env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as e:
        return Raw(None, error=f"cannot run {argv[0]}: {e.strerror or e}")
    proc = asyncio.subprocess.Process(transport, protocol, loop)
    if spawned is not None and tag:
        spawned.started(proc.pid)
    out, err, full = _Sink(cap), _Sink(cap), asyncio.Event()
    tasks = [
        asyncio.ensure_future(_feed(proc, payload)),
        asyncio.ensure_future(_pump(proc.stdout, out, full)),
        asyncio.ensure_future(_pump(proc.stderr, err, full)),
    ]
    waiter = asyncio.ensure_future(protocol.exited.wait())
    capped = asyncio.ensure_future(full.wait())
    error = ""
    try:
        done, _ = await asyncio.wait({waiter, capped}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if capped in done:
            error = f"printed more than {cap // 1024} KiB; stopped"
        elif waiter not in done:
            error = f"timed out after {timeout:g}s; stopped"
        else:  # exited: give children that still hold the pipes a moment, then end them
            _, pending = await asyncio.wait(tasks[1:], timeout=_GRACE_S)
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
        if spawned is not None and tag:
            spawned.ended(proc.pid)
    return Raw(None if error else proc.returncode, out.text(), err.text(), error)


def expand_headers(handler: Handler, env: Mapping[str, str]) -> dict[str, str]:
    """``$VAR`` / ``${VAR}`` in header values, only for names in ``allowedEnvVars`` (others: empty)."""
    allowed = set(handler.allowed_env)

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return env.get(name, "") if name in allowed else ""

    return {k: _VAR.sub(sub, v) for k, v in handler.headers}


async def run_http(handler: Handler, payload: bytes, *, env: Mapping[str, str], timeout: float) -> Raw:
    import httpx

    headers = {"Content-Type": "application/json", **expand_headers(handler, env)}
    try:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            response = await client.post(handler.url, content=payload, headers=headers)
    except httpx.TimeoutException:
        return Raw(None, error=f"timed out after {timeout:g}s")
    except httpx.HTTPError as e:
        return Raw(None, error=f"request failed: {e}")
    body = response.text[:OUTPUT_CAP]
    if 200 <= response.status_code < 300:
        return Raw(0, body)
    return Raw(1, stderr=f"HTTP {response.status_code}: {body[:500]}")


def resolve_target(target: str) -> Callable[..., Any]:
    module, _, name = target.partition(":")
    obj: Any = importlib.import_module(module.strip())
    for part in name.strip().split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{target} is not callable")
    return obj  # type: ignore[no-any-return]


async def run_python(handler: Handler, payload: dict[str, Any]) -> Raw:
    """The callable gets the payload dict; it returns a dict (the JSON output), a string (plain
    stdout), or None. A coroutine function is awaited; a plain one runs in a worker thread."""
    try:
        func = handler.func or resolve_target(handler.target)
        if inspect.iscoroutinefunction(func):
            result = await func(payload)
        else:
            result = await asyncio.to_thread(func, payload)
            if inspect.isawaitable(result):
                result = await result
    except Exception as e:
        return Raw(None, error=f"raised {type(e).__name__}: {e}")
    if result is None or isinstance(result, str | dict):
        return Raw(0, result if isinstance(result, str) else "", parsed=result if isinstance(result, dict) else None)
    return Raw(None, error=f"returned {type(result).__name__}; expected a dict, a string or None")


def payload_bytes(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8")
