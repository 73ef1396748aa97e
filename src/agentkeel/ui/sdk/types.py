"""The SDK's options and typed messages, named as in the Claude Agent SDK where they overlap.

Messages are parsed from the stream-json lines both transports produce (in-process: the same
encoder as ``keel --output-format stream-json``; subprocess: keel's stdout), so a program sees
the same objects whichever it chooses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"]


class KeelSDKError(Exception):
    """The session could not start or went away; the message says why in one line."""


# --- content blocks and messages ------------------------------------------------------------


@dataclass
class TextBlock:
    text: str


@dataclass
class ThinkingBlock:
    thinking: str
    signature: str = ""


@dataclass
class ToolUseBlock:
    id: str
    name: str
    input: dict[str, Any]


@dataclass
class ToolResultBlock:
    tool_use_id: str
    content: str | list[dict[str, Any]] | None = None
    is_error: bool | None = None


ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock


@dataclass
class UserMessage:
    content: str | list[ContentBlock]
    uuid: str | None = None
    parent_tool_use_id: str | None = None


@dataclass
class AssistantMessage:
    content: list[ContentBlock]
    model: str
    parent_tool_use_id: str | None = None
    usage: dict[str, Any] | None = None
    stop_reason: str | None = None
    session_id: str | None = None
    uuid: str | None = None


@dataclass
class SystemMessage:
    subtype: str
    data: dict[str, Any]


@dataclass
class ResultMessage:
    subtype: str
    duration_ms: int
    duration_api_ms: int
    is_error: bool
    num_turns: int
    session_id: str
    stop_reason: str | None = None
    total_cost_usd: float | None = None
    usage: dict[str, Any] | None = None
    result: str | None = None
    structured_output: Any = None
    permission_denials: list[dict[str, Any]] | None = None


@dataclass
class StreamEvent:
    uuid: str
    session_id: str
    event: dict[str, Any]
    parent_tool_use_id: str | None = None


Message = UserMessage | AssistantMessage | SystemMessage | ResultMessage | StreamEvent


def _blocks(raw: list[Any]) -> list[ContentBlock]:
    out: list[ContentBlock] = []
    for b in raw:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            out.append(TextBlock(b["text"]))
        elif kind == "thinking":
            out.append(ThinkingBlock(b["thinking"], b.get("signature", "")))
        elif kind == "tool_use":
            out.append(ToolUseBlock(b["id"], b["name"], b.get("input", {})))
        elif kind == "tool_result":
            out.append(ToolResultBlock(b["tool_use_id"], b.get("content"), b.get("is_error")))
    return out


def parse_message(data: dict[str, Any]) -> Message | None:
    """One stream-json line as a typed message; None for a line of a kind this SDK does not model."""
    try:
        kind = data["type"]
        if kind == "assistant":
            m = data["message"]
            return AssistantMessage(
                _blocks(m["content"]),
                m["model"],
                data.get("parent_tool_use_id"),
                m.get("usage"),
                m.get("stop_reason"),
                data.get("session_id"),
                data.get("uuid"),
            )
        if kind == "user":
            content = data["message"]["content"]
            parsed = content if isinstance(content, str) else _blocks(content)
            return UserMessage(parsed, data.get("uuid"), data.get("parent_tool_use_id"))
        if kind == "system":
            return SystemMessage(data["subtype"], data)
        if kind == "result":
            return ResultMessage(
                data["subtype"],
                data["duration_ms"],
                data.get("duration_api_ms", data["duration_ms"]),
                data["is_error"],
                data["num_turns"],
                data["session_id"],
                data.get("stop_reason"),
                data.get("total_cost_usd"),
                data.get("usage"),
                data.get("result"),
                data.get("structured_output"),
                data.get("permission_denials"),
            )
        if kind == "stream_event":
            return StreamEvent(data["uuid"], data["session_id"], data["event"], data.get("parent_tool_use_id"))
    except (KeyError, TypeError) as e:
        raise KeelSDKError(f"a {data.get('type')!r} message lacks {e}") from None
    return None


# --- permissions and hooks ------------------------------------------------------------------


@dataclass
class ToolPermissionContext:
    tool_use_id: str | None = None
    decision_reason: str | None = None
    suggestions: list[str] = field(default_factory=list)


@dataclass
class PermissionResultAllow:
    behavior: Literal["allow"] = "allow"
    updated_input: dict[str, Any] | None = None


@dataclass
class PermissionResultDeny:
    behavior: Literal["deny"] = "deny"
    message: str = ""
    interrupt: bool = False


PermissionResult = PermissionResultAllow | PermissionResultDeny
CanUseTool = Callable[[str, dict[str, Any], ToolPermissionContext], Awaitable[PermissionResult]]
# (input, tool_use_id, context) -> the hook's JSON output, as in the Claude Agent SDK
HookCallback = Callable[[dict[str, Any], str | None, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass
class HookMatcher:
    matcher: str | None = None
    hooks: list[HookCallback] = field(default_factory=list)
    timeout: float | None = None


def hook_output(raw: dict[str, Any]) -> dict[str, Any]:
    """``continue_``/``async_`` (Python-safe names) -> ``continue``/``async``."""
    return {{"continue_": "continue", "async_": "async"}.get(k, k): v for k, v in raw.items()}


# --- options ----------------------------------------------------------------------------------


@dataclass
class KeelAgentOptions:
    """The Claude Agent SDK's ``ClaudeAgentOptions`` names where they overlap, plus ``transport``.

    ``system_prompt``: None keeps keel's own system prompt (the Claude Agent SDK's None means an
    empty one: pass ``""`` for that); a string replaces it; ``{"type": "preset", "append": ...}``
    appends to keel's. ``transport``: "in-process" runs the engine in this Python process;
    "subprocess" runs ``keel`` (``cli_path``) and speaks stream-json to it."""

    cwd: str | Path | None = None
    model: str | None = None
    system_prompt: str | dict[str, Any] | None = None
    append_system_prompt: str | None = None
    tools: list[str] | None = None
    allowed_tools: list[str] = field(default_factory=list)
    disallowed_tools: list[str] = field(default_factory=list)
    permission_mode: PermissionMode | None = None
    max_turns: int | None = None
    max_budget_usd: float | None = None
    max_thinking_tokens: int | None = None
    can_use_tool: CanUseTool | None = None
    hooks: dict[str, list[HookMatcher]] | None = None
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    add_dirs: list[str | Path] = field(default_factory=list)
    settings: str | None = None
    continue_conversation: bool = False
    resume: str | None = None
    fork_session: bool = False
    session_id: str | None = None
    include_partial_messages: bool = False
    output_format: dict[str, Any] | None = None  # {"type": "json_schema", "schema": {...}}
    transport: Literal["in-process", "subprocess"] = "in-process"
    cli_path: str | Path | None = None

    def prompt_parts(self) -> tuple[str | None, str | None]:
        """(replacement system prompt or None, text appended)."""
        sp = self.system_prompt
        if isinstance(sp, dict):
            if sp.get("type") == "preset":
                return None, sp.get("append") or self.append_system_prompt
            return str(sp.get("prompt", "")), self.append_system_prompt
        return sp, self.append_system_prompt

    def schema(self) -> dict[str, Any] | None:
        fmt = self.output_format
        if fmt is None:
            return None
        if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
            raise KeelSDKError('output_format must be {"type": "json_schema", "schema": {...}}')
        return dict(fmt["schema"])


ClaudeAgentOptions = KeelAgentOptions  # the same code runs against either SDK
