"""The session layer's own persisted events: file checkpoints, rewinds and forks."""

from __future__ import annotations

import msgspec

from agentkeel.core.events import Event, register_event_type
from agentkeel.core.view import Compaction


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


for _cls in (Checkpoint, RewindMarker, SessionForked, RewindIntent, RewindDone):
    register_event_type(_cls)
