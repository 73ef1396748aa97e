"""Memory tools for the model: MemorySearch (layer 1), MemoryTimeline (layer 2), MemoryGet (layer 3)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentkeel.core.tools import Tool, ToolContext, ToolOutput
from agentkeel.memory.health import MemoryDamaged
from agentkeel.memory.store import MemoryStore
from agentkeel.memory.toolnames import GET, SEARCH, TIMELINE
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


CROSS_PROJECT_OFF = (
    "Other projects' memories are not readable from here: the user has not allowed it."
    ' To allow it, the user sets "memory": {"crossProject": true} in ~/.keel/settings.json.'
)


def memory_tools(
    store: Callable[[], MemoryStore],
    project: str,
    budget_tokens: int = 2000,
    *,
    shipped: bool = True,
    on_damage: Callable[[MemoryDamaged], None] | None = None,
    cross_project: bool = False,
) -> list[Tool]:
    """The three tools over a store (opened on first use by ``store``).

    A damaged store answers every call with an error that names the file and the fix, and
    ``on_damage`` hears of it (the session turns memory off and tells the user).

    Other projects' memories are the user's to share: unless ``cross_project`` (the user's
    ``memory.crossProject`` setting), a search of every project is refused and an id of another
    project's entry reads as not found here, with the setting named (a prompt injection in one
    folder must not read what the user did in another)."""

    def guarded(fn: Callable[[Any, ToolContext], Awaitable[ToolOutput]]) -> Callable[..., Awaitable[ToolOutput]]:
        async def run(args: Any, ctx: ToolContext) -> ToolOutput:
            try:
                return await fn(args, ctx)
            except MemoryDamaged as exc:
                if on_damage is not None:
                    on_damage(exc)
                return ToolOutput(f"Memory is unavailable: {exc}", is_error=True)

        return run

    def own(ids: list[str], projects: dict[str, str]) -> tuple[list[str], int]:
        """The ids this session may read, and how many belong to another project."""
        if cross_project:
            return ids, 0
        kept = [i for i in ids if projects.get(i, project) == project]
        return kept, len(ids) - len(kept)

    async def search(args: SearchInput, ctx: ToolContext) -> ToolOutput:
        if args.all_projects and not cross_project:
            return ToolOutput(CROSS_PROJECT_OFF, is_error=True)
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
        if hits and not cross_project and any(h.project != project for h in hits):
            return ToolOutput(f"Memory {args.id} belongs to another project. {CROSS_PROJECT_OFF}", is_error=True)
        if not hits:
            return ToolOutput(f"No memory with id {args.id}.", is_error=True)
        return ToolOutput("\n".join(("→ " if h.id == args.id else "  ") + h.line() for h in hits))

    async def get(args: GetInput, ctx: ToolContext) -> ToolOutput:
        def read() -> tuple[list[Any], int]:
            found = store()
            ids, hidden = args.ids, 0
            if not cross_project:  # which project each id is in; another project's text goes no further
                ids, hidden = own(ids, {e.id: e.project for e in found.get(args.ids)})
            return (found.get(ids, budget_tokens * 2) if ids else []), hidden

        entries, hidden = await asyncio.to_thread(read)
        elsewhere = f"{hidden} of those ids belong to another project. {CROSS_PROJECT_OFF}" if hidden else ""
        if not entries:
            return ToolOutput(elsewhere or "No memories with those ids.", is_error=True)
        blocks = [f"[{e.id}] {e.timestamp} {e.type} (session {e.session or '-'})\n{e.text}" for e in entries]
        return ToolOutput("\n\n".join(blocks + ([elsewhere] if elsewhere else [])))

    common = {"group": "custom", "read_only": True, "timeout_s": 30.0}
    tools = [
        Tool(
            SEARCH,
            "Search keel's memory of earlier sessions in this project (prompts, answers, tool results, "
            "summaries, lessons, facts). Returns ids with one-line summaries.",
            SearchInput,
            guarded(search),
            **common,  # type: ignore[arg-type]
        ),
        Tool(
            TIMELINE,
            "Show what happened just before and after a memory id, in its session.",
            TimelineInput,
            guarded(timeline),
            **common,  # type: ignore[arg-type]
        ),
        Tool(GET, "Read memories in full by id.", GetInput, guarded(get), **common),  # type: ignore[arg-type]
    ]
    return with_shipped_schemas(tools) if shipped else tools
