"""The Task tool (Claude Code's name and input shape; ``Agent`` is the newer name, an alias)."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from agentkeel.agents.defs import AgentCatalog
from agentkeel.agents.spawner import SubagentSpawner
from agentkeel.core.tools import Tool, ToolContext, ToolError, ToolOutput
from agentkeel.models.caching import session_part
from agentkeel.tools import AGENT, AGENT_TOOLS, ELSEWHERE

SUBAGENT_EFFECTS = ELSEWHERE[AGENT]  # Task rules govern it; its result is the subagent's report

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "description": {"type": "string", "description": "A short (3-5 word) description of the task"},
        "prompt": {"type": "string", "description": "The task for the agent to perform"},
        "subagent_type": {"type": "string", "description": "The type of specialized agent to use for this task"},
        "model": {
            "type": "string",
            "description": "Optional model for this agent (sonnet, opus, haiku); the definition's or the caller's "
            "model otherwise",
        },
        "run_in_background": {
            "type": "boolean",
            "description": "Run the agent in the background; its result is delivered when it finishes",
        },
    },
    "required": ["description", "prompt", "subagent_type"],
    "additionalProperties": False,
}

TASK_INTRO = """Launch a new agent to handle complex, multi-step tasks autonomously.

The agent runs with its own context and tools and returns one final report, which is not shown to the user:
summarise it for them. Launch several agents concurrently when the tasks are independent: put several Task
calls in one message. Each invocation is stateless: give the agent a complete, detailed task description and say
exactly what it should return. The agent types are listed in the session context.

Available agent types and the tools they have access to:
"""


def task_description(catalog: AgentCatalog) -> str:
    """The intro, then the agent types (by name, ignoring case, built-in ones among them: Claude Code
    2.1.328's order) as a session part: sent after the prefix every session of the project shares, so
    that editing an agent definition does not change it (models/caching.py)."""
    intro, _, head = TASK_INTRO.rstrip("\n").rpartition("\n\n")
    agents = sorted(catalog, key=lambda a: a.name.lower())
    return intro + session_part(head + "\n" + "\n".join(a.summary() for a in agents))


async def _run_task(args: Any, ctx: ToolContext) -> ToolOutput:
    spawner = ctx.services.find(SubagentSpawner)
    if spawner is None:
        raise ToolError("subagents are not available here (the nesting limit is reached)")
    agent = spawner.catalog.get(args.subagent_type)
    if agent is None:
        known = ", ".join(spawner.catalog.names())
        raise ToolError(f"Agent type '{args.subagent_type}' not found. Available agents: {known}")
    if args.model:
        agent = replace(agent, model=args.model)
    if args.run_in_background:
        from agentkeel.agents.background import start_background

        agent_id = start_background(
            spawner, agent, args.prompt, description=args.description, tool_use_id=ctx.tool_use_id
        )
        return ToolOutput(
            f"Agent {agent_id} ({agent.name}) started in the background. Its result is delivered when it finishes; "
            f"`keel agents logs {agent_id}` shows it.",
            metadata={"agent_id": agent_id, "background": True},
        )
    if agent.isolation == "worktree":
        from agentkeel.agents.worktree import WorktreeError, run_in_worktree

        try:
            result, _ = await run_in_worktree(
                spawner, agent, args.prompt, description=args.description, tool_use_id=ctx.tool_use_id
            )
        except WorktreeError as e:
            raise ToolError(f"agent {agent.name} needs a git worktree: {e}") from None
    else:
        result = await spawner.run(agent, args.prompt, description=args.description, tool_use_id=ctx.tool_use_id)
    meta = {
        "agent_id": result.agent_id,
        "agent_type": result.agent_type,
        "transcript": str(result.transcript),
        "subtype": result.subtype,
        "num_turns": result.num_turns,
    }
    if result.is_error:
        return ToolOutput(
            f"Agent {result.agent_id} ({result.agent_type}) ended with {result.subtype}: {result.text}",
            is_error=True,
            metadata=meta,
        )
    text = result.text or "(the agent finished without a report)"
    return ToolOutput(f"{text}\n\nagentId: {result.agent_id}", metadata=meta)


def _load(name: str, description: str) -> Tool:
    from agentkeel.agents.inputs import TaskInput

    return Tool(
        name,
        description,
        TaskInput,
        _run_task,
        group="agents",
        read_only=True,
        concurrency_safe=True,
        timeout_s=24 * 3600,
        raw_schema=TASK_SCHEMA,
        effects=SUBAGENT_EFFECTS,
    )


def task_tools(catalog: AgentCatalog) -> list[Tool]:
    """``Task`` and its alias ``Agent``: stand-ins that import pydantic at the first call."""
    description = task_description(catalog)
    out = []
    for name in AGENT_TOOLS:
        real: list[Tool] = []

        def load(name: str = name, real: list[Tool] = real) -> Tool:
            if not real:
                real.append(_load(name, description))
            return real[0]

        out.append(
            Tool(
                name,
                description,
                None,
                _run_task,
                group="agents",
                read_only=True,
                concurrency_safe=True,
                timeout_s=24 * 3600,
                raw_schema=TASK_SCHEMA,
                load=load,
                effects=SUBAGENT_EFFECTS,
            )
        )
    return out
