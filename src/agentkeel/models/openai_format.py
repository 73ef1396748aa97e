"""The OpenAI Chat Completions wire format, sans-IO: a neutral request as the JSON body, and
:class:`ChunkAccumulator`, which folds ``chat.completion.chunk`` objects (plain dicts) into text
chunks and one final :class:`ModelResponse`. Tool-call deltas are keyed by index; reasoning comes as
``reasoning_content`` (DeepSeek, vLLM) or ``reasoning`` (OpenRouter, Ollama). Used by the wire
client and the SDK adapter."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from agentkeel.core.provider import ModelRequest, ModelResponse, ProviderError, TextChunk
from agentkeel.core.types import (
    ContentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from agentkeel.models._body import BodyCache, encode_json, json_array, spliced
from agentkeel.models.caching import Layout

STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
REASONING_KEYS = ("reasoning_content", "reasoning")

# --- neutral -> wire --------------------------------------------------------------------


def _image_url(block: ImageBlock) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{block.media_type};base64,{block.data}"}}


def _tool_call(block: ToolUseBlock) -> dict[str, Any]:
    return {"id": block.id, "type": "function", "function": {"name": block.name, "arguments": json.dumps(block.input)}}


def message_to_wire(m: Message) -> list[dict[str, Any]]:
    """One neutral message as Chat Completions messages: tool results become ``tool`` messages."""
    if m.role == "assistant":
        text = "".join(b.text for b in m.content if isinstance(b, TextBlock))
        msg: dict[str, Any] = {"role": "assistant", "content": text or None}
        calls = [_tool_call(b) for b in m.content if isinstance(b, ToolUseBlock)]
        if calls:
            msg["tool_calls"] = calls
        return [msg]
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, ToolResultBlock):
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": b.tool_use_id,
                    "content": ("Error: " if b.is_error else "") + b.text(),
                }
            )
            images = [x for x in b.content if isinstance(x, ImageBlock)] if isinstance(b.content, list) else []
            parts += [_image_url(x) for x in images]
        elif isinstance(b, TextBlock):
            parts.append({"type": "text", "text": b.text})
        elif isinstance(b, ImageBlock):
            parts.append(_image_url(b))
    if parts:
        only_text = all(p["type"] == "text" for p in parts)
        out.append({"role": "user", "content": "\n".join(p["text"] for p in parts) if only_text else parts})
    return out


def messages_to_wire(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        out += message_to_wire(m)
    return out


def _tools(layout: Layout) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}
        for t in layout.tools
    ]


def _system(layout: Layout) -> str:
    """The stable system prompt, then the session parts (the date, the skills listing): what
    changes between sessions comes last (:mod:`agentkeel.models.caching`)."""
    return "\n\n".join(p for p in (layout.system, layout.session) if p)


def _params(request: ModelRequest, messages: Any, tools: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "max_tokens": request.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = tools
    if request.temperature is not None:
        params["temperature"] = request.temperature
    return params


def request_params(request: ModelRequest) -> dict[str, Any]:
    """The request body: also the keyword arguments of the SDK's ``chat.completions.create``."""
    layout = Layout(request)
    return _params(request, messages_to_wire(_system(layout), request.messages), _tools(layout))


def request_body(request: ModelRequest, cache: BodyCache) -> bytes:
    """``encode_json(request_params(request))``, byte for byte, serialising only the messages (and
    tool list) the last request through ``cache`` did not have."""
    layout = Layout(request)
    system = _system(layout)
    head = [encode_json({"role": "system", "content": system})] if system else []
    parts = cache.items(request.messages, lambda m: b",".join(encode_json(w) for w in message_to_wire(m)))
    spliced_parts = {"messages": json_array(head + parts)}
    if request.tools:
        key = tuple((t.name, t.description, t.input_schema) for t in layout.tools)
        spliced_parts["tools"] = cache.tools(key, lambda: encode_json(_tools(layout)))
    return spliced(_params(request, None, None), spliced_parts)


# --- wire -> neutral --------------------------------------------------------------------


class _PartialCall(msgspec.Struct):
    id: str = ""
    name: str = ""
    arguments: str = ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_from_wire(u: dict[str, Any]) -> Usage:
    details = u.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    cached = cached or _int(u.get("prompt_cache_hit_tokens"))  # DeepSeek
    return Usage(
        input_tokens=max(0, _int(u.get("prompt_tokens")) - cached),
        output_tokens=_int(u.get("completion_tokens")),
        cache_read_tokens=cached,
    )


class ChunkAccumulator(msgspec.Struct):
    """Folds the chunks of one streamed completion (choice 0) into one neutral response."""

    endpoint: str = ""
    text: list[str] = msgspec.field(default_factory=list)
    reasoning: list[str] = msgspec.field(default_factory=list)
    calls: dict[int, _PartialCall] = msgspec.field(default_factory=dict)
    finish: str | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    model: str = ""

    def add(self, chunk: Any) -> list[TextChunk]:
        if not isinstance(chunk, dict):
            return []
        if chunk.get("error") is not None:  # an error chunk mid-stream (OpenRouter, vLLM, LiteLLM...)
            from agentkeel.models._errors import from_stream_error  # a failure: loaded then

            raise from_stream_error(chunk, endpoint=self.endpoint)
        self.model = str(chunk.get("model") or "") or self.model
        if isinstance(chunk.get("usage"), dict):
            self.usage = usage_from_wire(chunk["usage"])
        out: list[TextChunk] = []
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or _int(choice.get("index")) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                out += self._delta(delta)
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])
        return out

    def _delta(self, delta: dict[str, Any]) -> list[TextChunk]:
        out: list[TextChunk] = []
        reasoning = next((delta[k] for k in REASONING_KEYS if isinstance(delta.get(k), str) and delta[k]), "")
        if reasoning:
            self.reasoning.append(reasoning)
            out.append(TextChunk(reasoning, "thinking"))
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.text.append(content)
            out.append(TextChunk(content))
        for tc in delta.get("tool_calls") or []:
            if not isinstance(tc, dict):
                continue
            call = self.calls.setdefault(_int(tc.get("index")), _PartialCall())
            if tc.get("id"):
                call.id = str(tc["id"])
            function = tc.get("function")
            if isinstance(function, dict):
                call.name += str(function.get("name") or "")
                call.arguments += str(function.get("arguments") or "")
        return out

    def response(self) -> ModelResponse:
        if self.finish is None:
            if not (self.text or self.reasoning or self.calls):
                raise ProviderError("stream_broken", f"{self.endpoint or 'the server'} answered with an empty stream")
            raise ProviderError("stream_broken", "response stream ended before a finish_reason")
        blocks: list[ContentBlock] = []
        if self.reasoning:
            blocks.append(ThinkingBlock(thinking="".join(self.reasoning)))
        if self.text:
            blocks.append(TextBlock(text="".join(self.text)))
        for n, call in sorted(self.calls.items()):
            try:
                args = json.loads(call.arguments) if call.arguments.strip() else {}
            except json.JSONDecodeError:
                args = {"_unparsed_arguments": call.arguments}
            if not isinstance(args, dict):
                args = {"_unparsed_arguments": call.arguments}
            blocks.append(ToolUseBlock(id=call.id or f"call_{n}", name=call.name, input=args))
        stop = STOP_REASONS.get(self.finish, "end_turn")
        if self.calls and stop == "end_turn":
            stop = "tool_use"
        return ModelResponse(Message(role="assistant", content=blocks), stop, self.usage, self.model)


def completion_from_wire(completion: Any, endpoint: str = "") -> ModelResponse:
    """A whole (non-streamed) ``chat.completion``, folded as if it were one chunk."""
    acc = ChunkAccumulator(endpoint)
    if isinstance(completion, dict):
        choices = []
        for choice in completion.get("choices") or []:
            if isinstance(choice, dict) and isinstance(choice.get("message"), dict):
                message = dict(choice["message"])
                calls = message.get("tool_calls") or []
                message["tool_calls"] = [dict(c, index=n) for n, c in enumerate(calls) if isinstance(c, dict)]
                choices.append(
                    {"index": choice.get("index", 0), "delta": message, "finish_reason": choice.get("finish_reason")}
                )
        acc.add({**completion, "choices": choices})
    return acc.response()
