"""Claude Code's stream-json protocol, sans-IO: events -> JSON lines, JSON lines -> inputs.

Shared by ``keel -p --output-format stream-json``, the coming ``--input-format stream-json``
and the SDK. No sockets, no stdout: callers write the dicts these functions return.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentkeel.core.events import AssistantMessage, Event, Notice, RunFinished, SessionStarted, ToolResults
from agentkeel.core.types import Message, from_data, to_data

# keel's subtype -> the one Claude Code's clients know
_RESULT_SUBTYPES = {"interrupted": "error_during_execution"}


@dataclass
class Session:
    """What the encoder needs to know about the session beside each event."""

    session_id: str
    tools: list[str] = field(default_factory=list)  # the tools the model is shown
    extra_init: dict[str, Any] = field(default_factory=dict)


def encode(event: Event, session: Session) -> dict[str, Any] | None:
    """The stream-json line for an event, or None when the event has none."""
    sid = session.session_id
    if isinstance(event, SessionStarted):
        return {
            "type": "system",
            "subtype": "init",
            "session_id": sid,
            "cwd": event.cwd,
            "model": event.model,
            "tools": list(session.tools),
            "keel_version": event.version,
            **session.extra_init,
        }
    if isinstance(event, AssistantMessage):
        msg = to_data(event.message)
        msg.update(
            {"type": "message", "model": event.model, "stop_reason": event.stop_reason, "usage": event.usage.to_wire()}
        )
        return {"type": "assistant", "message": msg, "session_id": sid, "uuid": event.uuid}
    if isinstance(event, ToolResults):
        return {"type": "user", "message": to_data(event.message), "session_id": sid, "uuid": event.uuid}
    if isinstance(event, Notice):
        return {
            "type": "system",
            "subtype": "notice",
            "level": event.level,
            "message": event.message,
            "session_id": sid,
        }
    if isinstance(event, RunFinished):
        return result(event, sid)
    return None


def result(event: RunFinished, session_id: str, *, duration_ms: int | None = None) -> dict[str, Any]:
    """Claude Code's result message, from the RunFinished event."""
    return {
        "type": "result",
        "subtype": _RESULT_SUBTYPES.get(event.subtype, event.subtype),
        "is_error": event.is_error,
        "duration_ms": event.duration_ms if duration_ms is None else duration_ms,
        "num_turns": event.num_turns,
        "result": event.result,
        "session_id": session_id,
        "total_cost_usd": event.total_cost_usd,
        "usage": event.usage.to_wire(),
    }


def dumps(line: dict[str, Any]) -> str:
    return json.dumps(line, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class UserInput:
    message: Message


@dataclass(frozen=True)
class ControlRequest:
    request_id: str
    subtype: str
    body: dict[str, Any]


class ProtocolError(ValueError):
    """A line that is not a stream-json input; the message says what is wrong with it."""


def decode(line: str) -> UserInput | ControlRequest | None:
    """One input line: a user message, a control request, or None for a blank line."""
    if not line.strip():
        return None
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as e:
        raise ProtocolError(f"not JSON: {e}") from None
    if not isinstance(data, dict):
        raise ProtocolError("each line must be a JSON object")
    kind = data.get("type")
    if kind == "user":
        raw = data.get("message")
        if not isinstance(raw, dict):
            raise ProtocolError("a user line needs a 'message' object")
        content = raw.get("content")
        if isinstance(content, str):
            return UserInput(Message.user(content))
        try:
            return UserInput(from_data(Message, {"role": "user", "content": content}))
        except ValueError as e:
            raise ProtocolError(f"the user message does not fit: {str(e).splitlines()[0]}") from None
    if kind == "control_request":
        request = data.get("request")
        if not isinstance(request, dict) or not isinstance(request.get("subtype"), str):
            raise ProtocolError("a control_request needs a 'request' object with a 'subtype'")
        return ControlRequest(str(data.get("request_id", "")), request["subtype"], request)
    raise ProtocolError(f"unknown line type {kind!r}: expected 'user' or 'control_request'")
