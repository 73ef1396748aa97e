"""The control requests a stream-json client sends, each answered with one control_response.

An unknown subtype, or one keel cannot honour yet, is an error answer that says so: never a
silent success.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentkeel import __version__
from agentkeel.protocol import control
from agentkeel.protocol.stream_json import ControlRequest

if TYPE_CHECKING:
    from agentkeel import Runtime, RuntimeOptions


class Writer(Protocol):
    def write(self, line: dict[str, Any]) -> None: ...


class Session(Protocol):
    """What the handlers need of the stream-json session (``cli.stream_input.Session``)."""

    rt: Runtime | None
    opts: RuntimeOptions
    initialized: bool
    usage_error: bool
    mode_before_start: str | None
    sdk_servers: list[str]
    mcp_tools: dict[str, list[str]]
    model_choice: str | None
    old_providers: list[Any]
    stop_reading: Callable[[], None]

    @property
    def channel(self) -> Writer: ...

    async def build(self, init: dict[str, Any] | None) -> Runtime: ...

    def interrupt(self) -> None: ...


log = logging.getLogger("agentkeel.control")
MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk")


class StartRefused(control.ControlError):
    """The session cannot start as asked (a refused truncating resume)."""


class Unanswered(Exception):
    """A request left without an answer: the process ends instead."""


async def handle(session: Session, req: ControlRequest) -> None:
    try:
        body = await _dispatch(session, req)
    except Unanswered:
        return
    except control.ControlError as e:
        session.channel.write(control.error(req.request_id, str(e)))
    except Exception as e:  # a bug here must not end the session; the client gets the error
        log.exception("control request %s failed", req.subtype)
        session.channel.write(control.error(req.request_id, f"{req.subtype} failed: {type(e).__name__}: {e}"))
    else:
        session.channel.write(control.success(req.request_id, body))


async def _dispatch(session: Session, req: ControlRequest) -> dict[str, Any]:
    sub, body = req.subtype, req.body
    if sub == "initialize":
        if session.initialized:
            raise control.ControlError("initialize: the session is already initialized")
        session.initialized = True
        try:
            rt = await session.build(body)
        except StartRefused as e:  # Claude Code 2.1.328: an error result (the SDKs raise its text), the end
            print(f"keel: {e}", file=sys.stderr)
            session.usage_error = True
            session.channel.write(start_failure(str(e)))
            session.stop_reading()
            raise Unanswered from None
        except control.ControlError as e:  # the session cannot start: say so on stderr too, exit 2
            print(f"keel: {e}", file=sys.stderr)
            session.usage_error = True
            raise
        return {
            "commands": commands_of(rt),
            "agents": agents_of(rt),
            "output_style": output_style_of(rt),
            "available_output_styles": output_styles(rt, session.opts.home),
            "models": [{"value": rt.model.qualified, "displayName": rt.model.qualified, "description": ""}],
            "account": {"apiKeySource": "none"},
            "pid": __import__("os").getpid(),
            "keel_version": __version__,
            "current_permission_mode": rt.permissions.mode,
            "mcp_servers_applied": isinstance(body.get("mcpServers"), dict),  # taken at launch (not: connected)
            "hook_on_failure_supported": False,
            "session_state": "idle",
        }
    if sub == "interrupt":
        session.interrupt()
        return {}
    if sub == "set_permission_mode":
        mode = body.get("mode")
        if mode not in MODES:
            raise control.ControlError(f"set_permission_mode: unknown mode {mode!r} (one of {', '.join(MODES)})")
        if session.rt is None:
            session.mode_before_start = mode
        else:
            session.rt.permissions.mode = mode
        return {}
    if sub == "set_model":
        return await set_model(session, body.get("model"))
    if sub == "mcp_status":
        rt = session.rt or await session.build(None)
        return {"mcpServers": mcp_servers(rt, session.sdk_servers, session.mcp_tools, full=True)}
    if sub == "get_context_usage":
        return _context_usage(session, session.rt or await session.build(None))
    if sub == "rewind_files":  # session/history.py: files back to before a user message
        from agentkeel.session.history import rewind_files

        rt = session.rt or await session.build(None)
        return await rewind_files(
            rt, str(body.get("user_message_id", "")), dry_run=bool(body.get("dry_run")), force=body.get("force") is True
        )
    if sub == "stop_task":
        return await _stop_task(session, str(body.get("task_id", "")))
    raise control.ControlError(
        f"unsupported control request {sub!r} (keel answers: {', '.join(control.CLIENT_REQUESTS)})"
    )


async def set_model(session: Session, name: Any) -> dict[str, Any]:
    from agentkeel.models.catalog import ModelConfigError, resolve_model
    from agentkeel.models.factory import make_provider

    if name is not None and not isinstance(name, str):
        raise control.ControlError("set_model: 'model' must be a string or null")
    rt = session.rt or await session.build(None)
    env = {**rt.settings.settings.env, **session.opts.env}
    try:
        info = resolve_model(name or session.opts.model, env)
        provider = make_provider(
            info, env, transport=rt.settings.settings.provider.transport if rt.settings.settings.provider else None
        )
    except ModelConfigError as e:
        raise control.ControlError(f"set_model: {e}") from None
    session.old_providers.append(rt.agent.provider)  # a request in flight may still use it; closed at exit
    rt.agent.provider = provider
    rt.agent.config.model = info.model
    rt.agent.config.cost = info.prices.cost
    rt.model = info
    session.model_choice = name  # a new session (/clear) starts on it too
    return {}


def _context_usage(session: Session, rt: Runtime) -> dict[str, Any]:
    system = len(rt.agent.config.system) // 4
    tools = sum(len(json.dumps(t.input_schema)) + len(t.description) for t in rt.agent.tools.visible()) // 4
    messages = sum(len(json.dumps(control_data(m))) for m in rt.agent.messages) // 4
    total = system + tools + messages
    window = rt.model.context_window
    return {
        "categories": [
            {"name": "System prompt", "tokens": system, "color": "promptBorder"},
            {"name": "System tools", "tokens": tools, "color": "inactive"},
            {"name": "Messages", "tokens": messages, "color": "purple"},
        ],
        "totalTokens": total,
        "maxTokens": window,
        "rawMaxTokens": window,
        "percentage": round(100.0 * total / window, 2) if window else 0.0,
        "model": rt.model.qualified,
        "isAutoCompactEnabled": False,
        "memoryFiles": [],
        "mcpTools": [
            {"name": t, "serverName": s, "tokens": 0, "isLoaded": True}
            for s, ts in session.mcp_tools.items()
            for t in ts
        ],
        "agents": [],
        "estimated": True,  # keel counts about four characters a token here
    }


def control_data(message: Any) -> Any:
    from agentkeel.core.types import to_data

    return to_data(message)


async def _stop_task(session: Session, task_id: str) -> dict[str, Any]:
    from agentkeel.tools.shell import ShellState

    state = session.rt.agent.services.find(ShellState) if session.rt is not None else None
    shell = state.shells.get(task_id) if state is not None else None
    if state is None or shell is None:
        raise control.ControlError(f"stop_task: no task {task_id!r} (keel's tasks are background shells: bash_N)")
    if shell.status == "running":
        shell.killed = True
        await state.kill(shell.run)
    return {}


# --- what the session offers (initialize's answer and the init message) ------------------


def commands_of(rt: Runtime) -> list[dict[str, str]]:
    """The slash commands, as the SDK's ``SlashCommand`` (name, description, argumentHint)."""
    from agentkeel.commands.registry import CommandRegistry

    registry = rt.agent.services.find(CommandRegistry)
    if registry is None:
        return []
    return [{"name": c.name, "description": c.description, "argumentHint": c.argument_hint or ""} for c in registry]


def agents_of(rt: Runtime) -> list[dict[str, str]]:
    """The subagent types (the built-ins, files, plugins and the SDK's own)."""
    from agentkeel.agents.spawner import SubagentSpawner

    spawner = rt.agent.services.find(SubagentSpawner)
    if spawner is None:
        return []
    out = []
    for agent in spawner.catalog:
        entry = {"name": agent.name, "description": agent.description}
        if agent.model:
            entry["model"] = agent.model
        out.append(entry)
    return out


def mcp_servers(
    rt: Runtime,
    sdk_servers: Sequence[str] = (),
    sdk_tools: Mapping[str, list[str]] | None = None,
    *,
    full: bool = False,
) -> list[dict[str, Any]]:
    """The session's MCP servers as Claude Code reports them: the SDK host's own (in process:
    connected once registered) and every configured one with its connection's status. ``full``
    (``mcp_status``): with each server's tools, error, scope and transport."""
    from agentkeel.mcp import mcp_pool

    tools = sdk_tools or {}
    out: list[dict[str, Any]] = []
    for name in sdk_servers:
        entry: dict[str, Any] = {"name": name, "status": "connected"}
        if full:
            entry.update(tools=[{"name": t} for t in tools.get(name, [])], config={"type": "sdk"})
        out.append(entry)
    pool = mcp_pool(rt.agent.services)
    for name, conn in (pool.connections if pool is not None else {}).items():
        scope = conn.config.scope
        entry = {"name": name, "status": conn.status, "source": "dynamic" if scope == "cli" else scope}
        if full:
            entry.update(scope=conn.config.scope, config={"type": conn.config.transport})
            if conn.config.url:
                entry["config"]["url"] = conn.config.url
            if conn.error and conn.status == "failed":
                entry["error"] = conn.error
            if conn.status == "connected":
                entry["tools"] = [{"name": t.name, "description": t.description or ""} for t in conn.tools]
        out.append(entry)
    return out


def init_fields(rt: Runtime, opts: RuntimeOptions | None, sdk_servers: Sequence[str] = ()) -> dict[str, Any]:
    """What the ``init`` message says of the session besides its id, model and tools (``-p`` and
    stream-json alike, as Claude Code 2.1.328). ``apiKeySource`` names where the key came from,
    never the key."""
    env = {**(opts.env if opts is not None else os.environ), **rt.settings.settings.env}
    source = next((n for n in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN") if env.get(n)), "none")
    return {
        "permissionMode": rt.permissions.mode,
        "mcp_servers": mcp_servers(rt, sdk_servers),
        "apiKeySource": source,
        "slash_commands": [c["name"] for c in commands_of(rt)],
        "output_style": output_style_of(rt),
        "agents": [a["name"] for a in agents_of(rt)],
        "skills": skills_of(rt),
        "plugins": [{"name": p.name, "path": str(p)} for p in (opts.plugin_dirs if opts is not None else ())],
        "additional_directories": [str(d) for d in rt.agent.context.additional_dirs],
    }


def output_style_of(rt: Runtime) -> str:
    """The ``outputStyle`` the settings name, verbatim as Claude Code echoes it ("default" when none)."""
    return rt.settings.settings.outputStyle or "default"


def output_styles(rt: Runtime, home: Path) -> list[str]:
    """The built-in styles and the style files of the project and the user."""
    from agentkeel.context.styles import BUILTIN, style_dirs

    names = [s.name for s in BUILTIN.values()]
    for folder in style_dirs(rt.agent.context.cwd, home):
        with contextlib.suppress(OSError):
            names += [p.stem for p in sorted(folder.glob("*.md")) if p.stem not in names]
    current = output_style_of(rt)
    return names if current in names else [*names, current]


def skills_of(rt: Runtime) -> list[str]:
    from agentkeel.skills.loader import SkillCatalog

    catalog = rt.agent.services.find(SkillCatalog)
    return [s.name for s in catalog] if catalog is not None else []


def start_failure(why: str) -> dict[str, Any]:
    from agentkeel.protocol.stream_json import result_line

    return result_line(
        subtype="error_during_execution",
        is_error=True,
        duration_ms=0,
        num_turns=0,
        result=why,
        session_id="",
        total_cost_usd=0.0,
        usage={"input_tokens": 0, "output_tokens": 0},
    )
