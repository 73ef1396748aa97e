"""Running a line typed by the user: a slash command or a message for the model.

``keel -p "/fix-issue 42"`` and the interactive prompt both come here (Claude Code runs a
``-p`` prompt that starts with ``/name`` as that command)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentkeel.commands.registry import CommandRegistry, Routed, parse_line, route
from agentkeel.core.events import SinkFailed
from agentkeel.core.run import RunResult
from agentkeel.core.types import Usage

if TYPE_CHECKING:
    from agentkeel.core.handle import SessionHandle as Runtime


async def route_line(rt: Runtime, line: str, *, interactive: bool = False) -> Routed:
    registry = rt.agent.services.find(CommandRegistry)
    if registry is None:
        return Routed("prompt", line)
    if line.lstrip().startswith("/mcp__"):
        sync_mcp_prompts(rt, registry)
    parsed = parse_line(line)
    if parsed is not None and registry.get(parsed[0]) is None:
        refused = _model_only_skill(rt, parsed[0])
        if refused is not None:
            return Routed("output", refused, parsed[0])
    return await route(registry, rt, line, interactive=interactive)


def _model_only_skill(rt: Runtime, name: str) -> str | None:
    """A ``user-invocable: false`` skill typed by the user: Claude Code 2.1.328 refuses it with
    this message (exit 0, no model request) rather than sending the line to the model."""
    from agentkeel.skills.loader import SkillCatalog

    catalog = rt.agent.services.find(SkillCatalog)
    skill = catalog.get(name) if catalog is not None else None
    if skill is None or skill.user_invocable:
        return None
    return (
        "This skill can only be invoked by Claude, not directly by users. "
        f'Ask Claude to use the "{skill.name}" skill for you.'
    )


def sync_mcp_prompts(rt: Runtime, registry: CommandRegistry) -> None:
    """The connected MCP servers' prompts as ``/mcp__<server>__<prompt>`` commands (servers connect
    after start-up and may come and go, so this runs before a line that names one is routed)."""
    from agentkeel.mcp.command import prompt_commands

    for name in [c.name for c in registry if c.kind == "mcp"]:
        registry.unregister(name)
    for pc in prompt_commands(rt):

        async def expand(runtime: object, args: str, run: Callable[[str], Any] = pc.run) -> str:
            return str(await run(args))

        hint = " ".join(f"<{a}>" for a in pc.arguments)
        registry.register_prompt(pc.name, pc.description, expand, argument_hint=hint)


async def run_prompt(rt: Runtime, prompt: str) -> RunResult:
    """Run ``prompt`` to a stop: a command's own output needs no model request."""
    if not prompt.lstrip().startswith("/"):
        return await rt.run(prompt)
    try:
        await rt.start()
    except SinkFailed as e:
        return rt.agent.failed(str(e))
    routed = await route_line(rt, prompt)
    if routed.kind == "prompt":
        return await rt.run(routed.text)
    if routed.kind == "error":
        return RunResult("error_during_execution", routed.text, 0, Usage(), 0.0, 0, routed.text)
    return RunResult("success", routed.text, 0, Usage(), 0.0, 0)
