"""Claude Code's control protocol, sans-IO: the lines beside the conversation on stdin/stdout.

Either side sends ``{"type": "control_request", "request_id": ..., "request": {"subtype": ...}}``
and the other answers ``{"type": "control_response", "response": {"subtype": "success" | "error",
"request_id": ..., "response" | "error": ...}}``. From the client: ``initialize``, ``interrupt``,
``set_permission_mode``, ``set_model``, ``mcp_status``, ``get_context_usage``, ``rewind_files``,
``stop_task``. From keel: ``can_use_tool``, ``hook_callback``, ``mcp_message``.

This module builds and reads those dicts and converts between the client's shapes and keel's
(hook registrations, permission answers, SDK MCP tool listings); it does no I/O.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import msgspec

# what keel answers to; anything else is a clear error (never a silent success)
CLIENT_REQUESTS = (
    "initialize",
    "interrupt",
    "set_permission_mode",
    "set_model",
    "mcp_status",
    "get_context_usage",
    "rewind_files",
    "stop_task",
)


class ControlError(Exception):
    """A control request keel cannot honour; the message goes back to the client as the error."""


def success(request_id: str, response: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": response or {}},
    }


def error(request_id: str, message: str) -> dict[str, Any]:
    return {"type": "control_response", "response": {"subtype": "error", "request_id": request_id, "error": message}}


def request(body: dict[str, Any], request_id: str | None = None) -> dict[str, Any]:
    rid = request_id or f"keel_req_{uuid.uuid4().hex[:12]}"
    return {"type": "control_request", "request_id": rid, "request": body}


def cancel(request_id: str) -> dict[str, Any]:
    return {"type": "control_cancel_request", "request_id": request_id}


# --- from keel to the client ------------------------------------------------------------


def can_use_tool(
    tool_name: str, tool_input: dict[str, Any], tool_use_id: str, reason: str, suggestions: list[str]
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "subtype": "can_use_tool",
        "tool_name": tool_name,
        "input": tool_input,
        "tool_use_id": tool_use_id,
        "permission_suggestions": [
            {
                "type": "addRules",
                "rules": [_rule(s) for s in suggestions],
                "behavior": "allow",
                "destination": "session",
            }
        ]
        if suggestions
        else [],
    }
    if reason:
        body["decision_reason"] = reason
    return body


def _rule(text: str) -> dict[str, Any]:
    name, sep, rest = text.partition("(")
    if sep and rest.endswith(")"):
        return {"toolName": name, "ruleContent": rest[:-1]}
    return {"toolName": text}


class PermissionAnswer(msgspec.Struct, frozen=True):
    allow: bool
    updated_input: dict[str, Any] | None = None
    message: str = ""
    interrupt: bool = False


def permission_answer(body: dict[str, Any]) -> PermissionAnswer:
    """The client's ``can_use_tool`` answer. Anything but a clear allow denies (fail closed)."""
    behavior = body.get("behavior")
    if behavior == "allow":
        updated = body.get("updatedInput")
        return PermissionAnswer(True, updated if isinstance(updated, dict) else None)
    message = body.get("message")
    return PermissionAnswer(
        False,
        message=message if isinstance(message, str) else "",
        interrupt=bool(body.get("interrupt")),
    )


def hook_callback(callback_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "subtype": "hook_callback",
        "callback_id": callback_id,
        "input": payload,
        "tool_use_id": payload.get("tool_use_id"),
    }


def mcp_message(server: str, message: dict[str, Any]) -> dict[str, Any]:
    return {"subtype": "mcp_message", "server_name": server, "message": message}


# --- reading the client's initialize ------------------------------------------------------


class HookRegistration(msgspec.Struct, frozen=True):
    event: str
    matcher: str | None
    callback_ids: tuple[str, ...]
    timeout: float | None = None


def hook_registrations(init: dict[str, Any]) -> list[HookRegistration]:
    """``initialize.hooks``: ``{"PreToolUse": [{"matcher": "<tool>", "hookCallbackIds": [...]}]}``."""
    raw = init.get("hooks")
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise ControlError("initialize: 'hooks' must be an object of event -> matchers")
    out: list[HookRegistration] = []
    for event, matchers in raw.items():
        if not isinstance(matchers, list):
            raise ControlError(f"initialize: hooks.{event} must be a list of matchers")
        for m in matchers:
            if not isinstance(m, dict):
                raise ControlError(f"initialize: hooks.{event} has a matcher that is not an object")
            ids = m.get("hookCallbackIds") or []
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise ControlError(f"initialize: hooks.{event}: hookCallbackIds must be a list of strings")
            timeout = m.get("timeout")
            matcher = m.get("matcher")
            out.append(
                HookRegistration(
                    str(event),
                    matcher if isinstance(matcher, str) else None,
                    tuple(ids),
                    float(timeout) if isinstance(timeout, int | float) else None,
                )
            )
    return out


def sdk_servers(mcp_config: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Split ``{"mcpServers": {...}}``: the names of SDK-hosted servers (``"type": "sdk"``, their
    tools answered by the client over ``mcp_message``) and the rest, for keel's MCP client."""
    servers = mcp_config.get("mcpServers", mcp_config)
    if not isinstance(servers, dict):
        raise ControlError("--mcp-config: 'mcpServers' must be an object of name -> server")
    sdk = [name for name, cfg in servers.items() if isinstance(cfg, dict) and cfg.get("type") == "sdk"]
    rest = {name: cfg for name, cfg in servers.items() if name not in sdk}
    return sdk, rest


def load_json_arg(value: str, what: str) -> dict[str, Any]:
    """A flag value that is inline JSON or a path to a JSON file (``--mcp-config``, ``--json-schema``)."""
    text = value.strip()
    if not text.startswith("{"):
        from pathlib import Path

        try:
            text = Path(value).read_text(encoding="utf-8")
        except OSError as e:
            raise ControlError(f"{what}: cannot read {value}: {e.strerror or e}") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ControlError(f"{what}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ControlError(f"{what}: expected a JSON object")
    return data
