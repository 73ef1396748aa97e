"""keel's events as ACP ``session/update`` payloads. Pure: no connection, no session, no I/O
beyond reading a file an edit is about to change (for its diff).

A tool call is shown from what the tool declares (its ``Effects``), never from its name: a call
that runs a command is ``execute``, one that writes files ``edit`` (with a diff), one that walks a
tree ``search``, one that reads ``read``, one that fetches ``fetch``, one that runs a subagent
``think``. Its title is the command, or the tool and the path it names.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import schema

from agentkeel.core.events import AssistantMessage, Event, TodosUpdated, ToolResults, UserMessage
from agentkeel.core.tools import Effects
from agentkeel.core.types import ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

if TYPE_CHECKING:
    from acp.schema import ToolKind

Update = (
    schema.UserMessageChunk
    | schema.AgentMessageChunk
    | schema.AgentThoughtChunk
    | schema.ToolCallStart
    | schema.ToolCallProgress
    | schema.AgentPlanUpdate
    | schema.AvailableCommandsUpdate
    | schema.CurrentModeUpdate
)
ToolContent = schema.ContentToolCallContent | schema.FileEditToolCallContent | schema.TerminalToolCallContent

MAX_RESULT_CHARS = 20_000  # what a tool_call_update carries of a result (the model got all of it)


def text_chunk(text: str) -> schema.AgentMessageChunk:
    return schema.AgentMessageChunk(session_update="agent_message_chunk", content=_text(text))


def thought_chunk(text: str) -> schema.AgentThoughtChunk:
    return schema.AgentThoughtChunk(session_update="agent_thought_chunk", content=_text(text))


def user_chunk(text: str) -> schema.UserMessageChunk:
    return schema.UserMessageChunk(session_update="user_message_chunk", content=_text(text))


def _text(text: str) -> schema.TextContentBlock:
    return schema.TextContentBlock(type="text", text=text)


# --- tool calls -------------------------------------------------------------------------------


def kind_of(effects: Effects) -> ToolKind:
    if effects.shell:
        return "execute"
    if effects.writes:
        return "edit"
    if effects.fetches:
        return "fetch"
    if effects.lists:
        return "search"
    if effects.reads:
        return "read"
    if effects.delegates:
        return "think"
    return "other"


def _resolve(raw: str, cwd: Path) -> Path:
    path = Path(raw).expanduser()
    return path if path.is_absolute() else cwd / path


def paths_of(effects: Effects, tool_input: dict[str, Any], cwd: Path) -> list[Path]:
    return [_resolve(v, cwd) for f in effects.path_fields if isinstance(v := tool_input.get(f), str) and v]


def title_of(name: str, effects: Effects, tool_input: dict[str, Any], cwd: Path) -> str:
    command = tool_input.get("command")
    if effects.shell and isinstance(command, str):
        first = command.strip().splitlines()[0] if command.strip() else command
        return first if len(first) <= 120 else first[:119] + "…"
    paths = paths_of(effects, tool_input, cwd)
    if paths:
        try:
            shown = str(paths[0].relative_to(cwd))
        except ValueError:
            shown = str(paths[0])
        return f"{name} {shown}"
    for field in ("pattern", "url", "query", "description"):
        value = tool_input.get(field)
        if isinstance(value, str) and value:
            return f"{name} {value[:100]}"
    return name


def locations_of(effects: Effects, tool_input: dict[str, Any], cwd: Path) -> list[schema.ToolCallLocation]:
    line = tool_input.get("offset")
    line = line if isinstance(line, int) and not isinstance(line, bool) and line >= 0 else None
    return [schema.ToolCallLocation(path=str(p), line=line) for p in paths_of(effects, tool_input, cwd)]


def tool_call_start(use: ToolUseBlock, effects: Effects, cwd: Path) -> schema.ToolCallStart:
    return schema.ToolCallStart(
        session_update="tool_call",
        tool_call_id=use.id,
        title=title_of(use.name, effects, use.input, cwd),
        kind=kind_of(effects),
        status="pending",
        locations=locations_of(effects, use.input, cwd) or None,
        raw_input=dict(use.input),
    )


def diff_content(path: str, before: str | None, after: str) -> schema.FileEditToolCallContent:
    return schema.FileEditToolCallContent(type="diff", path=path, old_text=before, new_text=after)


def text_content(text: str) -> schema.ContentToolCallContent:
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n… {len(text) - MAX_RESULT_CHARS} more characters"
    return schema.ContentToolCallContent(type="content", content=_text(text))


def tool_call_progress(
    tool_call_id: str, status: schema.ToolCallStatus, content: list[ToolContent] | None = None, raw_output: Any = None
) -> schema.ToolCallProgress:
    return schema.ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=tool_call_id,
        status=status,
        content=content,
        raw_output=raw_output,
    )


def result_update(block: ToolResultBlock, diff: schema.FileEditToolCallContent | None) -> schema.ToolCallProgress:
    """A call's end: its status and what it gave (the diff an edit made, else its result's text)."""
    text = block.text()
    content: list[ToolContent] = []
    if diff is not None and not block.is_error:
        content.append(diff)
    elif text:
        content.append(text_content(text))
    return tool_call_progress(block.tool_use_id, "failed" if block.is_error else "completed", content or None)


# --- plans and commands -------------------------------------------------------------------------


def plan_update(event: TodosUpdated) -> schema.AgentPlanUpdate:
    entries = []
    for todo in event.todos:
        status = todo.get("status")
        entries.append(
            schema.PlanEntry(
                content=str(todo.get("content", "")),
                priority="medium",
                status=status if status in ("pending", "in_progress", "completed") else "pending",
            )
        )
    return schema.AgentPlanUpdate(session_update="plan", entries=entries)


def commands_update(completions: list[dict[str, str]]) -> schema.AvailableCommandsUpdate:
    """The session's slash commands (the one command registry), names without their slash."""
    commands = [
        schema.AvailableCommand(
            name=c["name"].lstrip("/"),
            description=c.get("description") or c["name"],
            input=schema.AvailableCommandInput(root=schema.UnstructuredCommandInput(hint=c["argument_hint"]))
            if c.get("argument_hint")
            else None,
        )
        for c in completions
    ]
    return schema.AvailableCommandsUpdate(session_update="available_commands_update", available_commands=commands)


def mode_update(mode: str) -> schema.CurrentModeUpdate:
    return schema.CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode)


# --- a saved session, replayed ------------------------------------------------------------------


def replay(events: list[Event], effects_for: Any, cwd: Path) -> list[Update]:
    """A loaded session's conversation as the updates a client would have seen live: the user's
    messages, the model's text and thinking, each tool call and its result, the plan."""
    out: list[Update] = []
    for event in events:
        if isinstance(event, UserMessage):
            for block in event.message.content:
                if isinstance(block, TextBlock) and block.text:
                    out.append(user_chunk(block.text))
                elif isinstance(block, ImageBlock):
                    out.append(
                        schema.UserMessageChunk(
                            session_update="user_message_chunk",
                            content=schema.ImageContentBlock(type="image", data=block.data, mime_type=block.media_type),
                        )
                    )
        elif isinstance(event, AssistantMessage):
            for block in event.message.content:
                if isinstance(block, ThinkingBlock) and block.thinking:
                    out.append(thought_chunk(block.thinking))
                elif isinstance(block, TextBlock) and block.text:
                    out.append(text_chunk(block.text))
                elif isinstance(block, ToolUseBlock):
                    out.append(tool_call_start(block, effects_for(block.name), cwd))
        elif isinstance(event, ToolResults):
            for block in event.message.content:
                if isinstance(block, ToolResultBlock):
                    out.append(result_update(block, None))
        elif isinstance(event, TodosUpdated):
            out.append(plan_update(event))
    return out
