"""Running one handler: a process, a URL, an in-process callable or a model call.

Every runner returns a :class:`Raw` (exit code, stdout, stderr, or an error line) and never
raises for the handler's own failures. A command runs in its own process group with the
payload on stdin; the timeout is hard (it holds when the handler never reads stdin or never
closes stdout) and ends with the group killed; output past the cap stops the handler.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import re
import shutil
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import msgspec

from agentkeel.hooks.config import Handler
from agentkeel.internal import procs
from agentkeel.tools.procs import TAG_VAR

OUTPUT_CAP = procs.OUTPUT_CAP
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


class Raw(msgspec.Struct, frozen=True):
    exit_code: int | None = 0  # None: the handler did not finish (see error)
    stdout: str = ""
    stderr: str = ""
    error: str = ""  # why the handler failed to run or finish: spawn, timeout, cap, crash
    parsed: Any = None  # a python handler's return value, or a prompt handler's answer
    # a command that opened with Claude Code's ``{"async": true}`` line and runs on: its whole answer, later
    detached: asyncio.Future[Raw] | None = None


def async_line(line: str) -> bool:
    """Claude Code's async protocol: a handler whose first stdout line is ``{"async": true, ...}``
    goes on in the background; keel does not wait for it."""
    line = line.strip()
    if not line.startswith("{"):
        return False
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("async") is True


def _shell() -> str:
    return shutil.which("bash") or "/bin/sh"


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
    head = bytearray()
    went_async: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def watch(chunk: bytes) -> None:  # the first line decides: Claude Code's async protocol or not
        if went_async.done() or len(head) > 4096:
            return
        head.extend(chunk)
        if b"\n" in head:
            first = head.split(b"\n", 1)[0].decode("utf-8", errors="replace")
            if async_line(first):
                went_async.set_result(first)
            else:
                head.extend(b" " * 4097)  # decided: not async

    async def whole() -> Raw:
        ran = await procs.run(
            argv,
            cwd=cwd,
            env=child_env,
            timeout=timeout,
            stdin=payload,
            cap=cap,
            on_start=spawned.started if spawned is not None and tag else None,
            on_end=spawned.ended if spawned is not None and tag else None,
            on_stdout=watch,
        )
        out, err = (b.decode("utf-8", errors="replace") for b in (ran.stdout, ran.stderr))
        return Raw(ran.exit_code, out, err, ran.error)

    task = asyncio.ensure_future(whole())
    either: set[asyncio.Future[Any]] = {task, went_async}
    try:
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task.done():
        went_async.cancel()
        return task.result()
    first = went_async.result()
    limit = async_timeout(first)
    detached = asyncio.ensure_future(_within(task, limit)) if limit is not None else task
    return Raw(0, first + "\n", detached=detached)


def async_timeout(line: str) -> float | None:
    """The async line's ``asyncTimeout`` (milliseconds, as Claude Code reads it) in seconds, or None."""
    try:
        value = json.loads(line).get("asyncTimeout")
    except (json.JSONDecodeError, RecursionError, AttributeError):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value) / 1000


async def _within(task: asyncio.Future[Raw], limit: float) -> Raw:
    """The rest of an async handler, ended (its process group killed) after ``asyncTimeout``."""
    try:
        return await asyncio.wait_for(task, limit)  # a timeout cancels the run: procs kills the group
    except TimeoutError:
        return Raw(None, error=f"timed out after {limit:g}s (asyncTimeout)")


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
