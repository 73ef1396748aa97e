"""Claude Code's stream-json protocol, sans-IO: events -> JSON lines, JSON lines -> inputs.

Shared by ``keel -p --output-format stream-json``, ``--input-format stream-json`` (with the
control protocol of :mod:`agentkeel.protocol.control`) and :mod:`agentkeel.ui.sdk`. No sockets, no
stdout: callers write the dicts these functions return. The shapes are Claude Code's (pinned
against a capture of the real CLI in tests/data/claude_code_stream_json.jsonl).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentkeel.core.events import (
    AssistantMessage,
    Event,
    Notice,
    RunFinished,
    SessionStarted,
    ToolResults,
    UserMessage,
    new_id,
)
from agentkeel.core.loop import INTERRUPTED_MARK
from agentkeel.core.types import Message, from_data, to_data

# The Claude Code release whose stream-json and control protocol keel speaks: reported as
# ``claude_code_version`` in the init message, the field the Agent SDKs read to decide which
# features the CLI has (the Python SDK warns "too old ... unsupported" without it). keel's own
# version is ``keel_version`` there, and ``keel --version`` (docs/sdk.md, "Versions").
CLAUDE_CODE_COMPAT = "2.1.328"
# keel's subtype -> the one Claude Code's clients know
_RESULT_SUBTYPES = {"interrupted": "error_during_execution"}
# keel's subtype -> Claude Code 2.1.328's ``terminal_reason`` (an interrupt's and a failure's are
# not mapped: Claude Code's depend on where it stopped, e.g. ``aborted_tools`` in a tool call)
_TERMINAL_REASONS = {"success": "completed", "error_max_turns": "max_turns", "error_max_budget_usd": "budget_exhausted"}
# where an interrupt stopped the run -> Claude Code 2.1.328's ``terminal_reason``
_ABORTED = {"request": "aborted_streaming", "tools": "aborted_tools", "idle": "aborted_streaming"}
_TOO_LONG = ("prompt is too long", "context_length_exceeded", "maximum context length")


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
            "claude_code_version": CLAUDE_CODE_COMPAT,
            "uuid": event.uuid,
            **session.extra_init,
        }
    if isinstance(event, AssistantMessage):
        msg = to_data(event.message)
        msg.update(
            {"type": "message", "model": event.model, "stop_reason": event.stop_reason, "usage": event.usage.to_wire()}
        )
        msg.setdefault("id", "msg_" + event.uuid.replace("-", "")[:24])
        return {
            "type": "assistant",
            "message": msg,
            "parent_tool_use_id": None,
            "session_id": sid,
            "uuid": event.uuid,
            "timestamp": event.timestamp,
        }
    # tool results, and the one user message keel adds itself that Claude Code prints (after an
    # interrupted reply)
    if isinstance(event, ToolResults) or (isinstance(event, UserMessage) and event.message.text() == INTERRUPTED_MARK):
        return {
            "type": "user",
            "message": to_data(event.message),
            "parent_tool_use_id": None,
            "session_id": sid,
            "uuid": event.uuid,
            "timestamp": event.timestamp,
        }
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


def hook_lines(event: Event, session_id: str) -> list[dict[str, Any]]:
    """``--include-hook-events``: one ``system/hook_response`` line per handler a hook event ran
    (the hooks extension's ``hook`` event, read by its tag: this layer does not know hooks)."""
    if event.type != "hook":
        return []
    data = to_data(event)
    name = str(data.get("event", ""))
    return [
        {
            "type": "system",
            "subtype": "hook_response",
            "hook_event": name,
            "hook_name": f"{name}:{run.get('handler', '')}",
            "exit_code": run.get("exit_code"),
            "outcome": run.get("outcome", ""),
            "session_id": session_id,
            "uuid": new_id(),
        }
        for run in data.get("runs", [])
        if isinstance(run, dict)
    ]


def result(event: RunFinished, session_id: str, *, duration_ms: int | None = None) -> dict[str, Any]:
    """Claude Code's result message, from the RunFinished event."""
    return result_line(
        subtype=event.subtype,
        is_error=event.is_error,
        duration_ms=event.duration_ms if duration_ms is None else duration_ms,
        num_turns=event.num_turns,
        result=event.result,
        session_id=session_id,
        total_cost_usd=event.total_cost_usd,
        usage=event.usage.to_wire(),
    )


def result_line(
    *,
    subtype: str,
    is_error: bool,
    duration_ms: int,
    num_turns: int,
    result: str,
    session_id: str,
    total_cost_usd: float,
    usage: dict[str, int],
    duration_api_ms: int | None = None,
    structured_output: Any = None,
    permission_denials: list[dict[str, Any]] | None = None,
    stop_reason: str | None = None,
) -> dict[str, Any]:
    """The ``result`` line with every field the Claude Agent SDK's ``ResultMessage`` requires;
    ``stop_reason`` is the last reply's (``end_turn`` for a success when not given)."""
    line: dict[str, Any] = {
        "type": "result",
        "subtype": _RESULT_SUBTYPES.get(subtype, subtype),
        "is_error": is_error,
        "duration_ms": duration_ms,
        "duration_api_ms": duration_ms if duration_api_ms is None else duration_api_ms,
        "num_turns": num_turns,
        "result": result,
        "stop_reason": stop_reason if stop_reason is not None else None if is_error else "end_turn",
        "session_id": session_id,
        "total_cost_usd": total_cost_usd,
        "usage": usage,
        "permission_denials": list(permission_denials or []),
        "api_error_status": None,
        "uuid": new_id(),
    }
    if structured_output is not None:
        line["structured_output"] = structured_output
    reason = _TERMINAL_REASONS.get(subtype)
    if reason is not None:
        line["terminal_reason"] = reason
    if line["subtype"] != "success":  # the TypeScript SDK throws on an error result without it
        line["errors"] = [result or line["subtype"]]
    return line


def end_of_run(
    line: dict[str, Any],
    *,
    error: str,
    api_error_status: int | None,
    interrupted_during: str = "",
    api_error: bool = False,
) -> dict[str, Any]:
    """Finish a result line with why the run ended, as Claude Code 2.1.328 says it: a run that did
    not succeed lists why in ``errors``; a run an API error ended (``api_error``, or an HTTP
    status; an unreachable endpoint has none) is ``subtype: "success"`` with ``is_error: true``,
    ``terminal_reason`` ``"api_error"`` (``"prompt_too_long"`` for a request over the context
    window), the HTTP status in ``api_error_status`` (null without one), ``stop_reason``
    ``"stop_sequence"`` and the message in ``result`` (no ``errors``); an interrupted run is
    ``error_during_execution`` with ``terminal_reason`` ``"aborted_streaming"`` (or
    ``"aborted_tools"`` in a tool call) and ``stop_reason`` null. Returns ``line``, changed in place."""
    if (api_error_status is not None or api_error) and line["is_error"]:
        too_long = any(marker in error.lower() for marker in _TOO_LONG)
        line.update(
            subtype="success",
            terminal_reason="prompt_too_long" if too_long else "api_error",
            api_error_status=api_error_status,
            result=error or line["result"],
            stop_reason="stop_sequence",
        )
        line.pop("errors", None)
        return line
    if interrupted_during:
        line.update(terminal_reason=_ABORTED.get(interrupted_during, "aborted_streaming"), stop_reason=None)
    if line["subtype"] != "success":
        line["errors"] = [error or line["result"] or line["subtype"]]
    return line


def conversation_reset(session_id: str, user_message_uuid: str = "") -> dict[str, Any]:
    """What Claude Code 2.1.328 writes when ``/clear`` arrives as stream-json input: the client
    drops the conversation it shows (keel's transcript keeps the history, as ``/clear`` says)."""
    new = new_id()
    return {
        "type": "conversation_reset",
        "new_conversation_id": new,
        "uuid": new,
        "trigger": "clear",
        "user_message_uuid": user_message_uuid or new_id(),
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "session_id": session_id,
    }


# who refuses a call for a reason that is not a permission (a malformed input, a repeat, a paused
# tool, an interactive program): not listed in ``permission_denials``
NOT_PERMISSION = frozenset({"validation", "unknown-tool", "loop-detection", "circuit-breaker", "non-interactive-env"})


def permission_denials(refused: Iterable[Any]) -> list[dict[str, Any]]:
    """Claude Code's ``permission_denials``: each call the permission system (a rule, the mode, a
    hook, the user, or nobody to ask) did not let run, as ``{"tool_name", "tool_use_id",
    "tool_input"}``. ``refused`` holds the run's refusals (``RunResult.refused``)."""
    return [
        {"tool_name": r.tool_name, "tool_use_id": r.tool_use_id, "tool_input": dict(r.tool_input)}
        for r in refused
        if r.source not in NOT_PERMISSION
    ]


def dumps(line: dict[str, Any]) -> str:
    return json.dumps(line, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class UserInput:
    message: Message
    origin: dict[str, Any] | None = None  # the host's stamp, echoed on the turn's result (Claude Code >= 2.1.210)


@dataclass(frozen=True)
class ControlRequest:
    request_id: str
    subtype: str
    body: dict[str, Any]


@dataclass(frozen=True)
class ControlResponse:
    """The client's answer to a control request keel sent (can_use_tool, hook_callback, ...)."""

    request_id: str
    ok: bool
    body: dict[str, Any]
    error: str = ""


@dataclass(frozen=True)
class ControlCancel:
    request_id: str


class ProtocolError(ValueError):
    """A line that is not a stream-json input; the message says what is wrong with it."""


def decode(line: str) -> UserInput | ControlRequest | ControlResponse | ControlCancel | None:
    """One input line: a user message, a control request or response, or None for a line that
    carries nothing to act on (blank, ``keep_alive``)."""
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
        origin = data.get("origin") if isinstance(data.get("origin"), dict) else None
        if isinstance(content, str):
            return UserInput(Message.user(content), origin)
        if not isinstance(content, list):
            raise ProtocolError("a user message's 'content' must be a string or a list of blocks")
        try:
            return UserInput(from_data(Message, {"role": "user", "content": [_block(b) for b in content]}), origin)
        except ValueError as e:
            raise ProtocolError(f"the user message does not fit: {str(e).splitlines()[0]}") from None
    if kind == "control_request":
        request = data.get("request")
        if not isinstance(request, dict) or not isinstance(request.get("subtype"), str):
            raise ProtocolError("a control_request needs a 'request' object with a 'subtype'")
        return ControlRequest(str(data.get("request_id", "")), request["subtype"], request)
    if kind == "control_response":
        response = data.get("response")
        if not isinstance(response, dict):
            raise ProtocolError("a control_response needs a 'response' object")
        body = response.get("response")
        return ControlResponse(
            str(response.get("request_id", "")),
            response.get("subtype") == "success",
            body if isinstance(body, dict) else {},
            str(response.get("error", "")),
        )
    if kind == "control_cancel_request":
        return ControlCancel(str(data.get("request_id", "")))
    if kind == "keep_alive":
        return None
    raise ProtocolError(f"unknown line type {kind!r}: expected 'user', 'control_request' or 'control_response'")


def _block(raw: Any) -> Any:
    """A content block as clients send it; Claude's image shape (``source``) becomes keel's."""
    if isinstance(raw, dict) and raw.get("type") == "image" and isinstance(raw.get("source"), dict):
        source = raw["source"]
        if source.get("type") != "base64":
            raise ProtocolError("only base64 images are supported (source.type 'base64')")
        return {"type": "image", "media_type": source.get("media_type", ""), "data": source.get("data", "")}
    return raw
