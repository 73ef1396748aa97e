"""The subprocess transport: ``keel --input-format stream-json`` in its own process (isolation),
speaking the same control protocol as the Claude Agent SDK: keel asks back with ``can_use_tool``,
``hook_callback`` and ``mcp_message``, answered here from the options' Python callables."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

from agentkeel.core.types import Message, to_data
from agentkeel.internal import procs
from agentkeel.protocol import control
from agentkeel.ui.sdk.types import (
    KeelAgentOptions,
    KeelSDKError,
    PermissionResultAllow,
    ToolPermissionContext,
    hook_output,
)

STOP_GRACE_S = 10.0  # after SIGTERM, how long keel has to close its session before its group is killed


def command(options: KeelAgentOptions) -> list[str]:
    cli = str(options.cli_path) if options.cli_path else shutil.which("keel")
    cmd = [cli] if cli else [sys.executable, "-m", "agentkeel.ui.cli.main"]
    cmd += ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"]
    system, append = options.prompt_parts()
    pairs: list[tuple[str, Any]] = [
        ("--system-prompt", system),
        ("--append-system-prompt", append),
        ("--model", options.model),
        ("--permission-mode", options.permission_mode),
        ("--max-turns", options.max_turns),
        ("--max-budget-usd", options.max_budget_usd),
        ("--max-thinking-tokens", options.max_thinking_tokens),
        ("--settings", options.settings),
        ("--tools", ",".join(options.tools) if options.tools is not None else None),
        ("--allowedTools", ",".join(options.allowed_tools) or None),
        ("--disallowedTools", ",".join(options.disallowed_tools) or None),
    ]
    for flag, value in pairs:
        if value is not None:
            cmd += [flag, str(value)]
    for d in options.add_dirs:
        cmd += ["--add-dir", str(d)]
    if options.continue_conversation:
        cmd.append("--continue")
    if options.resume:
        cmd.append(f"--resume={options.resume}")
    if options.fork_session:
        cmd.append("--fork-session")
    if options.session_id:
        cmd.append(f"--session-id={options.session_id}")
    if options.can_use_tool is not None:
        cmd += ["--permission-prompt-tool", "stdio"]
    if options.include_partial_messages:
        cmd.append("--include-partial-messages")
    if options.mcp_servers:
        servers = {n: {k: v for k, v in s.items() if k != "instance"} for n, s in options.mcp_servers.items()}
        cmd += ["--mcp-config", json.dumps({"mcpServers": servers})]
    schema = options.schema()
    if schema is not None:
        cmd += ["--json-schema", json.dumps(schema)]
    return cmd


class SubprocessTransport:
    def __init__(self, options: KeelAgentOptions) -> None:
        self.options = options
        self.lines: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.proc: asyncio.subprocess.Process | None = None
        self.pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.callbacks: dict[str, Any] = {}
        self.reader: asyncio.Task[None] | None = None
        self.handlers: set[asyncio.Task[None]] = set()

    async def connect(self) -> None:
        cwd = Path(self.options.cwd or Path.cwd())
        try:
            # its own process group (stopped whole), sent SIGTERM when this process dies: keel then
            # closes its session as on a stop, and its Bash watchdog ends what the session started
            self.proc = await procs.spawn(
                command(self.options),
                cwd=cwd,
                env={**os.environ, **self.options.env},
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=None,
                limit=64 << 20,
                die_with=signal.SIGTERM,
            )
        except OSError as e:
            raise KeelSDKError(f"cannot start keel: {e.strerror or e}") from None
        self.reader = asyncio.create_task(self._read())
        await self._request({"subtype": "initialize", "hooks": self._hook_registrations() or None})

    def _hook_registrations(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for event, matchers in (self.options.hooks or {}).items():
            for m in matchers:
                ids = []
                for cb in m.hooks:
                    cid = f"hook_{len(self.callbacks)}"
                    self.callbacks[cid] = cb
                    ids.append(cid)
                entry: dict[str, Any] = {"matcher": m.matcher, "hookCallbackIds": ids}
                if m.timeout is not None:
                    entry["timeout"] = m.timeout
                out.setdefault(event, []).append(entry)
        return out

    async def _write(self, line: dict[str, Any]) -> None:
        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdin.is_closing():
            raise KeelSDKError("keel is not running")
        proc.stdin.write((json.dumps(line, ensure_ascii=False) + "\n").encode())
        with contextlib.suppress(ConnectionError):
            await proc.stdin.drain()

    async def _request(self, body: dict[str, Any]) -> dict[str, Any]:
        line = control.request(body)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[line["request_id"]] = future
        await self._write(line)
        return await future

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            while raw := await self.proc.stdout.readline():
                try:
                    data = json.loads(raw)
                except ValueError:
                    continue
                kind = data.get("type")
                if kind == "control_response":
                    self._answered(data.get("response", {}))
                elif kind == "control_request":
                    task = asyncio.create_task(self._handle(data))
                    self.handlers.add(task)
                    task.add_done_callback(self.handlers.discard)
                else:
                    await self.lines.put(data)
        finally:
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(KeelSDKError("keel exited"))
            await self.lines.put(None)

    def _answered(self, response: dict[str, Any]) -> None:
        future = self.pending.pop(str(response.get("request_id")), None)
        if future is None or future.done():
            return
        if response.get("subtype") == "success":
            future.set_result(response.get("response") or {})
        else:
            future.set_exception(KeelSDKError(str(response.get("error", "keel refused the request"))))

    async def _handle(self, data: dict[str, Any]) -> None:
        rid, body = str(data.get("request_id")), data.get("request", {})
        try:
            answer = await self._answer(body)
        except Exception as e:
            await self._write(control.error(rid, f"{type(e).__name__}: {e}"))
        else:
            await self._write(control.success(rid, answer))

    async def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        sub = body.get("subtype")
        if sub == "can_use_tool":
            callback = self.options.can_use_tool
            if callback is None:
                raise KeelSDKError("no can_use_tool callback")
            ctx = ToolPermissionContext(body.get("tool_use_id"), body.get("decision_reason"))
            result = await callback(body["tool_name"], body["input"], ctx)
            if isinstance(result, PermissionResultAllow):
                return {"behavior": "allow", "updatedInput": result.updated_input or body["input"]}
            return {"behavior": "deny", "message": result.message, "interrupt": result.interrupt}
        if sub == "hook_callback":
            cb = self.callbacks[body["callback_id"]]
            payload = body.get("input") or {}
            return hook_output(await cb(payload, body.get("tool_use_id"), {"signal": None}))
        if sub == "mcp_message":
            server = self.options.mcp_servers.get(body.get("server_name", ""), {})
            instance = server.get("instance") if isinstance(server, dict) else None
            if instance is None:
                raise KeelSDKError(f"no SDK MCP server {body.get('server_name')!r}")
            reply = await instance.handle(body.get("message", {}))
            return {"mcp_response": reply or {"jsonrpc": "2.0", "result": {}}}
        raise KeelSDKError(f"unsupported control request {sub!r}")

    async def send(self, message: Message) -> None:
        await self._write({"type": "user", "session_id": "", "message": to_data(message), "parent_tool_use_id": None})

    async def interrupt(self) -> None:
        await self._request({"subtype": "interrupt"})

    async def set_permission_mode(self, mode: str) -> None:
        await self._request({"subtype": "set_permission_mode", "mode": mode})

    async def set_model(self, model: str | None) -> None:
        await self._request({"subtype": "set_model", "model": model})

    async def close(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 10)
        finally:  # a run still going: keel stops it on SIGTERM and closes the session; then its group goes
            await procs.stop(proc, first=signal.SIGTERM, grace=STOP_GRACE_S)
        if self.reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self.reader
        for task in list(self.handlers):
            task.cancel()
