"""Running a line typed by the user: a slash command or a message for the model.

``keel -p "/fix-issue 42"`` and the interactive prompt both come here (Claude Code runs a
``-p`` prompt that starts with ``/name`` as that command)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkeel.commands.registry import CommandRegistry, Routed, route
from agentkeel.core.events import SinkFailed
from agentkeel.core.loop import RunResult
from agentkeel.core.types import Usage

if TYPE_CHECKING:
    from agentkeel.runtime import Runtime


async def route_line(rt: Runtime, line: str, *, interactive: bool = False) -> Routed:
    registry = rt.agent.services.find(CommandRegistry)
    if registry is None:
        return Routed("prompt", line)
    return await route(registry, rt, line, interactive=interactive)


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
