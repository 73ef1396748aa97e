"""Typed events and the bus that carries them.

Everything that happens in a session is an :class:`Event`. Events whose class sets
``persist = True`` are appended to the session log (the session file *is* that log);
the others (stream deltas, tool progress) exist only on the bus for live readers.
The message list sent to the model is a view computed from the persisted events
(:func:`agentkeel.core.view.messages_from_events`).
"""

from __future__ import annotations

import logging
import uuid as _uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentkeel.core.types import Message, Usage

log = logging.getLogger("agentkeel.events")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id() -> str:
    return str(_uuid.uuid4())


class Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    persist: ClassVar[bool] = True
    type: str
    uuid: str = Field(default_factory=new_id)
    timestamp: str = Field(default_factory=_now)


# --- session lifecycle -------------------------------------------------------------


class SessionStarted(Event):
    type: Literal["session_start"] = "session_start"
    session_id: str
    cwd: str
    model: str
    source: Literal["startup", "resume", "fork", "clear", "compact"] = "startup"
    version: str = ""


class SessionEnded(Event):
    type: Literal["session_end"] = "session_end"
    reason: str = "exit"


# --- conversation (these make up the model's view) ---------------------------------


class UserMessage(Event):
    type: Literal["user"] = "user"
    message: Message


class AssistantMessage(Event):
    type: Literal["assistant"] = "assistant"
    message: Message
    model: str = ""
    stop_reason: str | None = None
    usage: Usage = Usage()
    cost_usd: float = 0.0


class ToolResults(Event):
    """The user-role message carrying tool_result blocks for one assistant turn."""

    type: Literal["tool_results"] = "tool_results"
    message: Message


# --- model traffic -------------------------------------------------------------------


class RequestStarted(Event):
    type: Literal["request_start"] = "request_start"
    turn: int
    model: str
    message_count: int


class TextDelta(Event):
    persist: ClassVar[bool] = False
    type: Literal["text_delta"] = "text_delta"
    text: str


class ThinkingDelta(Event):
    persist: ClassVar[bool] = False
    type: Literal["thinking_delta"] = "thinking_delta"
    text: str


class StreamRetry(Event):
    """A request failed and will be retried; live readers drop any partial text."""

    type: Literal["stream_retry"] = "stream_retry"
    attempt: int
    delay_s: float
    error: str


# --- tools ---------------------------------------------------------------------------


class ToolStarted(Event):
    persist: ClassVar[bool] = False
    type: Literal["tool_start"] = "tool_start"
    tool_use_id: str
    name: str
    input: dict[str, Any]


class ToolFinished(Event):
    type: Literal["tool_end"] = "tool_end"
    tool_use_id: str
    name: str
    is_error: bool
    duration_ms: int
    summary: str = ""


class PermissionDecided(Event):
    type: Literal["permission"] = "permission"
    tool_use_id: str
    tool_name: str
    decision: Literal["allow", "deny", "ask"]
    reason: str = ""
    source: str = ""


class TodosUpdated(Event):
    type: Literal["todos"] = "todos"
    todos: list[dict[str, Any]]


# --- outcome and diagnostics ----------------------------------------------------------


class Notice(Event):
    type: Literal["notice"] = "notice"
    level: Literal["info", "warning", "error"] = "info"
    message: str


class Interrupted(Event):
    type: Literal["interrupted"] = "interrupted"
    during: Literal["request", "tools", "idle"]


class RunFinished(Event):
    type: Literal["result"] = "result"
    subtype: str
    is_error: bool
    result: str
    num_turns: int
    duration_ms: int
    usage: Usage
    total_cost_usd: float


EVENT_TYPES: dict[str, type[Event]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        SessionStarted,
        SessionEnded,
        UserMessage,
        AssistantMessage,
        ToolResults,
        RequestStarted,
        TextDelta,
        ThinkingDelta,
        StreamRetry,
        ToolStarted,
        ToolFinished,
        PermissionDecided,
        TodosUpdated,
        Notice,
        Interrupted,
        RunFinished,
    )
}


def event_from_dict(data: dict[str, Any]) -> Event | None:
    """Rebuild an event from its stored form; None for unknown or invalid entries."""
    cls = EVENT_TYPES.get(str(data.get("type")))
    if cls is None:
        return None
    try:
        return cls.model_validate(data)
    except ValueError:
        return None


Subscriber = Callable[[Event], None]


class EventBus:
    """Synchronous fan-out of events to subscribers.

    A subscriber that raises is logged and skipped: a broken reader (a UI, memory
    capture) never stops the session. Subscribers that need to do slow work queue it.
    """

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        self._subscribers.append(fn)

        def unsubscribe() -> None:
            if fn in self._subscribers:
                self._subscribers.remove(fn)

        return unsubscribe

    def emit(self, event: Event) -> None:
        for fn in tuple(self._subscribers):
            try:
                fn(event)
            except Exception:
                log.exception("event subscriber %r failed on %s", fn, event.type)
