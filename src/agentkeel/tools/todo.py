"""TodoWrite: the model's task list for the session."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from agentkeel.core.events import TodosUpdated
from agentkeel.core.tools import Effects, Tool, ToolContext, ToolError, ToolOutput


class Todo(Struct, forbid_unknown_fields=True, kw_only=True):
    content: Annotated[str, Meta(min_length=1)]
    status: Literal["pending", "in_progress", "completed"]
    activeForm: str | None = None
    id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The todo as the model wrote it, unset optional fields left out."""
        return {k: v for k in self.__struct_fields__ if (v := getattr(self, k)) is not None}


class TodoWriteInput(Struct, forbid_unknown_fields=True, kw_only=True):
    todos: Annotated[list[Todo], Meta(description="The updated todo list")]


@dataclass
class TodoState:
    todos: list[dict[str, Any]] = field(default_factory=list)


async def _todo_write(args: TodoWriteInput, ctx: ToolContext) -> ToolOutput:
    if sum(t.status == "in_progress" for t in args.todos) > 1:
        raise ToolError("only one todo may be in_progress at a time")
    todos = [t.as_dict() for t in args.todos]
    ctx.services.get(TodoState).todos = todos
    ctx.emit(TodosUpdated(todos=todos))
    done = sum(t.status == "completed" for t in args.todos)
    return ToolOutput(
        f"Todos have been modified successfully ({done}/{len(todos)} completed). Keep using the todo list to "
        "track your progress, and proceed with the current task.",
        metadata={"count": len(todos), "completed": done},
    )


def todo_tools() -> list[Tool]:
    return [
        Tool(
            "TodoWrite",
            "Keep the session's task list, sent whole each time (pending, in_progress, completed; one "
            "in_progress at a time). Use it for work of three steps or more, marking each item done as soon as "
            "it is; not for a single simple step.",
            TodoWriteInput,
            _todo_write,
            group="custom",
            read_only=True,
            timeout_s=10,
            effects=Effects(protected=True),
        ),
    ]
