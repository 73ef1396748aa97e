"""Wiring agents, skills, slash commands and plugins into a session: one call from the Runtime.

:func:`definitions` reads the definitions (plugins first, then user and project folders) before
the session's Agent is built: the services that need no Agent (``SkillCatalog``,
``CommandRegistry``, ``PluginSet``) and the ``Task`` (and ``Agent``) and ``Skill`` tools, which the
builder gives the Agent at construction. :func:`attach` then adds what holds the Agent
(``SkillHost``, ``SubagentSpawner``) and the ``agents`` extension: it hides the ``Agent``
alias from the model, narrows tools to an inline skill's ``allowed-tools`` until the next
prompt, tells the model about path-activated skills when a matching file is touched, and
hands finished background agents' results to the next prompt.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from agentkeel.agents.defs import AgentCatalog, agent_from_mapping, load_agents
from agentkeel.agents.spawner import SubagentSpawner, tool_name
from agentkeel.agents.tool import task_tools
from agentkeel.commands.builtins import register_builtins
from agentkeel.commands.custom import load_commands, model_commands, skill_command
from agentkeel.commands.registry import CommandRegistry
from agentkeel.core.events import Event, SessionEnded
from agentkeel.core.extensions import Extension, PromptInfo, PromptVerdict, StopInfo, ToolCall, Verdict
from agentkeel.core.loop import Agent
from agentkeel.core.tools import Services, Tool, ToolOutput
from agentkeel.internal import globs
from agentkeel.plugins.loader import Plugin, find_plugins
from agentkeel.skills.loader import Skill, SkillCatalog, load_skills
from agentkeel.skills.session import SkillHost
from agentkeel.tools import AGENT_ALIAS

if TYPE_CHECKING:
    from agentkeel.agents.background import BackgroundAgents

PATH_KEYS = ("file_path", "path", "notebook_path")


def _background(agent: Agent) -> BackgroundAgents | None:
    """The session's background agents, if any was started (none can be while their module was
    never imported: the first prompt does not import it to find that out)."""
    module = sys.modules.get("agentkeel.agents.background")
    return None if module is None else agent.services.find(module.BackgroundAgents)


class PluginSet(msgspec.Struct):
    """The session's plugins (a service: ``keel plugins list``, /status, the hooks loader)."""

    share_with_subagents = True
    plugins: list[Plugin] = msgspec.field(default_factory=list)


class Definitions(msgspec.Struct):
    """What the session's folders define, read before its Agent is built: plugins, agent types,
    skills, slash commands, and the tools they bring (``Task``/``Agent``, ``Skill``)."""

    plugins: list[Plugin]
    catalog: AgentCatalog
    skills: SkillCatalog
    commands: CommandRegistry
    tools: list[Tool]
    warnings: list[str]

    def provide(self, services: Services) -> None:
        """The session's services that need no Agent: its plugins, skills and commands."""
        services.put(PluginSet, PluginSet(self.plugins))
        services.put(SkillCatalog, self.skills)
        services.put(CommandRegistry, self.commands)


def definitions(
    *,
    cwd: Path,
    home: Path,
    plugin_dirs: Sequence[Path] = (),
    layers: Iterable[Any] = (),
    agents: dict[str, Any] | None = None,
    skills_allowed: Sequence[str] | None = None,
    listing: tuple[int, int] = (8000, 1536),
    scopes: frozenset[str] | None = None,
) -> Definitions:
    """Read the definitions (plugins first, then user and project folders); their warnings are for
    the user (bad definition files, missing plugins). ``listing``: the skill listing's budget in
    characters and the cut of one description (skills/listing.py); ``scopes``: the user's and/or
    the project's folders only (``--setting-sources``; None: both)."""
    plugins, warnings = find_plugins(plugin_dirs, layers)
    extra = []
    for name, spec in (agents or {}).items():
        found, problem = agent_from_mapping(str(name), spec)
        warnings += [problem] if problem else []
        extra += [found] if found is not None else []
    agent_paths = [(p.name, d) for p in plugins for d in p.paths("agents", "agents")]
    catalog = load_agents(cwd, home, plugins=agent_paths, extra=extra, scopes=scopes)
    skill_paths = [(p.name, d, p.root) for p in plugins for d in p.paths("skills", "skills")]
    skills = load_skills(cwd, home, plugins=skill_paths, scopes=scopes)
    if skills_allowed is not None:
        warnings += only_skills(skills, skills_allowed)
    registry = CommandRegistry()
    register_builtins(registry)
    command_paths = [(p.name, d, p.root) for p in plugins for d in p.paths("commands", "commands")]
    load_commands(registry, cwd, home, plugins=command_paths, scopes=scopes)
    for skill in skills:
        if skill.user_invocable:
            registry.register(skill_command(skill))
    warnings += catalog.warnings + skills.warnings + registry.warnings
    tools = task_tools(catalog)
    commands = model_commands(registry)  # Claude Code offers command files through the Skill tool too
    if skills.for_model() or commands:
        from agentkeel.skills.run import skill_tool  # the Skill tool (and skill expansion): only with skills

        tools.append(skill_tool(skills, commands, chars=listing[0], limit=listing[1]))
    return Definitions(plugins, catalog, skills, registry, tools, warnings)


def attach(
    agent: Agent,
    found: Definitions,
    *,
    session_id: str,
    session_dir: Path,
    trusted: bool,
    env: dict[str, str] | None = None,
    wait_background: bool = True,
    extension: bool = True,
    not_shared: frozenset[str],
) -> None:
    """What holds the session's Agent: the skill host, the subagent spawner, the ``agents`` built-in
    (``extension``: ``disabled_hooks`` may leave it out). ``not_shared``: the parent's built-ins a
    subagent does not share (the registry's subagent profile)."""
    services = agent.services
    skills = found.skills
    services.put(SkillHost, SkillHost(agent))
    spawner = SubagentSpawner(
        agent,
        found.catalog,
        session_id=session_id,
        session_dir=session_dir,
        trusted=trusted,
        env=env,
        not_shared=not_shared,
        child_extension=(lambda child: agents_extension(child, skills)) if extension else None,
    )
    services.put(SubagentSpawner, spawner)
    if extension:
        agent.ext.add(agents_extension(agent, skills, wait_background=wait_background))
    agent.bus.subscribe(_on_session_end(agent))


def only_skills(skills: SkillCatalog, allowed: Sequence[str]) -> list[str]:
    """Keep only the allowed skills (by name, or a plugin skill by its bare name); warn about
    names that match nothing, as a typo would otherwise silently hide every skill."""
    keep = {s.name for name in allowed if (s := skills.get(name)) is not None}
    missing = [name for name in allowed if skills.get(name) is None]
    skills.skills = {n: s for n, s in skills.skills.items() if n in keep}
    return [f"skills: no skill named {name!r} (the allowlist names skills by their folder name)" for name in missing]


def _on_session_end(agent: Agent) -> Callable[[Event], None]:
    """A session that ends after an interrupt does not wait for its background agents."""

    def watch(event: Event) -> None:
        if isinstance(event, SessionEnded) and event.reason != "exit":
            background = _background(agent)
            if background is not None:
                background.hurry = True

    return watch


def agents_extension(agent: Agent, skills: SkillCatalog, *, wait_background: bool = False) -> Extension:
    """``wait_background``: when the model stops with background agents still running, wait for
    the next one and go on with its result (headless and SDK runs: nobody is there to prompt again)."""
    host = agent.services.get(SkillHost)

    def hide(tool: Tool) -> bool:
        return tool.name == AGENT_ALIAS  # the alias runs, but the model is shown one name

    async def on_prompt(info: PromptInfo) -> PromptVerdict | None:
        host.active_tools = None  # an inline skill's allowed-tools last until the next prompt
        background = _background(agent)
        done = background.take_finished() if background is not None else []
        if not done:
            return None
        from agentkeel.agents.background import finished_context

        return PromptVerdict(context=(finished_context(done),))

    async def on_stop(info: StopInfo) -> str | None:
        background = _background(agent)
        if background is None:
            return None
        from agentkeel.agents.background import finished_context

        while not background.finished and wait_background and not agent.interrupted:
            pending = [t for t in background.tasks.values() if not t.done()]
            if not pending:
                break
            await asyncio.wait(pending, timeout=0.2, return_when=asyncio.FIRST_COMPLETED)
        if agent.interrupted:
            return None
        done = background.take_finished()
        return finished_context(done) if done else None

    async def before_tool(call: ToolCall) -> Verdict | None:
        allowed = host.active_tools
        if allowed is None:
            return None
        if call.name in {tool_name(t) for t in allowed}:
            return None
        return Verdict("deny", f"{call.name} is not in the running skill's allowed-tools ({', '.join(allowed)})")

    async def after_tool(call: ToolCall, output: ToolOutput) -> ToolOutput:
        if not skills.skills or output.is_error or not isinstance(output.content, str):
            return output
        note = _path_skills(skills, host, call, agent.context.cwd)
        if not note:
            return output
        return ToolOutput(output.content + note, output.is_error, output.metadata)

    return Extension(
        "agents",
        before_tool=before_tool,
        after_tool=after_tool,
        on_prompt=on_prompt,
        on_stop=on_stop,
        hide_tool=hide,
    )


def _path_skills(skills: SkillCatalog, host: SkillHost, call: ToolCall, cwd: Path) -> str:
    raw = next((call.input.get(k) for k in PATH_KEYS if isinstance(call.input.get(k), str)), None)
    if raw is None:
        return ""
    path = Path(raw)
    try:
        rel = (path if path.is_absolute() else cwd / path).resolve().relative_to(cwd.resolve()).as_posix()
    except ValueError:
        return ""
    hits: list[Skill] = []
    for skill in skills:
        if skill.name in host.activated or not skill.paths or not skill.model_invocable:
            continue
        if globs.matches(skill.paths, rel):
            host.activated.add(skill.name)
            hits.append(skill)
    if not hits:
        return ""
    lines = "\n".join(f"- {s.name}: {s.description}" for s in hits)
    return (
        f"\n\n<system-reminder>Skills that apply to {rel} (load one with the Skill tool before you change the "
        f"file):\n{lines}\n</system-reminder>"
    )
