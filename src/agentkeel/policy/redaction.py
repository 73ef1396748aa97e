"""Redaction of persisted events: one policy, in two places.

Redaction keeps secrets out of the model's context and off the disk; it must not rewrite what the
model said (#34 item 4: a list of numbers in an answer became ``[REDACTED:card_number]``, in the
answer the user read and in the history resent to the model). So:

- On the bus, before any reader (the model's view, stream-json, the SDK, memory capture, the UIs):
  every persisted event is masked except the model's own words, an assistant message (its text and
  its tool calls, as the model wrote them), the assistant messages a compaction keeps, and the
  run's result, which is the model's last text. A secret cannot enter those from a tool: tool
  results are masked at the result guard and again here, before the model sees them. The user's
  prompt is masked as before: it carries @-mentioned files, pasted output and hook context with it,
  and keel cannot tell at this layer which part was typed.
- On disk (the session's transcript): every event fully masked, the model's words included. A
  session resumed from disk resends the masked form of an answer that held a real secret.

What a provider needs byte for byte is left alone everywhere: thinking text and its signature (the
provider verifies them), redacted thinking, image data and tool ids.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from agentkeel.core.events import AssistantMessage, Compaction, Event, EventBus, OpaqueEvent, RunFinished, event_data
from agentkeel.core.types import Message, from_data
from agentkeel.policy.redact import redact

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
    """The event with every secret masked, or the same object when there was none.

    Most events hold no secret, and their texts were mostly seen before (a tool result at the
    result guard, the kept messages of a compaction in the events that first carried them):
    ``_clean`` reads the typed event in place and answers from redaction's memo, without turning
    the event into plain data. Only an event it cannot vouch for is converted and masked."""
    if not isinstance(event, OpaqueEvent) and _clean(event, _EVENT_KEEP):
        return event
    return _masked(event)


def _masked(event: Event) -> Event:
    """The exact path: the event as stored data, every string outside the kept keys masked."""
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
    if isinstance(value, list | tuple):  # a tuple in a dict[str, Any] stays one in the stored form
        walked = [_walk(v, changed, frozenset()) for v in value]
        return walked if isinstance(value, list) else tuple(walked)
    if isinstance(value, dict):
        kept = _KEEP.get(str(value.get("type")), frozenset()) if "type" in value else frozenset()
        return {k: (v if k in kept else _walk(v, changed, frozenset())) for k, v in value.items()}
    return value


_SCALARS = (int, float, bool, type(None))
_NOTHING: frozenset[str] = frozenset()
_ABSENT = object()


def _clean(value: Any, kept: frozenset[str] | None = None) -> bool:
    """Whether ``_walk`` would leave every string of value (a Struct read as ``to_data`` stores it)
    as it is. ``kept``: the keys left alone at this level (None: as the stored ``type`` says). It
    reads the strings ``_walk`` reads, and answers False, for the exact path to decide, on anything
    whose stored form it does not know (an enum, a date, bytes, an unset field)."""
    if isinstance(value, str):
        return not value or redact(value) == value
    if isinstance(value, Message):  # a compaction carries the kept messages again
        key = _message_key(value)
        if key is not None and key in _CLEAN_STRUCTS:
            return True
        if not _clean_struct(value, kept):
            return False
        if key is not None:
            _remember(_CLEAN_STRUCTS, key, None)
        return True
    if isinstance(value, msgspec.Struct):
        return _clean_struct(value, kept)
    if isinstance(value, list | tuple):
        return all(_clean(v) for v in value)
    if isinstance(value, dict):
        kept = _KEEP.get(str(value.get("type")), _NOTHING) if "type" in value else _NOTHING
        return all(k in kept or _clean(v) for k, v in value.items())
    return isinstance(value, _SCALARS)


def _clean_struct(value: msgspec.Struct, kept: frozenset[str] | None) -> bool:
    """``_clean`` of a Struct: its fields under their stored names, its tag where it is stored."""
    known = _known_clean(value) if kept is None else None
    if known:
        return True
    config = value.__struct_config__
    names, keys = value.__struct_fields__, value.__struct_encode_fields__
    if kept is None:
        kind = config.tag if config.tag_field == "type" else _ABSENT
        if "type" in keys:
            kind = getattr(value, names[keys.index("type")])
        kept = _KEEP.get(str(kind), _NOTHING) if kind is not _ABSENT else _NOTHING
    if config.tag_field is not None and config.tag_field not in kept and not _clean(config.tag):
        return False
    clean = all(key in kept or _clean(getattr(value, name)) for name, key in zip(names, keys, strict=True))
    if clean and known is not None:
        _remember(_CLEAN_STRUCTS, value, None)
    return clean


# Content blocks and messages found clean, by value (a hashable Struct: a text block, a tool result
# of text; a message as its role and its blocks): a compaction event carries the kept messages
# again, and they are checked once, not at each compaction. By value, so nothing changed since can
# pass for what was checked: an equal message is as clean as the one seen.
_CLEAN_STRUCTS: dict[Any, None] = {}
_MAX_CLEAN_STRUCTS = 1024


def _message_key(message: Message) -> Any:
    """A message by value: its role and blocks, or (a block holding a dict: a tool call's input)
    its JSON, which is its stored form; None if it has none."""
    try:
        key = (message.role, tuple(message.content))
        hash(key)
        return key
    except TypeError:
        pass
    try:
        return msgspec.json.encode(message)
    except (TypeError, ValueError, OverflowError):
        return None


def _known_clean(value: msgspec.Struct) -> bool | None:
    """True when an equal Struct was found clean; False when not yet; None when it cannot be kept
    (not hashable: it holds a list or a dict)."""
    try:
        return value in _CLEAN_STRUCTS
    except TypeError:
        return None


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    memo[key] = value
    while len(memo) > _MAX_CLEAN_STRUCTS:
        try:  # the oldest goes; another thread (a subagent's bus) may have taken it first
            del memo[next(iter(memo))]
        except (KeyError, RuntimeError, StopIteration):
            break


def redact_for_readers(event: Event) -> Event:
    """The event as every reader gets it: masked as ``redact_event`` masks it, except the model's
    own words (an assistant message, the assistant messages a compaction keeps, the run's result),
    which travel as the model wrote them."""
    if isinstance(event, AssistantMessage | RunFinished):
        return event
    masked = redact_event(event)
    if masked is event or not isinstance(event, Compaction) or not isinstance(masked, Compaction):
        return masked
    if len(masked.messages) != len(event.messages):  # cannot pair them: keep the masked form
        return masked
    kept = [said if said.role == "assistant" else m for said, m in zip(event.messages, masked.messages, strict=True)]
    return msgspec.structs.replace(masked, messages=kept)


def session_bus(log: Callable[[Event], None] | None) -> EventBus:
    """A session's bus, in every profile: redaction before every reader (``redact_for_readers``),
    then its transcript (``log``), which gets every event fully masked and stops the run when it
    cannot be written."""
    bus = EventBus()
    bus.transforms.append(redact_for_readers)
    if log is not None:
        write = log

        def masked_log(event: Event) -> None:
            write(redact_event(event))

        bus.subscribe(masked_log, critical=True)
    return bus
