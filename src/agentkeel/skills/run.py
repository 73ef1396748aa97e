"""Running a skill: the ``Skill`` tool (model) and ``/name`` (user) both come here.

PreSkillExecute and PostSkillExecute fire through the session's LifecyclePoint (a blocked
PreSkillExecute stops the skill). An inline skill's text goes into the conversation; its
``allowed-tools`` are granted and its ``model`` used until the turn ends, as Claude Code 2.1.328
does (called by the model, a skill or command with ``allowed-tools`` needs a ``Skill(name)``
allow rule or the user's approval first: the model cannot grant itself tools). A ``context:
fork`` skill runs in a subagent (its ``agent`` type, general-purpose by default) and its report
is the result. Command files run here too (:func:`invoke_command`; the Skill tool lists them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
from msgspec.structs import replace

from agentkeel.agents.gatecheck import check_call
from agentkeel.core.extensions import LifecyclePoint
from agentkeel.core.loop import Agent
from agentkeel.core.tools import Tool, ToolContext, ToolError, ToolOutput
from agentkeel.internal.frontmatter import FrontmatterError
from agentkeel.models.caching import session_part
from agentkeel.skills.expand import expand
from agentkeel.skills.listing import MAX_DESCRIPTION, Entry, lines
from agentkeel.skills.loader import Skill, SkillCatalog, displayed
from agentkeel.skills.session import ModelCommand
from agentkeel.tools import ELSEWHERE
from agentkeel.tools import SKILL as SKILL_TOOL


class SkillRun(msgspec.Struct, frozen=True):
    text: str
    is_error: bool = False
    forked_agent: str = ""


async def invoke_skill(agent: Agent, skill: Skill, args: str) -> SkillRun:
    life = agent.services.get(LifecyclePoint)
    fields: dict[str, Any] = {"skill_name": skill.name, "args": args, "skill_path": str(skill.path)}
    pre = await life.fire("PreSkillExecute", fields, match=skill.name)
    if pre.blocked:
        return SkillRun(f"Skill {skill.name} was blocked: {pre.reason or 'by a PreSkillExecute hook'}", True)

    text = await _expand_granted(agent, skill, args)
    if pre.context:
        text += "\n\n" + "\n\n".join(pre.context)
    run = SkillRun(text)
    if skill.fork:
        run = await fork_skill(agent, skill, text)
    post = await life.fire("PostSkillExecute", {**fields, "is_error": run.is_error}, match=skill.name)
    if post.context:
        run = replace(run, text=run.text + "\n\n" + "\n\n".join(post.context))
    return run


async def expand_skill(agent: Agent, skill: Skill, args: str) -> str:
    """The skill's (or command's) body with its arguments, !`cmd` lines and @files, through the
    session's checks."""

    async def check(name: str, tool_input: dict[str, object]) -> str | None:
        return await check_call(agent, name, dict(tool_input))

    return await expand(
        skill.body,
        args,
        cwd=agent.context.workdir,  # where the checks judged its commands: the session's working directory
        check=check,
        named=skill.arguments,
        skill_dir=skill.directory,
        plugin_root=skill.plugin_root,
        env=agent.context.env,
    )


async def invoke_command(agent: Agent, skill: Skill, args: str) -> SkillRun:
    """A command file run as Claude Code runs it (typed or through the Skill tool): ``context:
    fork`` runs it in a subagent (its ``agent`` type) whose report is the result; inline, its
    ``allowed-tools`` are granted and its ``model:`` used until the turn ends."""
    text = await _expand_granted(agent, skill, args)
    if skill.fork:
        return await fork_skill(agent, skill, text)
    return SkillRun(text)


async def _expand_granted(agent: Agent, skill: Skill, args: str) -> str:
    """Inline, the grant (``allowed-tools``, a grant for the turn in Claude Code 2.1.328, not a
    narrowing) and ``model`` start before the expansion: the body's own !`cmd` lines run under
    it, as Claude Code runs them. An expansion that fails ends the grant at once."""
    from agentkeel.skills.session import SkillHost

    host = None if skill.fork else agent.services.find(SkillHost)
    if host is not None:
        host.scope_turn(allow=skill.allowed_tools or (), model=skill.model, source=f"/{skill.name}")
    try:
        return await expand_skill(agent, skill, args)
    except BaseException:
        if host is not None:
            host.end_turn()
        raise


async def approve_grant(agent: Agent, skill: Skill) -> str | None:
    """The model may not grant itself tools: a command with ``allowed-tools`` called through the
    Skill tool runs only under an allow rule ``Skill(name)`` (or bypassPermissions mode), or when
    the user approves; otherwise it is refused with Claude Code 2.1.328's words (``-p`` has
    nobody to ask). None when it may run."""
    import uuid

    from agentkeel.core.extensions import ToolCall, Verdict
    from agentkeel.policy.permissions import PermissionEngine

    refusal = (
        f"Execute skill: {skill.name}. The user can add the allow rule Skill({skill.name}) to "
        ".claude/settings.local.json to let it run without asking."
    )
    engine = agent.services.find(PermissionEngine)
    if engine is None:
        return refusal
    decision = engine.decide(SKILL_TOOL, {"skill": skill.name}, agent.tools.get(SKILL_TOOL))
    if decision.decision == "deny":
        return decision.reason or refusal
    if decision.decision == "allow" and (decision.rule is not None or decision.stage == "mode"):
        return None
    resolve = agent.ext.resolver()
    if resolve is None:
        return refusal
    call = ToolCall(
        id="skill_" + uuid.uuid4().hex[:12],
        name=SKILL_TOOL,
        input={"skill": skill.name},
        tool=agent.tools.get(SKILL_TOOL),
        cwd=agent.context.cwd,
        mode=agent.mode(),
    )
    reason = f"/{skill.name} pre-approves {', '.join(skill.allowed_tools or ())} while it runs"
    try:
        answer = await resolve(call, Verdict("ask", reason))
    except Exception:  # fail closed
        return refusal
    return None if answer.decision == "allow" else (answer.reason or refusal)


async def fork_skill(agent: Agent, skill: Skill, text: str) -> SkillRun:
    from agentkeel.agents.spawner import SubagentSpawner

    spawner = agent.services.find(SubagentSpawner)
    if spawner is None:
        return SkillRun(f"Skill {skill.name} runs in a subagent, and none can start here (nesting limit)", True)
    definition = spawner.catalog.get(skill.agent or "general-purpose")
    if definition is None:
        return SkillRun(f"Skill {skill.name}: no agent type '{skill.agent}'", True)
    if skill.model:
        definition = replace(definition, model=skill.model)
    allowed = list(skill.allowed_tools) if skill.allowed_tools is not None else None
    if skill.disallowed_tools:
        definition = replace(definition, disallowed_tools=(*definition.disallowed_tools, *skill.disallowed_tools))
    result = await spawner.run(definition, text, description=f"skill {skill.name}", allowed_tools=allowed)
    return SkillRun(result.text, result.is_error, result.agent_id)


def skill_message(skill: Skill, args: str, text: str) -> str:
    """What the conversation holds for an inline skill, as Claude Code frames it."""
    head = f"<command-name>/{skill.name}</command-name>"
    if args:
        head += f"\n<command-args>{args}</command-args>"
    return f"{head}\nBase directory for this skill: {skill.directory}\n\n{text}"


SKILL = ELSEWHERE[SKILL_TOOL]  # Skill rules name the skill; its text is kept whole: pruning never cuts it

SKILL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "skill": {"type": "string", "description": 'The skill name, e.g. "release" or "my-plugin:pdf"'},
        "args": {"type": "string", "description": "Optional arguments for the skill"},
    },
    "required": ["skill"],
    "additionalProperties": False,
}


LISTING_HEAD = "The following skills are available for use with the Skill tool:"
SKILL_TOOL_TEXT = (
    "Execute a skill within the main conversation. Skills give you specialised instructions and knowledge. "
    "When a skill of the listing in the session context matches the task, invoke it (with its name and any "
    "arguments) before you do the work; its full instructions are loaded then. Do not invoke a skill that is "
    "already running."
)


def listing_entries(catalog: SkillCatalog, commands: Sequence[ModelCommand] = ()) -> list[Entry]:
    """What the Skill tool lists, in Claude Code 2.1.328's order: user skills, project skills, the
    user's and project's commands, plugin commands, plugin skills."""
    skills = catalog.for_model()

    def entry(s: Skill) -> Entry:
        told = s.description + (f" - {s.when_to_use}" if s.when_to_use else "")
        return Entry(s.name, told, displayed(s) if s.display_name else "")

    def group(source: str) -> int:
        return {"user": 0, "project": 1}.get(source, 2)

    ordered = sorted(skills, key=lambda s: group(s.source))  # stable: each group keeps its load order
    own = [entry(s) for s in ordered if group(s.source) < 2]
    plugin_skills = [entry(s) for s in ordered if group(s.source) == 2]
    return [*own, *(Entry(c.name, c.description) for c in commands), *plugin_skills]


def skill_tool_description(
    catalog: SkillCatalog, commands: Sequence[ModelCommand] = (), *, chars: int = 8000, limit: int = MAX_DESCRIPTION
) -> str:
    """The Skill tool's text, then the listing (skills/listing.py: within ``chars`` characters) as a
    session part: the wire formats send it after the stable prefix, so that editing a skill does not
    change the tools every session of the project shares (:mod:`agentkeel.models.caching`)."""
    entries = listing_entries(catalog, commands)
    return SKILL_TOOL_TEXT + session_part(f"{LISTING_HEAD}\n\n" + "\n".join(lines(entries, chars, limit)))


def _runner(commands: Sequence[ModelCommand]) -> Callable[[Any, ToolContext], Awaitable[ToolOutput]]:
    by_name = {c.name: c for c in commands}

    def command(name: str) -> ModelCommand | None:
        found = by_name.get(name)
        if found is None:
            tails = [c for n, c in by_name.items() if n.split(":")[-1] == name]
            found = tails[0] if len(tails) == 1 else None
        return found

    async def run_skill(args: Any, ctx: ToolContext) -> ToolOutput:
        from agentkeel.skills.session import SkillHost

        host = ctx.services.find(SkillHost)
        catalog = ctx.services.find(SkillCatalog)
        if host is None or catalog is None:
            raise ToolError("skills are not available in this session")
        name = args.skill.strip().lstrip("/")
        skill = catalog.get(name)
        if skill is None or not skill.model_invocable:
            found = command(name)
            if found is None:
                known = ", ".join([s.name for s in catalog.for_model()] + list(by_name)) or "none"
                raise ToolError(f"Unknown skill: {name}. Available skills: {known}")
            try:
                loaded = found.load()  # read again: an edit between uses takes effect
            except FrontmatterError as e:
                raise ToolError(str(e)) from None
            if loaded.allowed_tools and not loaded.fork:
                refused = await approve_grant(host.agent, loaded)
                if refused is not None:
                    return ToolOutput(refused, is_error=True)
            ran = await invoke_command(host.agent, loaded, args.args)
            if ran.is_error:
                return ToolOutput(ran.text, is_error=True)
            meta: dict[str, Any] = {"skill": loaded.name}
            if loaded.fork:
                return ToolOutput(ran.text, metadata={**meta, "agent_id": ran.forked_agent})
            return ToolOutput(f"Launching skill: {loaded.name}\n\n{ran.text}", metadata=meta)
        if skill.allowed_tools and not skill.fork:
            refused = await approve_grant(host.agent, skill)
            if refused is not None:
                return ToolOutput(refused, is_error=True)
        run = await invoke_skill(host.agent, skill, args.args)
        if run.is_error:
            return ToolOutput(run.text, is_error=True)
        if skill.fork:
            return ToolOutput(run.text, metadata={"skill": skill.name, "agent_id": run.forked_agent})
        return ToolOutput(skill_message(skill, args.args, run.text), metadata={"skill": skill.name})

    return run_skill


def _skill_response(tool_input: dict[str, Any], output: ToolOutput) -> Any:
    """Claude Code 2.1.328's ``tool_response`` for Skill: whether it ran and the name it ran."""
    name = output.metadata.get("skill") or tool_input.get("skill") or tool_input.get("command")
    return {"success": not output.is_error, "commandName": name}


def skill_tool(
    catalog: SkillCatalog, commands: Sequence[ModelCommand] = (), *, chars: int = 8000, limit: int = MAX_DESCRIPTION
) -> Tool:
    """``commands``: the command files the model may run (``commands.custom.model_commands``);
    ``chars``/``limit``: the listing's budget and the cut of one description (skills/listing.py)."""
    description = skill_tool_description(catalog, commands, chars=chars, limit=limit)
    run_skill = _runner(commands)
    real: list[Tool] = []

    def load() -> Tool:
        if not real:
            from agentkeel.agents.inputs import SkillInput

            real.append(
                Tool(
                    SKILL_TOOL,
                    description,
                    SkillInput,
                    run_skill,
                    group="agents",
                    read_only=True,
                    effects=SKILL,
                    respond=_skill_response,
                )
            )
        return real[0]

    return Tool(
        SKILL_TOOL,
        description,
        None,
        run_skill,
        group="agents",
        read_only=True,
        raw_schema=SKILL_SCHEMA,
        load=load,
        effects=SKILL,
        respond=_skill_response,
    )
