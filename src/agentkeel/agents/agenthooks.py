"""An agent definition's own ``hooks``, live only while that agent runs (as in Claude Code).

The frontmatter holds settings-shaped hooks (``{"PreToolUse": [{"matcher": "<tool>", "hooks":
[...]}]}``). A ``Stop`` there becomes ``SubagentStop`` (the agent stopping is its subagent
stop). They are built by the session's ``hooks`` built-in (``DefinitionHooks``, a service the
composition root provides: this module imports neither the hooks package nor the app), bound to the child:
its transcript, its working directory, its bus. The result is an extension for the child
(``agent-hooks``, before the permission gate as the session's hooks are) and the lifecycle
point through which the spawner fires the agent's SubagentStop.

A definition from a project (or a plugin inside it) runs commands: its hooks are inert until
the folder is trusted (``keel trust``), as the project's own settings hooks are.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec.structs import replace

from agentkeel.core.extensions import Extension, LifecyclePoint, LifecycleResult
from agentkeel.core.tools import Services

if TYPE_CHECKING:
    from agentkeel.agents.defs import AgentDef
    from agentkeel.core.events import EventBus
    from agentkeel.core.loop import Agent
    from agentkeel.core.provider import Provider


class DefinitionHooks(msgspec.Struct, frozen=True):
    """A session service the composition root provides: builds the session's ``hooks`` built-in
    for a definition's own hooks, bound to the child. ``build(parent, hooks, **parts)`` returns
    (the extension or None, its notices), or (None, None) when the session has no hooks built-in."""

    build: Callable[..., tuple[Extension | None, list[str] | None]]


class AgentHooks(msgspec.Struct):
    extension: Extension | None = None
    life: LifecyclePoint | None = None
    notes: list[str] = msgspec.field(default_factory=list)

    async def fire(self, event: str, fields: dict[str, Any], *, match: str | None = None) -> LifecycleResult:
        if self.life is None:
            return LifecycleResult()
        return await self.life.fire(event, fields, match=match)

    async def close(self) -> None:
        """Wait for the agent's async hooks (and fire its SessionEnd, if it has one)."""
        if self.extension is not None and self.extension.close is not None:
            await self.extension.close()


def _runs_here(agent: AgentDef, project: Path, trusted: bool) -> bool:
    if trusted or agent.source in ("built-in", "sdk", "user"):
        return True
    if agent.path is None:
        return False
    return not agent.path.resolve().is_relative_to(project.resolve())  # a plugin installed outside the project


def agent_hooks(
    agent: AgentDef,
    parent: Agent,
    *,
    agent_id: str,
    bus: EventBus,
    transcript: Path,
    workdir: Path,
    scratch: Path,
    provider: Provider,
    model: str,
    env: dict[str, str],
    trusted: bool,
) -> AgentHooks:
    if not agent.hooks:
        return AgentHooks()
    if not _runs_here(agent, parent.context.cwd, trusted):
        return AgentHooks(notes=[f"agent {agent.name}: its hooks are inert in an untrusted folder (`keel trust`)"])
    make = parent.services.find(DefinitionHooks)
    if make is None:
        return AgentHooks(notes=[f"agent {agent.name}: hooks are not available in this session; its hooks are off"])
    hooks = {("SubagentStop" if event == "Stop" else event): groups for event, groups in agent.hooks.items()}
    services = Services()  # the agent's own lifecycle point lands here, not in the child's services
    built, notices = make.build(
        parent,
        hooks,
        bus=bus,
        scratch=scratch,
        provider=provider,
        model=model,
        agent_id=agent_id,
        transcript=transcript,
        workdir=workdir,
        env=env,
        services=services,
    )
    if built is None and notices is None:
        return AgentHooks(notes=[f"agent {agent.name}: hooks are not available in this session; its hooks are off"])
    source = str(agent.path) if agent.path is not None else f"agent {agent.name}"
    notes = [n.replace("sdk: ", f"{source}: ", 1) for n in notices or []]
    if built is None:
        return AgentHooks(notes=notes)
    extension = replace(built, name="agent-hooks")
    for subscriber in extension.subscribers:
        bus.subscribe(subscriber)
    return AgentHooks(extension, services.find(LifecyclePoint), notes)
