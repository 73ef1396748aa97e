"""The in-process transport: the engine runs in the caller's event loop, no subprocess.

Output lines are made by the same encoder ``keel --output-format stream-json`` uses, so the
messages are the ones the subprocess transport parses from keel's stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from agentkeel import Event, KeelError, Runtime, RuntimeOptions
from agentkeel.core.events import RunFinished, SessionStarted
from agentkeel.core.extensions import ToolCall
from agentkeel.core.types import Message
from agentkeel.policy.permissions.verdicts import Decision
from agentkeel.protocol import stream_json
from agentkeel.protocol.partial import PartialMessages
from agentkeel.ui.sdk.denials import DenialMessages
from agentkeel.ui.sdk.structured import SchemaError, StructuredOutput, result_object
from agentkeel.ui.sdk.types import (
    HookMatcher,
    KeelAgentOptions,
    KeelSDKError,
    PermissionResultAllow,
    ToolPermissionContext,
    hook_output,
)

_STOP = object()


def runtime_options(options: KeelAgentOptions) -> RuntimeOptions:
    system, append = options.prompt_parts()
    external = {n: s for n, s in options.mcp_servers.items() if not (isinstance(s, dict) and "instance" in s)}
    return RuntimeOptions(
        cwd=Path(options.cwd or Path.cwd()),
        model=options.model,
        permission_mode=options.permission_mode,
        allowed_tools=list(options.allowed_tools),
        disallowed_tools=list(options.disallowed_tools),
        max_turns=options.max_turns,
        max_budget_usd=options.max_budget_usd,
        system_prompt=system,
        append_system_prompt=append,
        add_dirs=[Path(d) for d in options.add_dirs],
        continue_session=options.continue_conversation,
        resume=options.resume,
        fork_session=options.fork_session,
        session_id=options.session_id,
        settings_files=[Path(options.settings)] if options.settings else [],
        env={
            **os.environ,
            **options.env,
            **({"MAX_THINKING_TOKENS": str(options.max_thinking_tokens)} if options.max_thinking_tokens else {}),
        },
        channel="sdk",
        hooks=python_hooks(options.hooks or {}),
        mcp_config=[json.dumps({"mcpServers": external})] if external else [],
    )


def python_hooks(hooks: dict[str, list[HookMatcher]]) -> dict[str, Any]:
    """SDK hook callbacks as keel's python hook handlers (called with the hook's JSON input)."""
    out: dict[str, Any] = {}
    for event, matchers in hooks.items():
        for m in matchers:
            handlers = [_handler(cb, m.timeout) for cb in m.hooks]
            entry: dict[str, Any] = {"hooks": handlers}
            if m.matcher is not None:
                entry["matcher"] = m.matcher
            out.setdefault(event, []).append(entry)
    return out


def _handler(callback: Any, timeout: float | None) -> dict[str, Any]:
    async def call(payload: dict[str, Any]) -> dict[str, Any]:
        return hook_output(await callback(payload, payload.get("tool_use_id"), {"signal": None}))

    handler: dict[str, Any] = {"type": "python", "callable": call}
    if timeout is not None:
        handler["timeout"] = timeout
    return handler


class InProcessTransport:
    def __init__(self, options: KeelAgentOptions) -> None:
        self.options = options
        self.lines: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.inputs: asyncio.Queue[object] = asyncio.Queue()
        self.rt: Runtime | None = None
        self.structured: StructuredOutput | None = None
        self.worker: asyncio.Task[None] | None = None
        self.encoder = stream_json.Session("")
        self.partial: PartialMessages | None = None
        self.old_providers: list[Any] = []
        self.denial_messages = DenialMessages()

    async def connect(self) -> None:
        opts = runtime_options(self.options)
        if self.options.can_use_tool is not None:
            opts.ask = self._ask
            opts.extensions.append(self.denial_messages.extension())
        try:
            schema = self.options.schema()
            if schema is not None:
                self.structured = StructuredOutput(schema)
                opts.extensions.append(self.structured.extension())
            rt = Runtime.create(opts)
        except (KeelError, SchemaError) as e:
            raise KeelSDKError(str(e)) from None
        self.rt = rt
        if self.options.tools is not None:
            keep = set(self.options.tools)
            for t in rt.agent.tools.list():
                if t.name not in keep:
                    rt.agent.tools.unregister(t.name)
        for name, server in self.options.mcp_servers.items():
            instance = server.get("instance") if isinstance(server, dict) else None
            if instance is None:
                continue  # an external server (stdio, http): keel's MCP client starts it (mcp_config)
            if not hasattr(instance, "keel_tools"):
                raise KeelSDKError(
                    f"mcp_servers[{name!r}]: make SDK servers with agentkeel.ui.sdk.create_sdk_mcp_server"
                )
            for t in instance.keel_tools():
                rt.agent.tools.register(t)
        self.encoder = stream_json.Session(rt.session_id)
        if self.options.include_partial_messages:
            self.partial = PartialMessages(rt.session_id)
        rt.bus.subscribe(self._on_event)
        self.worker = asyncio.create_task(self._work())

    async def send(self, message: Message) -> None:
        await self.inputs.put(message)

    async def _work(self) -> None:
        rt = self.rt
        assert rt is not None
        while True:
            item = await self.inputs.get()
            if item is _STOP:
                return
            assert isinstance(item, Message)
            started = time.monotonic()
            if self.structured is not None:
                self.structured.reset()
            try:
                await rt.start()
                result = await rt.agent.run(item, source="resume" if rt.resumed is not None else "startup")
            except Exception as exc:  # a transcript that cannot be written at the start
                result = rt.agent.failed(str(exc))
            result.duration_ms = int((time.monotonic() - started) * 1000)
            line = result_object(rt.session_id, result, self.structured)
            line["permission_denials"] = stream_json.permission_denials(result.refused)  # rules, hooks, the host
            line["api_error_status"] = result.api_error_status
            await self.lines.put(line)

    def _on_event(self, event: Event) -> None:
        rt = self.rt
        if rt is None or isinstance(event, RunFinished):
            return
        if isinstance(event, SessionStarted):
            self.encoder.tools = [t.name for t in rt.agent.tools.visible(rt.agent.ext.hides)]
            self.encoder.extra_init = {"permissionMode": rt.permissions.mode, "apiKeySource": "none"}
        if self.partial is not None:
            for line in self.partial.encode(event):
                self.lines.put_nowait(line)
        encoded = stream_json.encode(event, self.encoder)
        if encoded is not None:
            self.lines.put_nowait(encoded)

    async def _ask(self, call: ToolCall, decision: Decision) -> bool:
        callback = self.options.can_use_tool
        assert callback is not None
        ctx = ToolPermissionContext(call.id, decision.reason or None, list(decision.suggestions))
        answer = await callback(call.name, dict(call.input), ctx)
        if isinstance(answer, PermissionResultAllow):
            if answer.updated_input is not None:
                call.input = dict(answer.updated_input)
            return True
        if answer.message:
            self.denial_messages.pending[call.id] = answer.message
        if answer.interrupt and self.rt is not None:
            self.rt.agent.interrupt()
        return False

    async def interrupt(self) -> None:
        if self.rt is not None:
            self.rt.agent.interrupt()

    async def set_permission_mode(self, mode: str) -> None:
        if self.rt is not None:
            self.rt.permissions.mode = mode  # type: ignore[assignment]

    async def set_model(self, model: str | None) -> None:
        from agentkeel.models.catalog import ModelConfigError, resolve_model
        from agentkeel.models.factory import make_provider

        rt = self.rt
        if rt is None:
            return
        env = {**rt.settings.settings.env, **os.environ, **self.options.env}
        provider_settings = rt.settings.settings.provider
        try:
            info = resolve_model(model or self.options.model, env)
            provider = make_provider(info, env, transport=provider_settings.transport if provider_settings else None)
        except ModelConfigError as e:
            raise KeelSDKError(str(e)) from None
        self.old_providers.append(rt.agent.provider)  # a request in flight may still use it
        rt.agent.provider = provider
        rt.agent.config.model, rt.agent.config.cost, rt.model = info.model, info.prices.cost, info

    async def close(self) -> None:
        """Ends the session: a run still going is interrupted, messages not yet started are dropped."""
        while not self.inputs.empty():
            self.inputs.get_nowait()
        if self.rt is not None:
            self.rt.agent.interrupt()
        if self.worker is not None:
            await self.inputs.put(_STOP)
            with contextlib.suppress(asyncio.CancelledError):
                await self.worker
        if self.rt is not None:
            await self.rt.aclose()
        for old in self.old_providers:
            with contextlib.suppress(Exception):
                await old.aclose()
        await self.lines.put(None)
