"""The message list sent to the model, computed from the event log.

Pure functions over data: no files, no sockets. The log is never edited; a damaged log
(a crash between a tool_use and its tool_result, duplicated entries, orphan results)
yields a repaired *view* plus a list of what was repaired.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from agentkeel.core.events import AssistantMessage, Event, ToolResults, UserMessage
from agentkeel.core.types import ContentBlock, Message, ToolResultBlock, ToolUseBlock

MISSING_RESULT = "[Tool result missing: the session stopped before this tool finished]"
INTERRUPTED_RESULT = "[Interrupted by user: the tool did not run to completion]"


@dataclass
class View:
    messages: list[Message]
    repairs: list[str] = field(default_factory=list)


def messages_from_events(events: Iterable[Event]) -> View:
    raw: list[Message] = []
    seen: set[str] = set()
    repairs: list[str] = []
    for event in events:
        if not isinstance(event, UserMessage | AssistantMessage | ToolResults):
            continue
        if event.uuid in seen:
            repairs.append(f"duplicate entry {event.uuid} skipped")
            continue
        seen.add(event.uuid)
        raw.append(event.message)
    return repair_messages(raw, repairs)


def repair_messages(messages: list[Message], repairs: list[str] | None = None) -> View:
    """Make a message list valid for any provider.

    Guarantees: no empty messages; roles alternate starting with user; every tool_use
    is answered by exactly one tool_result in the next message; no tool_result without
    its tool_use.
    """
    repairs = repairs if repairs is not None else []
    out: list[Message] = []
    pending: list[ToolUseBlock] = []  # tool_uses of the last assistant message

    def close_pending(next_blocks: list[ContentBlock]) -> list[ContentBlock]:
        """Return next_blocks with results for pending tool_uses first, orphans dropped."""
        results = {b.tool_use_id: b for b in next_blocks if isinstance(b, ToolResultBlock)}
        others = [b for b in next_blocks if not isinstance(b, ToolResultBlock)]
        wanted = {u.id for u in pending}
        for rid in results:
            if rid not in wanted:
                repairs.append(f"orphan tool_result {rid} dropped")
        fixed: list[ContentBlock] = []
        for use in pending:
            if use.id in results:
                fixed.append(results[use.id])
            else:
                repairs.append(f"missing tool_result for {use.name} {use.id} added")
                fixed.append(ToolResultBlock(tool_use_id=use.id, content=MISSING_RESULT, is_error=True))
        return fixed + others

    for msg in messages:
        blocks = list(msg.content)
        if msg.role == "user":
            blocks = close_pending(blocks)
            pending = []
        else:
            if pending:
                out.append(Message(role="user", content=close_pending([])))
                pending = []
            pending = [b for b in blocks if isinstance(b, ToolUseBlock)]
        if not blocks:
            repairs.append(f"empty {msg.role} message dropped")
            continue
        if out and out[-1].role == msg.role:
            prev = out.pop()
            merged: list[ContentBlock]
            if msg.role == "user":
                # tool results must lead a user message
                merged = [b for b in prev.content if isinstance(b, ToolResultBlock)]
                merged += [b for b in blocks if isinstance(b, ToolResultBlock)]
                merged += [b for b in prev.content if not isinstance(b, ToolResultBlock)]
                merged += [b for b in blocks if not isinstance(b, ToolResultBlock)]
            else:
                merged = [*prev.content, *blocks]
                pending = [b for b in merged if isinstance(b, ToolUseBlock)]
            out.append(Message(role=msg.role, content=merged))
            continue
        if not out and msg.role == "assistant":
            repairs.append("leading assistant message dropped")
            pending = []
            continue
        out.append(Message(role=msg.role, content=blocks))
    if pending:
        out.append(Message(role="user", content=close_pending([])))
    return View(messages=out, repairs=repairs)
