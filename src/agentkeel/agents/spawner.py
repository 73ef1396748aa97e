"""The SubagentSpawner: the service that assembles and runs a child agent.

A child is a second :class:`~agentkeel.core.loop.Agent` in the same process with its own
context (messages), its own event bus and its own transcript at
``<session folder>/subagents/agent-<id>.jsonl`` (with ``agent-<id>.meta.json`` beside it: the
link to the parent session and tool call, the status and the result). It shares the
parent's provider and, for its tool calls, the parent's tool extensions: the permission gate
(rules and the ask flow), PreToolUse/PostToolUse hooks, the result guard. SubagentStart and
SubagentStop fire through the session's :class:`LifecyclePoint`. The core loop knows nothing
of any of this: the Task tool asks this service for a child and awaits it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

from agentkeel.agents.agenthooks import AgentHooks, agent_hooks
from agentkeel.agents.defs import AgentCatalog, AgentDef
from agentkeel.agents.forwarding import Listener, SubagentActivity, SubagentStream
from agentkeel.context.builder import environment_block
from agentkeel.core.events import Notice, SessionStarted
from agentkeel.core.extensions import Extension, Extensions, LifecyclePoint, ToolCall, Verdict
from agentkeel.core.loop import Agent
from agentkeel.core.provider import Provider
from agentkeel.core.run import LoopConfig, RunResult
from agentkeel.core.tools import Services, ToolContext, ToolRegistry
from agentkeel.internal.env import KeelEnv
from agentkeel.tools import effects_for, names_of, offered_when_named

log = logging.getLogger(__name__)

MAX_RESULT_CHARS = 40_000
MAX_STOP_CONTINUES = 3


class SubagentResult(msgspec.Struct):
    agent_id: str
    agent_type: str
    subtype: str
    text: str
    transcript: Path
    num_turns: int = 0
    cost_usd: float = 0.0
    duration_ms: int = 0
    extra: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def is_error(self) -> bool:
        return self.subtype != "success"


def forward_subagents(agent: Agent, session_id: str, write: Callable[[dict[str, Any]], None], *, text: bool) -> None:
    """Show ``agent``'s subagents to a stream-json host through ``write`` (``text``: the SDK's
    ``forwardSubagentText``; see agents/forwarding.py); a session without a spawner is left as it is."""
    spawner = agent.services.find(SubagentSpawner)
    if spawner is not None:
        spawner.listeners.append(SubagentStream(session_id, write, forward_text=text))


def tool_name(spec: str) -> str:
    """``Bash(git:*)`` -> ``Bash``: a tool list may carry permission-rule specifiers."""
    return spec.split("(", 1)[0].strip()


def tool_names(specs: Iterable[str]) -> set[str]:
    """The tools a definition's list names, each under all its names: ``Agent`` and ``Task`` are
    one tool, as are ``TaskStop`` and ``KillShell`` (either grants or takes both)."""
    return {name for t in specs for name in names_of(tool_name(t))}


class SubagentSpawner:
    """Builds and runs child agents for one parent agent (a session, or a child one level up)."""

    share_with_subagents = False

    def __init__(
        self,
        parent: Agent,
        catalog: AgentCatalog,
        *,
        session_id: str,
        session_dir: Path,
        depth: int = 0,
        max_depth: int | None = None,
        concurrency: int | None = None,
        max_result_chars: int = MAX_RESULT_CHARS,
        trusted: bool = False,  # the folder is explicitly trusted (not merely without project settings)
        providers: dict[str, Provider] | None = None,
        env: dict[str, str] | None = None,
        not_shared: frozenset[str] = frozenset(),
        child_extension: Callable[[Agent], Extension] | None = None,
        pool: ToolRegistry | None = None,
        withheld: frozenset[str] = frozenset(),
    ) -> None:
        """``not_shared``: the parent's built-ins a child does not share (the registry's subagent
        profile leaves them out: per-conversation state, each child has its own); ``child_extension``
        builds a child's own copy of a per-agent extension (the agents built-in).

        ``pool``: the session's tools, which every definition picks its ``tools:`` from, however deep
        (Claude Code: a team lead with ``tools: Agent, Read`` runs a builder that writes); None for
        the session's own spawner (its parent's tools are the pool). ``withheld``: what the
        ``disallowedTools`` of the agents above took away, which no agent below them gets back (a
        read-only validator cannot write through a builder it starts; Claude Code lets it)."""
        self.parent = parent
        self.catalog = catalog
        self.session_id = session_id
        self.session_dir = session_dir
        self.depth = depth
        self.env = env if env is not None else dict(os.environ)
        known = KeelEnv.of(self.env)  # the session's environment, not this process's
        self.max_depth = max_depth if max_depth is not None else known.subagent_max_depth
        self.concurrency = concurrency if concurrency is not None else known.subagent_concurrency
        self.slots = asyncio.Semaphore(self.concurrency)
        self.max_result_chars = max_result_chars
        self.trusted = trusted
        self.providers: dict[str, Provider] = providers if providers is not None else {}
        self.running: dict[str, Agent] = {}
        self.not_shared = not_shared
        self.child_extension = child_extension
        self._pool = pool
        self.withheld = withheld
        self.listeners: list[Listener] = []  # who sees the children's activity (an SDK host: forwarding.py)
        self.active = 0  # children running now (the concurrency figure tests and benchmarks read)
        self.peak = 0

    @property
    def subagent_dir(self) -> Path:
        return self.session_dir / "subagents"

    @property
    def pool(self) -> ToolRegistry:
        return self._pool if self._pool is not None else self.parent.tools

    def can_nest(self) -> bool:
        return self.depth + 1 < self.max_depth

    # --- assembling a child ----------------------------------------------------------------

    def child_tools(self, agent: AgentDef, allowed: list[str] | None = None) -> ToolRegistry:
        wanted = None if agent.tools is None else tool_names(agent.tools)
        if allowed is not None:
            narrowed = tool_names(allowed)
            wanted = narrowed if wanted is None else wanted & narrowed
        denied = tool_names(agent.disallowed_tools) | self.withheld
        tools = ToolRegistry()
        for tool in self.pool.list():
            if wanted is not None and tool.name not in wanted:
                continue
            if tool.name in denied or effects_for(tool, tool.name).rule in denied:
                continue  # a family's name (Edit) takes every tool its rules govern (Write, MultiEdit...)
            if effects_for(tool, tool.name).delegates and not self.can_nest():
                continue  # Claude Code 2.1.328: agents at depth 3 get no Agent tool (KEEL_SUBAGENT_MAX_DEPTH)
            tools.register(offered_when_named(tool) if wanted is not None else tool)
        return tools

    def _model(self, agent: AgentDef) -> tuple[Provider, str, str]:
        """(provider, model id, note): the definition's model when it resolves, else the parent's."""
        parent = self.parent
        if not agent.model:
            return parent.provider, parent.config.model, ""
        try:
            from agentkeel.models.catalog import resolve_model
            from agentkeel.models.factory import make_provider

            info = resolve_model(agent.model, self.env)
            provider = self.providers.get(info.provider)
            if provider is None:
                provider = make_provider(info, self.env)
                self.providers[info.provider] = provider
            return provider, info.model, ""
        except Exception as exc:  # a model that cannot be used is the parent's, and a notice
            note = f"agent {agent.name}: model '{agent.model}' is not usable ({exc}); using {parent.config.model}"
            return parent.provider, parent.config.model, note

    def _extensions(self, agent: AgentDef, own_hooks: Extension | None, own_agents: bool) -> Extensions:
        """The definition's own mode, the parent's built-ins of the subagent profile (the same
        instances: one gate, one result guard), the definition's hooks before the permission gate
        as a session's are; ``own_agents``: the child gets its own ``agents`` extension (added
        with the child), not its parent's."""
        ext = Extensions()
        # a definition from the project (or a plugin) widens permissions only in a folder the user
        # trusted explicitly: a cloned repository's .claude/agents must not grant itself bypass
        own = _mode_extension(agent.permission_mode, self.trusted or agent.source in ("built-in", "sdk", "user"))
        if own is not None:
            ext.add(own)
        for item in self.parent.ext:
            if item.name in self.not_shared or (own_agents and item.name == "agents"):
                continue
            if all(getattr(item, point) is None for point in ("before_tool", "after_tool", "resolve_ask", "hide_tool")):
                continue
            ext.add(
                Extension(
                    item.name,
                    before_tool=item.before_tool,
                    after_tool=item.after_tool,
                    resolve_ask=item.resolve_ask,
                    hide_tool=item.hide_tool,
                    required=item.required,
                )
            )
        if own_hooks is not None:
            ext.add(own_hooks, before="permission-gate" if ext.get("permission-gate") is not None else None)
        return ext

    def _services(self) -> Services:
        services = Services()
        life = self.parent.services.find(LifecyclePoint)
        if life is not None:
            services.put(LifecyclePoint, life)
        for item in list(self.parent.services.values()):
            if getattr(item, "share_with_subagents", False) is True:
                services.put(type(item), item)
        return services

    def build(
        self,
        agent: AgentDef,
        agent_id: str,
        *,
        cwd: Path | None = None,
        allowed_tools: list[str] | None = None,
        system_extra: str = "",
    ) -> tuple[Agent, Any, list[str], AgentHooks]:
        """(child agent, its transcript writer, notices, the definition's own hooks)."""
        from agentkeel.policy.redaction import session_bus
        from agentkeel.session.store import SessionWriter

        parent = self.parent
        path = self.subagent_dir / f"agent-{agent_id}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = SessionWriter(path, agent_id)
        bus = session_bus(writer)  # as every session's: redacted, then its own transcript
        provider, model, note = self._model(agent)
        workdir = cwd or parent.context.cwd
        preloaded, missing = self._skills(agent)
        system_extra = "\n\n".join(x for x in (preloaded, system_extra) if x)
        config = LoopConfig(
            model=model,
            system=child_system(agent, workdir, model, system_extra),
            max_tokens=parent.config.max_tokens,
            max_turns=agent.max_turns or KeelEnv.of(self.env).subagent_max_turns,
            thinking_budget=parent.config.thinking_budget,
            default_tool_timeout_s=parent.config.default_tool_timeout_s,
            retry=parent.config.retry,
            cost=parent.config.cost,
        )
        services = self._services()
        context = ToolContext(
            cwd=workdir,
            session_id=agent_id,
            services=services,
            emit=bus.emit,
            additional_dirs=parent.context.additional_dirs,
            env=parent.context.env,
            scratch_dir=self.subagent_dir / agent_id / "tool-results",
            hidden_path=parent.context.hidden_path,
        )
        own_hooks = agent_hooks(
            agent,
            parent,
            agent_id=agent_id,
            bus=bus,
            transcript=path,
            workdir=workdir,
            scratch=self.subagent_dir / agent_id / "hooks",
            provider=provider,
            model=model,
            env=self.env,
            trusted=self.trusted,
        )
        from agentkeel.skills.loader import SkillCatalog
        from agentkeel.skills.session import SkillHost

        own_agents = self.child_extension is not None and services.find(SkillCatalog) is not None
        child = Agent(
            provider,
            self.child_tools(agent, allowed_tools),
            config,
            bus=bus,
            extensions=self._extensions(agent, own_hooks.extension, own_agents),
            context=context,
            mode=parent.mode,
        )
        if parent.services.find(SkillHost) is not None:
            services.put(SkillHost, SkillHost(child))
        if own_agents and self.child_extension is not None:
            child.ext.add(self.child_extension(child))  # its own allowed-tools narrowing and path-activated skills
        if self.can_nest():
            services.put(
                SubagentSpawner,
                SubagentSpawner(
                    child,
                    self.catalog,
                    session_id=self.session_id,
                    session_dir=self.session_dir,
                    depth=self.depth + 1,
                    max_depth=self.max_depth,
                    concurrency=self.concurrency,
                    max_result_chars=self.max_result_chars,
                    trusted=self.trusted,
                    providers=self.providers,
                    env=self.env,
                    not_shared=self.not_shared,
                    child_extension=self.child_extension,
                    pool=self.pool,
                    withheld=self.withheld | tool_names(agent.disallowed_tools),
                ),
            )
        notes = [note] if note else []
        notes += [f"agent {agent.name}: no skill named '{name}' to preload" for name in missing]
        return child, writer, notes + own_hooks.notes, own_hooks

    def _skills(self, agent: AgentDef) -> tuple[str, list[str]]:
        """The full text of the skills the definition preloads (its ``skills`` list), and the missing names."""
        if not agent.skills:
            return "", []
        from agentkeel.skills.loader import SkillCatalog

        catalog = self.parent.services.find(SkillCatalog)
        parts, missing = [], []
        for name in agent.skills:
            skill = catalog.get(name) if catalog is not None else None
            if skill is None:
                missing.append(name)
                continue
            body = skill.body.replace("${CLAUDE_SKILL_DIR}", str(skill.directory))
            parts.append(f'<skill name="{skill.name}">\n{body}\n</skill>')
        text = "# Skills loaded for this agent\n" + "\n\n".join(parts) if parts else ""
        return text, missing

    # --- running a child -------------------------------------------------------------------

    async def run(
        self,
        agent: AgentDef,
        prompt: str,
        *,
        description: str = "",
        tool_use_id: str = "",
        cwd: Path | None = None,
        allowed_tools: list[str] | None = None,
        agent_id: str | None = None,
        background: bool = False,
    ) -> SubagentResult:
        """Run a child to its stop. Cancelling this (the parent was interrupted) interrupts the
        child, waits for it to write its ending, and then lets the cancellation go on."""
        agent_id = agent_id or "a" + uuid.uuid4().hex[:16]
        activity = SubagentActivity(agent_id, agent.name, description, tool_use_id, prompt, background)
        async with self.slots:
            return await self._run(agent, prompt, description, tool_use_id, cwd, allowed_tools, agent_id, activity)

    def _tell(self, kind: str, activity: SubagentActivity, item: Any = None) -> None:
        """Each listener sees the child's activity; one that fails is logged, never the child's end."""
        for listener in list(self.listeners):
            try:
                listener(kind, activity, item)
            except Exception:
                log.exception("a subagent listener failed")

    async def _run(
        self,
        agent: AgentDef,
        prompt: str,
        description: str,
        tool_use_id: str,
        cwd: Path | None,
        allowed_tools: list[str] | None,
        agent_id: str,
        activity: SubagentActivity,
    ) -> SubagentResult:
        started = time.monotonic()
        life = self.parent.services.get(LifecyclePoint)
        begin = await life.fire("SubagentStart", {"agent_id": agent_id, "agent_type": agent.name}, match=agent.name)
        extra = "\n\n".join(begin.context)
        child, writer, notes, own_hooks = self.build(
            agent, agent_id, cwd=cwd, allowed_tools=allowed_tools, system_extra=extra
        )
        meta = Meta(self.subagent_dir / f"agent-{agent_id}.meta.json")
        meta.write(
            agent_id=agent_id,
            agent_type=agent.name,
            description=description,
            parent_session_id=self.session_id,
            parent_tool_use_id=tool_use_id,
            depth=self.depth + 1,
            cwd=str(child.context.cwd),
            transcript=str(writer.path),
            status="running",
            pid=os.getpid(),
            started=time.time(),
        )
        self.running[agent_id] = child
        watcher = asyncio.ensure_future(_watch_stop(self.subagent_dir / f"agent-{agent_id}.stop", child))
        self.active += 1
        self.peak = max(self.peak, self.active)
        result: RunResult | None = None
        seen: list[RunResult] = []  # the child's last result, even when the parent is interrupted
        self._tell("started", activity)
        unsubscribe = child.bus.subscribe(lambda event: self._tell("event", activity, event))
        try:
            child.bus.emit(SessionStarted(session_id=agent_id, cwd=str(child.context.cwd), model=child.config.model))
            for note in notes:  # in the child's transcript, and shown to the user with the parent's
                child.bus.emit(Notice(level="warning", message=note))
                self.parent.bus.emit(Notice(level="warning", message=note))
            result = await self._drive(child, seen, prompt)
            stop_active = False
            for _ in range(MAX_STOP_CONTINUES):
                fields = {
                    "agent_id": agent_id,
                    "agent_type": agent.name,
                    "agent_transcript_path": str(writer.path),
                    "stop_hook_active": stop_active,
                    "last_assistant_message": result.result,
                }
                stop = await life.fire("SubagentStop", fields, match=agent.name)
                mine = await own_hooks.fire("SubagentStop", fields, match=agent.name)  # the definition's Stop
                if not (stop.blocked or mine.blocked) or result.subtype != "success":
                    break
                stop_active = True
                reason = "\n".join(r.reason for r in (stop, mine) if r.blocked and r.reason)
                result = await self._drive(child, seen, reason or "Continue.")
        finally:
            watcher.cancel()
            try:
                await asyncio.shield(own_hooks.close())
            except Exception:
                log.exception("closing the hooks of agent %s failed", agent_id)
            self.active -= 1
            self.running.pop(agent_id, None)
            last = result or (seen[-1] if seen else None)
            status = "cancelled" if last is None else last.subtype
            text = "" if last is None else last.result
            meta.update(status=status, finished=time.time(), result=text[: self.max_result_chars])
            writer.close()
            unsubscribe()
            if result is None:
                self._tell("finished", activity, None)
        done = SubagentResult(
            agent_id,
            agent.name,
            result.subtype,
            self._limit(result.result),
            writer.path,
            result.num_turns,
            result.total_cost_usd,
            int((time.monotonic() - started) * 1000),
        )
        self._tell("finished", activity, done)
        return done

    async def _drive(self, child: Agent, seen: list[RunResult], prompt: str) -> RunResult:
        task = asyncio.ensure_future(child.run(prompt))
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            child.interrupt()
            try:
                seen.append(await asyncio.wait_for(asyncio.shield(task), 10))
            except (TimeoutError, asyncio.CancelledError, Exception):
                log.warning("subagent did not stop within 10 s of an interrupt")
            raise
        seen.append(result)
        return result

    def _limit(self, text: str) -> str:
        if len(text) <= self.max_result_chars:
            return text
        cut = len(text) - self.max_result_chars
        return text[: self.max_result_chars] + f"\n[result truncated: {cut} more characters in the agent's transcript]"

    async def aclose(self) -> None:
        """Close the providers made for other models' definitions (the parent's is not ours)."""
        for provider in list(self.providers.values()):
            if provider is self.parent.provider:
                continue
            try:
                await provider.aclose()
            except Exception:
                log.exception("closing a subagent provider failed")
        self.providers.clear()

    def interrupt_all(self) -> None:
        for child in list(self.running.values()):
            child.interrupt()


async def _watch_stop(path: Path, child: Agent) -> None:
    """``keel agents stop ID`` (another process) leaves this file: interrupt the child."""
    while True:
        await asyncio.sleep(0.3)
        if path.exists():
            child.interrupt()
            return


def _mode_extension(mode: str | None, may_widen: bool) -> Extension | None:
    """A child's own permissionMode. ``plan`` narrows (only read-only tools, no Bash);
    ``dontAsk`` denies what would ask; ``acceptEdits``/``bypassPermissions`` widen (a plain ask
    is approved; deny rules and always-ask paths still hold) only for a trusted definition."""
    if mode == "plan":

        async def plan(call: ToolCall) -> Verdict | None:
            if call.tool is not None and call.tool.read_only and not call.tool.is_external:
                return None
            return Verdict("deny", f"{call.name} is not available to this agent (plan mode: read-only tools)", "agent")

        return Extension("agent-mode", before_tool=plan)
    if mode == "dontAsk":

        async def never(call: ToolCall, verdict: Verdict) -> Verdict:
            return Verdict("deny", f"{verdict.reason} (the agent's dontAsk mode denies what would ask)", "agent")

        return Extension("agent-mode", resolve_ask=never)
    if mode in ("acceptEdits", "bypassPermissions") and may_widen:

        async def widen(call: ToolCall) -> Verdict | None:
            edit = call.tool is not None and call.tool.group == "fs" and not call.tool.read_only
            if mode == "bypassPermissions" or edit:
                call.approved_by = f"agent definition (permissionMode {mode})"
            return None

        return Extension("agent-mode", before_tool=widen)
    return None


def child_system(agent: AgentDef, cwd: Path, model: str, extra: str = "") -> str:
    """The agent's prompt, then the session's environment note (without the git snapshot: a
    subagent is short-lived, and the parent knows the repository's state)."""
    env = environment_block(cwd, model, git=False)
    parts = [agent.prompt.strip() or f"You are the {agent.name} agent.", env]
    if extra.strip():
        parts.append(extra.strip())
    return "\n\n".join(parts)


class Meta:
    """``agent-<id>.meta.json``: the link to the parent and the state, replaced atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {}

    def write(self, **fields: Any) -> None:
        self.data = dict(fields)
        self._flush()

    def update(self, **fields: Any) -> None:
        self.data.update(fields)
        self._flush()

    def _flush(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(self.data, indent=1), encoding="utf-8")
            tmp.replace(self.path)
        except OSError:
            log.exception("cannot write %s", self.path)
