"""The session layer's own persisted events: file checkpoints, rewinds and forks."""

from __future__ import annotations

import msgspec

from agentkeel.core.events import Event, register_event_type
from agentkeel.core.view import Compaction


class Checkpoint(Event, frozen=True, kw_only=True, tag="checkpoint"):
    """Paths a tool call (or a rewind, ``source="rewind"``) changed, with their content before it:
    the sha256 of a stored object, ``None`` when the file did not exist, ``""`` when not recorded."""

    tool_use_id: str = ""
    tool: str = ""
    source: str = "tool"  # tool | rewind
    files: dict[str, str | None] = msgspec.field(default_factory=dict)


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


for _cls in (Checkpoint, RewindMarker, SessionForked):
    register_event_type(_cls)
