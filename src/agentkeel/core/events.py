"""Typed events and the bus that carries them.

Everything that happens in a session is an :class:`Event`. Events whose class sets
``persist = True`` are appended to the session log (the session file *is* that log);
the others (stream deltas, tool progress) exist only on the bus for live readers.
The message list sent to the model is a view computed from the persisted events
(:func:`agentkeel.core.view.messages_from_events`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

import msgspec

from agentkeel.core.types import Message, Usage, to_data

log = logging.getLogger("agentkeel.events")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id() -> str:
    """A random (version 4) UUID, written as ``str(uuid.uuid4())`` writes it, without building the
    ``UUID`` object (a third of the time; every event takes one)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    x = raw.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """A typed event; subclasses name their stored type with ``tag="..."``."""

    persist: ClassVar[bool] = True
    uuid: str = msgspec.field(default_factory=new_id)
    timestamp: str = msgspec.field(default_factory=_now)

    @property
    def type(self) -> str:
        return str(self.__struct_config__.tag)


# --- session lifecycle -------------------------------------------------------------


class SessionStarted(Event, frozen=True, kw_only=True, tag="session_start"):
    session_id: str
    cwd: str
    model: str
    source: Literal["startup", "resume", "fork", "clear", "compact"] = "startup"
    version: str = ""


class SessionEnded(Event, frozen=True, kw_only=True, tag="session_end"):
    reason: str = "exit"


# --- conversation (these make up the model's view) ---------------------------------


class UserMessage(Event, frozen=True, kw_only=True, tag="user"):
    message: Message


class AssistantMessage(Event, frozen=True, kw_only=True, tag="assistant"):
    message: Message
    model: str = ""
    stop_reason: str | None = None
    usage: Usage = Usage()
    cost_usd: float = 0.0


class ToolResults(Event, frozen=True, kw_only=True, tag="tool_results"):
    """A user-role message carrying tool_result blocks. The loop appends one per finished tool,
    as it finishes, so a crash mid-batch loses no finished result; the view merges them."""

    message: Message


# --- model traffic -------------------------------------------------------------------


class RequestStarted(Event, frozen=True, kw_only=True, tag="request_start"):
    turn: int
    model: str
    message_count: int


class TextDelta(Event, frozen=True, kw_only=True, tag="text_delta"):
    persist: ClassVar[bool] = False
    text: str


class ThinkingDelta(Event, frozen=True, kw_only=True, tag="thinking_delta"):
    persist: ClassVar[bool] = False
    text: str


class StreamRetry(Event, frozen=True, kw_only=True, tag="stream_retry"):
    """A request failed and will be retried; live readers drop any partial text."""

    attempt: int
    delay_s: float
    error: str


# --- tools ---------------------------------------------------------------------------


class ToolStarted(Event, frozen=True, kw_only=True, tag="tool_start"):
    persist: ClassVar[bool] = False
    tool_use_id: str
    name: str
    input: dict[str, Any]


class ToolFinished(Event, frozen=True, kw_only=True, tag="tool_end"):
    """A tool call is done. ``metadata`` is the tool's own facts (exit code, paths, match counts,
    timed_out...) after the result guard's public filter: what capture, hooks and UIs read."""

    tool_use_id: str
    name: str
    is_error: bool
    duration_ms: int
    summary: str = ""
    input: dict[str, Any] = msgspec.field(default_factory=dict)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class CwdChanged(Event, frozen=True, kw_only=True, tag="cwd_changed"):
    """The shell's working directory moved (a ``cd`` in a Bash call)."""

    old_cwd: str
    new_cwd: str


class PermissionDecided(Event, frozen=True, kw_only=True, tag="permission"):
    tool_use_id: str
    tool_name: str
    decision: Literal["allow", "deny", "ask"]
    reason: str = ""
    source: str = ""


class TodosUpdated(Event, frozen=True, kw_only=True, tag="todos"):
    todos: list[dict[str, Any]]


# --- outcome and diagnostics ----------------------------------------------------------


class Notice(Event, frozen=True, kw_only=True, tag="notice"):
    level: Literal["info", "warning", "error"] = "info"
    message: str


class Interrupted(Event, frozen=True, kw_only=True, tag="interrupted"):
    during: Literal["request", "tools", "idle"]


class RunFinished(Event, frozen=True, kw_only=True, tag="result"):
    subtype: str
    is_error: bool
    result: str
    num_turns: int
    duration_ms: int
    usage: Usage
    total_cost_usd: float


class OpaqueEvent(Event, frozen=True, kw_only=True, tag="opaque"):
    """A persisted entry of a type this version does not know (written by a newer keel or a
    plugin not loaded now). Kept as read, so the session loads; the view ignores it."""

    data: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def type(self) -> str:
        return str(self.data.get("type", "opaque"))


# --- what the rest of keel logs (declared here, so that a loaded entry's type never depends on
# which modules a process happened to import) ------------------------------------------


class Compaction(Event, frozen=True, kw_only=True, tag="compaction"):
    """The conversation was compacted: from here on the view starts with ``messages``.

    ``trigger``: auto | manual | overflow (the provider refused a request as too long);
    ``stage``: what produced the messages (summary, chunked, truncate, clear-tool-results);
    ``state``: the working state carried over (current task, files, decisions, todos, facts)."""

    messages: list[Message]
    trigger: str = "auto"
    strategy: str = ""
    stage: str = ""
    tokens_before: int = 0
    tokens_after: int = 0
    summary: str = ""
    state: dict[str, Any] = msgspec.field(default_factory=dict)


class HookRan(Event, frozen=True, kw_only=True, tag="hook"):
    """The handlers one hook event ran (SPEC 0: hook runs are events of the session). One event per
    firing, not per handler: fifty handlers on a tool call are two log lines, not a hundred."""

    event: str
    runs: list[dict[str, Any]]


class CoordinatorProgress(Event, frozen=True, kw_only=True, tag="coordinator"):
    """A step of the coordinator's plan (agents/coordinator.py)."""

    task_id: str  # "" for the plan itself
    status: str  # planned | started | finished | failed | skipped | merged | done
    detail: str = ""


class Checkpoint(Event, frozen=True, kw_only=True, tag="checkpoint"):
    """Paths a tool call (or a rewind, ``source="rewind"``) changed, with their content before it:
    the sha256 of a stored object, ``None`` when the file did not exist, ``""`` when not recorded,
    ``link:<target>`` for a symbolic link; ``after`` is each path's state when keel left it (a
    rewind refuses to overwrite a file that no longer holds it; absent in older logs: unknown)."""

    tool_use_id: str = ""
    tool: str = ""
    source: str = "tool"  # tool | rewind
    files: dict[str, str | None] = msgspec.field(default_factory=dict)
    after: dict[str, str | None] = msgspec.field(default_factory=dict)


class RewindIntent(Event, frozen=True, kw_only=True, tag="rewind_intent"):
    """A code rewind's journal entry, logged before any file is touched: each path's target state
    and its state just before (stored, so the rewind can be rolled back). A ``rewind_done`` with
    the same ``rewind_id`` closes it; one without is completed or rolled back at the next start."""

    rewind_id: str
    turn_index: int = 0
    target_uuid: str = ""
    mode: str = "code"
    targets: dict[str, str | None] = msgspec.field(default_factory=dict)
    prior: dict[str, str | None] = msgspec.field(default_factory=dict)


class RewindDone(Event, frozen=True, kw_only=True, tag="rewind_done"):
    """A journaled rewind is over: ``completed`` (the files are at their targets) or
    ``rolled_back`` (as before it); ``recovered`` when a later start finished it after a crash."""

    rewind_id: str
    outcome: str = "completed"  # completed | rolled_back
    recovered: bool = False
    problems: list[str] = msgspec.field(default_factory=list)


class RewindMarker(Compaction, frozen=True, kw_only=True, tag="rewind"):
    """The conversation was rewound to just before user turn ``turn_index`` (the prompt event
    ``target_uuid``): the view starts over from ``messages``, the conversation before that turn."""

    turn_index: int = 0
    target_uuid: str = ""
    mode: str = "both"


class SessionForked(Event, frozen=True, kw_only=True, tag="fork"):
    """This session was forked from ``parent_id`` before its user turn ``at_turn`` (None: at its end)."""

    parent_id: str
    parent_path: str = ""
    at_turn: int | None = None


# every persisted type keel writes, by its stored ``type``: the one table the loader reads
EVENT_TYPES: dict[str, type[Event]] = {
    str(cls.__struct_config__.tag): cls
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
        CwdChanged,
        PermissionDecided,
        TodosUpdated,
        Notice,
        Interrupted,
        RunFinished,
        Compaction,
        HookRan,
        CoordinatorProgress,
        Checkpoint,
        RewindIntent,
        RewindDone,
        RewindMarker,
        SessionForked,
    )
}


def register_event_type(cls: type[Event]) -> type[Event]:
    """Make a program's own persisted event type known (an SDK embedder's; keel's own types are
    all in :data:`EVENT_TYPES` above, so no keel module registers one). The program registers
    before it loads a log that holds the type; until then such entries load as :class:`OpaqueEvent`.

    Usable as a class decorator (``class Mine(Event, frozen=True, kw_only=True, tag="mine")``). Registering a
    different class under a taken type is an error, re-registering the same class is not.
    """
    key = cls.__struct_config__.tag
    if not isinstance(key, str) or not key or key == "opaque":
        raise ValueError(
            f"{cls.__name__} needs a tag: class {cls.__name__}(Event, frozen=True, kw_only=True, tag='...')"
        )
    if EVENT_TYPES.get(key, cls) is not cls:
        raise ValueError(f"event type {key!r} is already registered by {EVENT_TYPES[key].__name__}")
    EVENT_TYPES[key] = cls
    return cls


def event_from_dict(data: dict[str, Any]) -> Event | None:
    """Rebuild an event from its stored form. An unknown type comes back as an
    :class:`OpaqueEvent`; an entry that does not fit its known type is None."""
    kind = data.get("type")
    cls = EVENT_TYPES.get(str(kind))
    try:
        if cls is None:
            if not isinstance(kind, str) or not kind:
                return None
            uuid, timestamp = data.get("uuid"), data.get("timestamp")
            return OpaqueEvent(
                uuid=uuid if isinstance(uuid, str) else new_id(),
                timestamp=timestamp if isinstance(timestamp, str) else "",
                data=data,
            )
        return msgspec.convert(data, cls)
    except (ValueError, RecursionError):
        return None


def event_data(event: Event) -> dict[str, Any]:
    """The event as stored: plain JSON-ready data with its ``type``."""
    if isinstance(event, OpaqueEvent):
        return dict(event.data)
    data: dict[str, Any] = to_data(event)
    return data


Subscriber = Callable[[Event], None]
Transform = Callable[[Event], Event]


class SinkFailed(Exception):
    """A critical subscriber (the session log) could not take an event: the run must stop."""


class EventBus:
    """Synchronous fan-out of events to subscribers.

    Persisted events first pass the bus's transforms (redaction: one policy, one place), so
    the session log, the model's view, stream-json and memory all see the same event; ``emit``
    returns that event. A subscriber that raises is logged and skipped: a broken reader (a UI,
    memory capture) never stops the session. A *critical* subscriber (the session writer) is
    different: its failure is data lost, so ``emit`` raises :class:`SinkFailed` after the other
    subscribers have had the event. ``publish`` is ``emit`` that returns the event as logged.
    """

    def __init__(self) -> None:
        self._subscribers: list[tuple[Subscriber, bool]] = []
        self.transforms: list[Transform] = []

    def subscribe(self, fn: Subscriber, *, critical: bool = False) -> Callable[[], None]:
        entry = (fn, critical)
        self._subscribers.append(entry)

        def unsubscribe() -> None:
            if entry in self._subscribers:
                self._subscribers.remove(entry)

        return unsubscribe

    def emit(self, event: Event) -> None:
        self.publish(event)

    def publish(self, event: Event) -> Event:
        if event.persist:
            for transform in self.transforms:
                event = transform(event)
        failure: Exception | None = None
        for fn, critical in tuple(self._subscribers):
            try:
                fn(event)
            except Exception as exc:
                if critical:
                    failure = failure or exc
                else:
                    log.exception("event subscriber %r failed on %s", fn, event.type)
        if failure is not None:
            raise SinkFailed(str(failure)) from failure
        return event
