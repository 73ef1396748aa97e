"""OpenAI-compatible Chat Completions through the official ``openai`` SDK.

Covers OpenAI, Ollama, vLLM, llama.cpp server, LM Studio and OpenRouter (``base_url``).
The conversion functions are pure; the SDK is imported lazily.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentkeel.core.provider import ModelRequest, ModelResponse, ProviderError, StreamChunk, TextChunk
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
from agentkeel.providers._errors import from_status, unreachable

if TYPE_CHECKING:
    import openai

STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def _image_url(block: ImageBlock) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{block.media_type};base64,{block.data}"}}


def messages_to_wire(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        if m.role == "assistant":
            text = "".join(b.text for b in m.content if isinstance(b, TextBlock))
            msg: dict[str, Any] = {"role": "assistant", "content": text or None}
            calls = [
                {"id": b.id, "type": "function", "function": {"name": b.name, "arguments": json.dumps(b.input)}}
                for b in m.content
                if isinstance(b, ToolUseBlock)
            ]
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
            continue
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


def request_params(request: ModelRequest) -> dict[str, Any]:
    params: dict[str, Any] = {
        "model": request.model,
        "messages": messages_to_wire(request.system, request.messages),
        "max_tokens": request.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in request.tools
        ]
    if request.temperature is not None:
        params["temperature"] = request.temperature
    return params


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class StreamAccumulator:
    """Folds chat.completion.chunk objects into one neutral response."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str = ""

    def add(self, chunk: Any) -> list[TextChunk]:
        out: list[TextChunk] = []
        self.model = getattr(chunk, "model", "") or self.model
        if getattr(chunk, "usage", None) is not None:
            u = chunk.usage
            details = getattr(u, "prompt_tokens_details", None)
            cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
            self.usage = Usage(
                input_tokens=int(u.prompt_tokens or 0) - cached,
                output_tokens=int(u.completion_tokens or 0),
                cache_read_tokens=cached,
            )
        for choice in chunk.choices or []:
            delta = choice.delta
            reasoning = (delta.model_extra or {}).get("reasoning_content") if delta is not None else None
            if reasoning:
                self.reasoning.append(str(reasoning))
                out.append(TextChunk(str(reasoning), "thinking"))
            if delta is not None and delta.content:
                self.text.append(delta.content)
                out.append(TextChunk(delta.content))
            for tc in (delta.tool_calls or []) if delta is not None else []:
                call = self.calls.setdefault(tc.index, _PartialCall())
                if tc.id:
                    call.id = tc.id
                if tc.function is not None:
                    call.name += tc.function.name or ""
                    call.arguments += tc.function.arguments or ""
            if choice.finish_reason:
                self.finish = choice.finish_reason
        return out

    def response(self) -> ModelResponse:
        if self.finish is None:
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


class OpenAIChatProvider:
    name = "openai"

    def __init__(self, *, api_key: str | None, base_url: str | None = None, timeout_s: float = 600.0) -> None:
        import openai

        self._sdk = openai
        self._client: openai.AsyncOpenAI = openai.AsyncOpenAI(
            api_key=api_key or "not-needed", base_url=base_url, max_retries=0, timeout=timeout_s
        )
        self.endpoint = str(self._client.base_url)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        sdk = self._sdk
        acc = StreamAccumulator()
        started = False
        try:
            stream = await self._client.chat.completions.create(**request_params(request))
            async for chunk in stream:
                started = True
                for piece in acc.add(chunk):
                    yield piece
        except sdk.APIStatusError as e:
            raise from_status(
                e.status_code, e.message, e.response.headers, endpoint=self.endpoint, model=request.model
            ) from None
        except sdk.APIConnectionError as e:
            if started:  # the SDK reports a body cut mid-way as a connection error
                raise ProviderError("stream_broken", f"response stream broke: {e}") from None
            raise unreachable(self.endpoint, str(e) or type(e).__name__) from None
        except (sdk.APIError, OSError, ValueError, RuntimeError) as e:
            raise ProviderError("stream_broken", f"response stream broke: {type(e).__name__}: {e}") from None
        except Exception as e:
            if type(e).__module__.startswith(("httpx", "httpcore", "h11")):
                raise ProviderError("stream_broken", f"response stream broke: {type(e).__name__}: {e}") from None
            raise
        yield acc.response()

    async def aclose(self) -> None:
        await self._client.close()
