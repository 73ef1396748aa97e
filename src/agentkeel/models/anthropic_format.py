"""The Anthropic Messages wire format, sans-IO: a neutral request as the JSON body, content blocks
to and from their wire dicts, and :class:`MessageStream`, which folds the streamed events into
text chunks and one final :class:`ModelResponse`. Used by the wire client and the SDK adapter."""

from __future__ import annotations

import json
from typing import Any

from agentkeel.core.provider import ModelRequest, ModelResponse, ProviderError, TextChunk
from agentkeel.core.types import (
    ContentBlock,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from agentkeel.models._body import BodyCache, encode_json, json_array, spliced
from agentkeel.models.caching import Layout, previous_tail, stable_breakpoints
from agentkeel.models.catalog import min_cache_tokens

_CACHE = {"type": "ephemeral"}

# --- neutral -> wire --------------------------------------------------------------------


def _image(block: ImageBlock) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": block.media_type, "data": block.data}}


def block_to_wire(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ToolResultBlock):
        content: str | list[dict[str, Any]]
        if isinstance(block.content, str):
            content = block.content
        else:
            content = [
                _image(b) if isinstance(b, ImageBlock) else {"type": "text", "text": b.text} for b in block.content
            ]
        return {"type": "tool_result", "tool_use_id": block.tool_use_id, "content": content, "is_error": block.is_error}
    if isinstance(block, ThinkingBlock):
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, RedactedThinkingBlock):
        return {"type": "redacted_thinking", "data": block.data}
    return _image(block)


def _cacheable(block: dict[str, Any]) -> bool:
    """The API refuses cache_control on thinking blocks and on empty text."""
    return block["type"] not in ("thinking", "redacted_thinking") and not (
        block["type"] == "text" and not block["text"]
    )


def message_to_wire(message: Message) -> dict[str, Any]:
    return {"role": message.role, "content": [block_to_wire(b) for b in message.content]}


def _with_breakpoint(message: dict[str, Any]) -> dict[str, Any]:
    """The message, with a cache breakpoint on its last block (where the API allows one)."""
    last: list[dict[str, Any]] = message["content"]
    if last and _cacheable(last[-1]):
        message = {**message, "content": [*last[:-1], dict(last[-1], cache_control=_CACHE)]}
    return message


class _Plan:
    """Where a request's breakpoints go, at most four, in this order of need: the end of the stable
    system prompt (what every session of the project shares) and the end of the session block (what
    the sessions of a day share while nothing is edited), each when its prefix reaches the model's
    minimum cacheable length; the last message (the rolling tail: the next turn reads it); the
    message that ended the previous turn (read however many blocks this turn added); and, when a
    slot is left, the end of the tools (read after an instruction file was edited)."""

    def __init__(self, request: ModelRequest, caching: bool, min_tokens: int | None) -> None:
        self.layout = Layout(request)
        if min_tokens is None:
            min_tokens = min_cache_tokens("anthropic", request.model)
        tools_bp, self.system_bp, self.session_bp = (
            stable_breakpoints(self.layout, min_tokens) if caching else (False, False, False)
        )
        self.marked: set[int] = set()
        if caching and request.messages:
            self.marked.add(len(request.messages) - 1)
            before = previous_tail([m.role for m in request.messages])
            if before is not None:
                self.marked.add(before)
        used = self.system_bp + self.session_bp + len(self.marked)
        self.tools_bp = tools_bp and used < 4


def _tools(plan: _Plan) -> list[dict[str, Any]]:
    tools = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in plan.layout.tools]
    if plan.tools_bp and tools:
        tools[-1] = dict(tools[-1], cache_control=_CACHE)
    return tools


def _params(request: ModelRequest, plan: _Plan, messages: Any, tools: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens, "messages": messages}
    system: list[dict[str, Any]] = []
    if plan.layout.system:
        system.append({"type": "text", "text": plan.layout.system})
        if plan.system_bp:
            system[-1]["cache_control"] = _CACHE
    if plan.layout.session:  # after the stable prefix
        system.append({"type": "text", "text": plan.layout.session})
        if plan.session_bp:
            system[-1]["cache_control"] = _CACHE
    if system:
        params["system"] = system
    if request.tools:
        params["tools"] = tools
    if request.thinking_budget:
        params["thinking"] = {"type": "enabled", "budget_tokens": request.thinking_budget}
    elif request.temperature is not None:
        params["temperature"] = request.temperature
    return params


def request_params(request: ModelRequest, *, caching: bool = True, min_tokens: int | None = None) -> dict[str, Any]:
    """The request body (without ``stream``): also the keyword arguments of the SDK's ``messages.stream``.

    The stable prefix (tools, system prompt) comes first and is the same in every session of the
    project; the session parts follow it (:mod:`agentkeel.models.caching`). Breakpoints: see
    :class:`_Plan`. ``min_tokens``: the model's minimum cacheable length (default: the catalog's)."""
    plan = _Plan(request, caching, min_tokens)
    messages = [message_to_wire(m) for m in request.messages]
    for i in plan.marked:
        messages[i] = _with_breakpoint(messages[i])
    return _params(request, plan, messages, _tools(plan))


def request_body(
    request: ModelRequest, cache: BodyCache, *, caching: bool = True, min_tokens: int | None = None
) -> bytes:
    """``encode_json({**request_params(request), "stream": True})``, byte for byte, serialising only
    the messages (and tool list) the last request through ``cache`` did not have."""
    plan = _Plan(request, caching, min_tokens)
    messages = request.messages
    parts = cache.items(messages, lambda m: encode_json(message_to_wire(m)))
    for i in plan.marked:
        parts[i] = encode_json(_with_breakpoint(message_to_wire(messages[i])))
    key = (plan.tools_bp, *((t.name, t.description, t.input_schema) for t in plan.layout.tools))
    spliced_parts = {"messages": json_array(parts)}
    if request.tools:
        spliced_parts["tools"] = cache.tools(key, lambda: encode_json(_tools(plan)))
    return spliced({**_params(request, plan, None, None), "stream": True}, spliced_parts)


# --- wire -> neutral --------------------------------------------------------------------


def block_from_wire(b: dict[str, Any]) -> ContentBlock | None:
    """A response block; kinds keel has no neutral form for (server tool results...) are None."""
    kind = b.get("type")
    if kind == "text":
        return TextBlock(text=str(b.get("text") or ""))
    if kind == "thinking":
        return ThinkingBlock(thinking=str(b.get("thinking") or ""), signature=str(b.get("signature") or ""))
    if kind == "redacted_thinking":
        return RedactedThinkingBlock(data=str(b.get("data") or ""))
    if kind == "tool_use":
        raw = b.get("input")
        return ToolUseBlock(
            id=str(b.get("id") or ""), name=str(b.get("name") or ""), input=raw if isinstance(raw, dict) else {}
        )
    return None


def message_from_wire(content: list[dict[str, Any]]) -> Message:
    blocks = [block for b in content if (block := block_from_wire(b)) is not None]
    return Message(role="assistant", content=blocks)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_from_wire(u: Any) -> Usage:
    u = u if isinstance(u, dict) else {}
    return Usage(
        input_tokens=_int(u.get("input_tokens")),
        output_tokens=_int(u.get("output_tokens")),
        cache_read_tokens=_int(u.get("cache_read_input_tokens")),
        cache_write_tokens=_int(u.get("cache_creation_input_tokens")),
    )


def response_from_wire(message: Any) -> ModelResponse:
    """A whole (non-streamed) Messages response."""
    if not isinstance(message, dict):
        raise ProviderError("stream_broken", "the response is not a message object")
    content = message.get("content")
    stop = message.get("stop_reason")
    if not isinstance(content, list) or not isinstance(stop, str):
        raise ProviderError("stream_broken", "the response is not a complete message (no content or stop_reason)")
    return ModelResponse(
        message_from_wire([b for b in content if isinstance(b, dict)]),
        stop,
        usage_from_wire(message.get("usage")),
        str(message.get("model") or ""),
    )


class MessageStream:
    """Folds the events of one streamed response: ``feed`` returns the text to show now,
    ``response`` the whole message once the stream has ended, or raises if it never completed."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.started = False
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.model = ""

    def feed(self, kind: str | None, data: Any) -> list[TextChunk]:
        if not isinstance(data, dict):
            return []
        kind = kind or data.get("type")
        if kind == "error":
            from agentkeel.models._errors import from_stream_error  # a failure: loaded then

            raise from_stream_error(data, endpoint=self.endpoint)
        if kind == "message_start":
            message = data.get("message") or {}
            self.started = True
            self.model = str(message.get("model") or "")
            self.usage = dict(message.get("usage") or {})
            return []
        if not self.started:
            if kind == "ping":
                return []
            raise ProviderError("stream_broken", f"{self.endpoint} sent '{kind}' before message_start")
        if kind == "content_block_start":
            block = data.get("content_block")
            if isinstance(block, dict):
                self.blocks[_int(data.get("index"))] = dict(block)
        elif kind == "content_block_delta":
            return self._delta(_int(data.get("index")), data.get("delta") or {})
        elif kind == "content_block_stop":
            self._finish_block(_int(data.get("index")))
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            self.stop_reason = delta.get("stop_reason") or self.stop_reason
            # usage on message_delta is cumulative: each figure given replaces the one from message_start
            self.usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
        return []  # ping, message_stop and event types this version does not know

    def _delta(self, index: int, delta: dict[str, Any]) -> list[TextChunk]:
        block = self.blocks.get(index)
        if block is None:
            raise ProviderError("stream_broken", f"{self.endpoint} sent a delta for block {index} before its start")
        kind = delta.get("type")
        if kind == "text_delta" and block.get("type") == "text":
            text = str(delta.get("text") or "")
            block["text"] = str(block.get("text") or "") + text
            return [TextChunk(text)] if text else []
        if kind == "thinking_delta" and block.get("type") == "thinking":
            text = str(delta.get("thinking") or "")
            block["thinking"] = str(block.get("thinking") or "") + text
            return [TextChunk(text, "thinking")] if text else []
        if kind == "signature_delta" and block.get("type") == "thinking":
            block["signature"] = str(delta.get("signature") or "")
        elif kind == "input_json_delta":
            self.json_parts.setdefault(index, []).append(str(delta.get("partial_json") or ""))
        return []

    def _finish_block(self, index: int) -> None:
        parts = self.json_parts.pop(index, None)
        block = self.blocks.get(index)
        if block is None or not parts:
            return
        raw = "".join(parts)
        if not raw.strip():
            return
        try:
            block["input"] = json.loads(raw)
        except ValueError:
            block["input"] = {"_unparsed_arguments": raw}

    def response(self) -> ModelResponse:
        if not self.started:
            raise ProviderError("stream_broken", f"{self.endpoint} answered 200 with an empty body (no message)")
        if self.stop_reason is None:
            raise ProviderError(
                "stream_broken", f"the response stream from {self.endpoint} ended before the message was complete"
            )
        for index in list(self.json_parts):
            self._finish_block(index)
        content = [self.blocks[i] for i in sorted(self.blocks)]
        return ModelResponse(message_from_wire(content), self.stop_reason, usage_from_wire(self.usage), self.model)
