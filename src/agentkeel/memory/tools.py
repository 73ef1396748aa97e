"""Memory tools for the model: MemorySearch (layer 1), MemoryTimeline (layer 2), MemoryGet (layer 3)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentkeel.core.tools import Tool, ToolContext, ToolOutput
from agentkeel.memory.health import MemoryDamaged
from agentkeel.memory.store import MemoryStore
from agentkeel.tools.schemas import with_shipped_schemas


class SearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    query: str = Field(min_length=1, description="What to look for, in plain words")
    limit: int = Field(10, ge=1, le=50)
    type: str | None = Field(
        None, description="user_prompt, assistant_response, tool_observation, session_summary, lesson or fact"
    )
    all_projects: bool = Field(False, description="Search every project, not only this one")
    file: str | None = Field(None, description="Only entries about this file path")


class TimelineInput(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    id: str = Field(min_length=1, description="A memory id from MemorySearch")
    before: int = Field(3, ge=0, le=20)
    after: int = Field(3, ge=0, le=20)


class GetInput(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    ids: list[str] = Field(min_length=1, max_length=20, description="Memory ids from MemorySearch or MemoryTimeline")


def memory_tools(
    store: Callable[[], MemoryStore],
    project: str,
    budget_tokens: int = 2000,
    *,
    shipped: bool = True,
    on_damage: Callable[[MemoryDamaged], None] | None = None,
) -> list[Tool]:
    """The three tools over a store (opened on first use by ``store``).

    A damaged store answers every call with an error that names the file and the fix, and
    ``on_damage`` hears of it (the session turns memory off and tells the user)."""

    def guarded(fn: Callable[[Any, ToolContext], Awaitable[ToolOutput]]) -> Callable[..., Awaitable[ToolOutput]]:
        async def run(args: Any, ctx: ToolContext) -> ToolOutput:
            try:
                return await fn(args, ctx)
            except MemoryDamaged as exc:
                if on_damage is not None:
                    on_damage(exc)
                return ToolOutput(f"Memory is unavailable: {exc}", is_error=True)

        return run

    async def search(args: SearchInput, ctx: ToolContext) -> ToolOutput:
        hits = await asyncio.to_thread(
            lambda: store().search(
                args.query,
                k=args.limit,
                budget_tokens=budget_tokens,
                project=None if args.all_projects else project,
                type=args.type,
                file=args.file,
            )
        )
        if not hits:
            return ToolOutput("No memories match. Try other words, or all_projects=true.")
        lines = [h.line() for h in hits]
        return ToolOutput(
            "\n".join(lines) + "\n\nUse MemoryTimeline(id) for what happened around one, MemoryGet(ids) for full text.",
            metadata={"count": len(hits)},
        )

    async def timeline(args: TimelineInput, ctx: ToolContext) -> ToolOutput:
        hits = await asyncio.to_thread(lambda: store().timeline(args.id, args.before, args.after, budget_tokens))
        if not hits:
            return ToolOutput(f"No memory with id {args.id}.", is_error=True)
        return ToolOutput("\n".join(("→ " if h.id == args.id else "  ") + h.line() for h in hits))

    async def get(args: GetInput, ctx: ToolContext) -> ToolOutput:
        entries = await asyncio.to_thread(lambda: store().get(args.ids, budget_tokens * 2))
        if not entries:
            return ToolOutput("No memories with those ids.", is_error=True)
        blocks = [f"[{e.id}] {e.timestamp} {e.type} (session {e.session or '-'})\n{e.text}" for e in entries]
        return ToolOutput("\n\n".join(blocks))

    common = {"group": "custom", "read_only": True, "timeout_s": 30.0}
    tools = [
        Tool(
            "MemorySearch",
            "Search keel's memory of earlier sessions in this project (prompts, answers, tool results, "
            "summaries, lessons, facts). Returns ids with one-line summaries.",
            SearchInput,
            guarded(search),
            **common,  # type: ignore[arg-type]
        ),
        Tool(
            "MemoryTimeline",
            "Show what happened just before and after a memory id, in its session.",
            TimelineInput,
            guarded(timeline),
            **common,  # type: ignore[arg-type]
        ),
        Tool("MemoryGet", "Read memories in full by id.", GetInput, guarded(get), **common),  # type: ignore[arg-type]
    ]
    return with_shipped_schemas(tools) if shipped else tools
