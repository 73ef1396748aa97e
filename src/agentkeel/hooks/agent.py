"""The ``agent`` handler: a bounded, read-only agent loop that answers ``{"ok", "reason"}``.

It is the prompt handler with eyes: the model may Read, Grep, Glob and LS inside the project
(nothing else, and nothing outside it) for at most ``maxTurns`` requests, through the session's
provider, under the handler's timeout (the dispatcher's). Its last answer is read as the prompt
handler's is: ``{"ok": false, "reason": ...}`` blocks as exit 2 does.

Its bus and built-ins come from the composition root (the ``hook-agent`` profile of the built-in
registry: the result guard, the output bounds, the request validators, redaction on the bus), as
any session's do: this module adds only the read-only scope.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.core.events import EventBus
from agentkeel.core.extensions import BeforeTool, Extension, Extensions, ToolCall, Verdict
from agentkeel.core.loop import Agent
from agentkeel.core.provider import Provider
from agentkeel.core.retry import RetryPolicy
from agentkeel.core.run import LoopConfig
from agentkeel.core.tools import Services, ToolContext, ToolRegistry
from agentkeel.hooks.config import Handler
from agentkeel.hooks.prompt import verdict_from_text
from agentkeel.hooks.runners import Raw

SYSTEM = (
    "You check one event of a coding agent's session for a hook. You may use Read, Grep, Glob and LS "
    "to look at the project. When you know the answer, reply with only a JSON object: "
    '{"ok": true} to let it proceed, or {"ok": false, "reason": "why, in one sentence"} to stop it.'
)
_PATH_KEYS = ("file_path", "path")

# a hook agent's bus (redacting what it logs) and the built-ins of the hook-agent profile
AgentSession = Callable[[], tuple[EventBus, list[Extension]]]


def _inside(project: Path) -> BeforeTool:
    """A before_tool check: only the read-only tools, and only paths inside the project."""

    from agentkeel.tools import file_reader_names

    readers = file_reader_names()

    async def check(call: ToolCall) -> Verdict | None:
        if call.name not in readers:
            return Verdict("deny", f"{call.name} is not available to a hook agent (read-only: {', '.join(readers)})")
        for key in _PATH_KEYS:
            value = call.input.get(key)
            if isinstance(value, str) and value:
                target = (project / value).resolve() if not Path(value).is_absolute() else Path(value).resolve()
                if not target.is_relative_to(project):
                    return Verdict("deny", f"{value} is outside the project; a hook agent reads only {project}")
        return Verdict("allow")

    return check


async def run_agent(
    handler: Handler,
    payload: dict[str, Any],
    provider: Provider,
    model: str,
    project: Path,
    session_id: str,
    session: AgentSession | None,
) -> Raw:
    if session is None:  # fail closed: never an agent without the result guard and redaction
        return Raw(None, error="cannot run an agent here: this session gives hooks no agent built-ins")
    from agentkeel.tools import builtin_tools, file_reader_names

    arguments = json.dumps(payload, ensure_ascii=False, default=str)
    text = handler.prompt
    text = text.replace("$ARGUMENTS", arguments) if "$ARGUMENTS" in text else f"{text}\n\n{arguments}"
    project = project.resolve()
    readers = file_reader_names()
    tools = ToolRegistry([t for t in builtin_tools() if t.name in readers])
    bus, builtins = session()  # nothing of the child's is written to the session
    extensions = Extensions([Extension("hook-agent-scope", before_tool=_inside(project)), *builtins])
    config = LoopConfig(
        model=handler.model or model,
        system=SYSTEM,
        max_tokens=2048,
        max_turns=handler.max_turns,
        retry=RetryPolicy(max_retries=1),
    )
    context = ToolContext(cwd=project, session_id=f"{session_id}-hook-agent", services=Services(), emit=bus.emit)
    agent = Agent(provider, tools, config, bus=bus, extensions=extensions, context=context)
    try:
        result = await agent.run(text)
    finally:
        await context.services.aclose()
    if result.subtype == "error_max_turns":
        return Raw(None, error=f"agent did not answer within {handler.max_turns} turns")
    if result.is_error:
        return Raw(None, error=f"agent failed: {result.error}")
    return verdict_from_text(result.result)
