"""Redaction of persisted events: one policy, applied once, on the bus, before any reader.

The session log, the model's view (live and after resume), stream-json, memory capture and
the UIs all read the same, already-masked event. What a provider needs byte for byte is left
alone: thinking text and its signature (the provider verifies them), redacted thinking, image
data and tool ids.
"""

from __future__ import annotations

from typing import Any

from agentkeel.core.events import Event, OpaqueEvent, event_data
from agentkeel.core.types import from_data
from agentkeel.redact import redact

# block type -> keys whose values must travel unchanged
_KEEP: dict[str, frozenset[str]] = {
    "thinking": frozenset({"thinking", "signature"}),
    "redacted_thinking": frozenset({"data"}),
    "image": frozenset({"data", "media_type"}),
    "tool_use": frozenset({"id", "name"}),
    "tool_result": frozenset({"tool_use_id"}),
}
_EVENT_KEEP = frozenset({"type", "uuid", "timestamp", "session_id", "tool_use_id"})


def redact_event(event: Event) -> Event:
    """The event with every secret masked, or the same object when there was none."""
    data = event_data(event)
    changed = [False]
    out = {k: (v if k in _EVENT_KEEP else _walk(v, changed, frozenset())) for k, v in data.items()}
    if not changed[0]:
        return event
    if isinstance(event, OpaqueEvent):
        return OpaqueEvent(uuid=event.uuid, timestamp=event.timestamp, data=out)
    return from_data(type(event), out)


def _walk(value: Any, changed: list[bool], keep: frozenset[str]) -> Any:
    if isinstance(value, str):
        masked = redact(value)
        if masked != value:
            changed[0] = True
        return masked
    if isinstance(value, list):
        return [_walk(v, changed, frozenset()) for v in value]
    if isinstance(value, dict):
        kept = _KEEP.get(str(value.get("type")), frozenset()) if "type" in value else frozenset()
        return {k: (v if k in kept else _walk(v, changed, frozenset())) for k, v in value.items()}
    return value
