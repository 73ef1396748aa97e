"""The message list sent to the model, computed from the event log.

Pure functions over data: no files, no sockets. The log is never edited; a damaged log
(a crash between a tool_use and its tool_result, duplicated entries, orphan results,
two user messages in a row) yields a repaired *view* plus a list of what was repaired.

The same :class:`ViewBuilder` serves the live session (one event at a time, as the loop
appends them) and a resumed one (all events of the file), so the model sees the same bytes
either way: a resumed conversation keeps its prompt-cache prefix.

Compaction appends a :class:`Compaction` event (the log is never edited): the view from there on
starts with the event's messages (a summary, then the recent turns kept), and later events add to it.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from agentkeel.core.events import AssistantMessage, Event, ToolResults, UserMessage
from agentkeel.core.events import Compaction as Compaction  # declared with every persisted type
from agentkeel.core.types import ContentBlock, Message, ToolResultBlock, ToolUseBlock, replace

MISSING_RESULT = "[Tool result missing: the session stopped before this tool finished]"
INTERRUPTED_RESULT = "[Interrupted by user: the tool did not run to completion]"

ConversationEvent = UserMessage | AssistantMessage | ToolResults


class View(msgspec.Struct):
    messages: list[Message]
    repairs: list[str] = msgspec.field(default_factory=list)


class ViewBuilder:
    """Folds conversation events into a valid message list, incrementally.

    Guarantees of :meth:`messages`: no empty messages; roles alternate starting with user
    (consecutive messages of one role are merged, tool results first, in tool_use order);
    every tool_use is answered by exactly one tool_result in the next message; no tool_result
    without its tool_use; no tool_use id twice (a log where a later turn reused an earlier id,
    written before the loop made ids unique, gets ``<id>_2`` for the later use and its results,
    the same way on every replay). Adding an event costs the same at turn 200 as at turn 5.

    ``tool_ids`` is every tool_use id the session used, compaction or not: the loop gives a new
    call an id outside it, so the log never repeats one.
    """

    def __init__(self) -> None:
        self._out: list[Message] = []
        self._pending: list[ToolUseBlock] = []  # tool_uses of the last assistant message
        self._renamed: dict[str, str] = {}  # the last assistant message's repeated ids -> their new ids
        self._view_ids: set[str] = set()  # tool_use ids in the view (since the last compaction)
        self.tool_ids: set[str] = set()
        self._seen: set[str] = set()
        self.repairs: list[str] = []

    def add_event(self, event: Event) -> None:
        if isinstance(event, Compaction):
            self.reset(event.messages)
            return
        if not isinstance(event, ConversationEvent):
            return
        if event.uuid in self._seen:
            self.repairs.append(f"duplicate entry {event.uuid} skipped")
            return
        self._seen.add(event.uuid)
        self.add(event.message)

    def add(self, msg: Message) -> None:
        if msg.role == "assistant":
            self._add_assistant(list(msg.content))
        else:
            self._add_user(list(msg.content))

    def reset(self, messages: list[Message]) -> None:
        """Start the view over from ``messages`` (a compaction); what was folded so far is dropped."""
        self._out = []
        self._pending = []
        self._renamed = {}
        self._view_ids = set()
        for msg in messages:
            self.add(msg)

    def messages(self) -> list[Message]:
        """The view now. Tool uses still waiting for their results (a crash, or a read in the
        middle of a batch) are answered with a placeholder in the returned copy only."""
        out = list(self._out)
        missing = self._unanswered()
        if missing:
            filler: list[ContentBlock] = [_missing(u) for u in missing]
            if out[-1].role == "user":
                filler += out.pop().content
            out.append(Message(role="user", content=self._ordered(filler)))
        return out

    # --- the two roles -----------------------------------------------------------------

    def _add_assistant(self, raw: list[ContentBlock]) -> None:
        out = self._out
        ids: set[str] = set()
        renamed: dict[str, str] = {}
        blocks: list[ContentBlock] = []
        for b in raw:
            if isinstance(b, ToolUseBlock):
                if b.id in ids:  # providers reject a repeated id; its result could answer either
                    self.repairs.append(f"repeated tool_use id {b.id} dropped")
                    continue
                ids.add(b.id)
                if b.id in self._view_ids:  # an earlier turn's id: this use and its results get a new one
                    new_id, n = b.id, 1
                    while new_id in self.tool_ids or new_id in ids:
                        n += 1
                        new_id = f"{b.id}_{n}"
                    self.repairs.append(f"tool_use id {b.id} of an earlier turn used again: renamed {new_id}")
                    renamed[b.id] = new_id
                    ids.add(new_id)
                    b = replace(b, id=new_id)
            blocks.append(b)
        if not blocks:
            self.repairs.append("empty assistant message dropped")
            return
        if not out:
            self.repairs.append("leading assistant message dropped")
            return
        uses = [b.id for b in blocks if isinstance(b, ToolUseBlock)]
        self._view_ids.update(uses)
        self.tool_ids.update(uses)
        self._renamed = renamed
        if out[-1].role == "assistant" and not self._pending:
            out[-1] = Message(role="assistant", content=[*out[-1].content, *blocks])
            self._pending = [b for b in out[-1].content if isinstance(b, ToolUseBlock)]
            return
        self._close_turn()
        out.append(Message(role="assistant", content=blocks))
        self._pending = [b for b in blocks if isinstance(b, ToolUseBlock)]

    def _add_user(self, blocks: list[ContentBlock]) -> None:
        answered = {b.tool_use_id for b in self._current_results()}
        wanted = {u.id for u in self._pending}
        kept: list[ContentBlock] = []
        for b in blocks:
            if isinstance(b, ToolResultBlock):
                if b.tool_use_id in self._renamed:
                    b = replace(b, tool_use_id=self._renamed[b.tool_use_id])
                if b.tool_use_id not in wanted:
                    self.repairs.append(f"orphan tool_result {b.tool_use_id} dropped")
                    continue
                if b.tool_use_id in answered:
                    self.repairs.append(f"second tool_result for {b.tool_use_id} dropped")
                    continue
                answered.add(b.tool_use_id)
            kept.append(b)
        if not any(isinstance(b, ToolResultBlock) for b in kept) and kept:
            # the user speaks: the assistant's turn is over, whatever is still unanswered (a text
            # that comes with a tool result is about that result, as a hook's context is)
            kept = [*(self._missing_noted(u) for u in self._pending if u.id not in answered), *kept]
            self._pending = []
        if not kept:
            self.repairs.append("empty user message dropped")
            return
        out = self._out
        if out and out[-1].role == "user":
            kept = [*out.pop().content, *kept]
        out.append(Message(role="user", content=self._ordered(kept)))

    # --- helpers -------------------------------------------------------------------------

    def _close_turn(self) -> None:
        """Before the next assistant message: every pending tool_use gets its result."""
        missing = self._unanswered()
        self._pending = []
        if not missing:
            return
        filler: list[ContentBlock] = [self._missing_noted(u) for u in missing]
        if self._out[-1].role == "user":
            filler += self._out.pop().content
        self._out.append(Message(role="user", content=self._ordered(filler)))

    def _current_results(self) -> list[ToolResultBlock]:
        """Results already given for the pending tool_uses (in the user message after them)."""
        out = self._out
        if not self._pending or not out or out[-1].role != "user":
            return []
        return [b for b in out[-1].content if isinstance(b, ToolResultBlock)]

    def _unanswered(self) -> list[ToolUseBlock]:
        answered = {b.tool_use_id for b in self._current_results()}
        return [u for u in self._pending if u.id not in answered]

    def _missing_noted(self, use: ToolUseBlock) -> ToolResultBlock:
        self.repairs.append(f"missing tool_result for {use.name} {use.id} added")
        return _missing(use)

    def _ordered(self, blocks: list[ContentBlock]) -> list[ContentBlock]:
        """Tool results first, in the order of the tool_uses they answer (tools finish in any
        order), then everything else in its own order."""
        results = [b for b in blocks if isinstance(b, ToolResultBlock)]
        if len(results) > 1:
            order = {u.id: i for i, u in enumerate(self._last_uses())}
            results.sort(key=lambda b: order.get(b.tool_use_id, len(order)))
        return [*results, *(b for b in blocks if not isinstance(b, ToolResultBlock))]

    def _last_uses(self) -> list[ToolUseBlock]:
        for msg in reversed(self._out):
            if msg.role == "assistant":
                return [b for b in msg.content if isinstance(b, ToolUseBlock)]
        return []


def _missing(use: ToolUseBlock) -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=use.id, content=MISSING_RESULT, is_error=True)


def messages_from_events(events: Iterable[Event]) -> View:
    builder = ViewBuilder()
    for event in events:
        builder.add_event(event)
    messages = builder.messages()
    return View(messages=messages, repairs=builder.repairs)


def repair_messages(messages: list[Message], repairs: list[str] | None = None) -> View:
    """Make a message list valid for any provider (see :class:`ViewBuilder`)."""
    builder = ViewBuilder()
    if repairs is not None:
        builder.repairs = repairs
    for msg in messages:
        builder.add(msg)
    return View(messages=builder.messages(), repairs=builder.repairs)
