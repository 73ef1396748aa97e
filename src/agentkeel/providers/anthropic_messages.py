"""Anthropic Messages API through the official ``anthropic`` SDK (streaming, tools,
thinking, prompt caching). The conversion functions are pure; the SDK is imported lazily."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agentkeel.core.provider import ModelRequest, ModelResponse, ProviderError, StreamChunk, TextChunk
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
    to_data,
)
from agentkeel.providers._errors import from_status, unreachable

if TYPE_CHECKING:
    import anthropic

_CACHE = {"type": "ephemeral"}


def _image(block: ImageBlock) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": block.media_type, "data": block.data}}


def block_to_wire(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, ImageBlock):
        return _image(block)
    if isinstance(block, ToolResultBlock):
        content: str | list[dict[str, Any]]
        if isinstance(block.content, str):
            content = block.content
        else:
            content = [
                _image(b) if isinstance(b, ImageBlock) else {"type": "text", "text": b.text} for b in block.content
            ]
        return {"type": "tool_result", "tool_use_id": block.tool_use_id, "content": content, "is_error": block.is_error}
    data: dict[str, Any] = to_data(block)
    return data


def request_params(request: ModelRequest, *, caching: bool = True) -> dict[str, Any]:
    """The keyword arguments of ``messages.stream`` for a neutral request."""
    messages: list[dict[str, Any]] = [
        {"role": m.role, "content": [block_to_wire(b) for b in m.content]} for m in request.messages
    ]
    tools: list[dict[str, Any]] = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in request.tools
    ]
    params: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens, "messages": messages}
    if request.system:
        system: list[dict[str, Any]] = [{"type": "text", "text": request.system}]
        if caching:
            system[-1]["cache_control"] = _CACHE
        params["system"] = system
    if tools:
        if caching:
            tools[-1] = dict(tools[-1], cache_control=_CACHE)
        params["tools"] = tools
    if caching and messages:
        last: list[dict[str, Any]] = messages[-1]["content"]
        if last:
            last[-1] = dict(last[-1], cache_control=_CACHE)
    if request.thinking_budget:
        params["thinking"] = {"type": "enabled", "budget_tokens": request.thinking_budget}
    elif request.temperature is not None:
        params["temperature"] = request.temperature
    return params


def message_from_wire(content: list[Any]) -> Message:
    blocks: list[ContentBlock] = []
    for b in content:
        kind = getattr(b, "type", None)
        if kind == "text":
            blocks.append(TextBlock(text=b.text))
        elif kind == "thinking":
            blocks.append(ThinkingBlock(thinking=b.thinking, signature=b.signature or ""))
        elif kind == "redacted_thinking":
            blocks.append(RedactedThinkingBlock(data=b.data))
        elif kind == "tool_use":
            raw = b.input if isinstance(b.input, dict) else {}
            blocks.append(ToolUseBlock(id=b.id, name=b.name, input=raw))
    return Message(role="assistant", content=blocks)


def usage_from_wire(u: Any) -> Usage:
    return Usage(
        input_tokens=int(getattr(u, "input_tokens", 0) or 0),
        output_tokens=int(getattr(u, "output_tokens", 0) or 0),
        cache_read_tokens=int(getattr(u, "cache_read_input_tokens", 0) or 0),
        cache_write_tokens=int(getattr(u, "cache_creation_input_tokens", 0) or 0),
    )


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str | None,
        auth_token: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        caching: bool = True,
    ) -> None:
        import anthropic

        self._sdk = anthropic
        self._client: anthropic.AsyncAnthropic = anthropic.AsyncAnthropic(
            api_key=api_key, auth_token=auth_token, base_url=base_url, max_retries=0, timeout=timeout_s
        )
        self.endpoint = str(self._client.base_url)
        self.caching = caching

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        sdk = self._sdk
        params = request_params(request, caching=self.caching)
        started = False
        try:
            async with self._client.messages.stream(**params) as stream:
                async for event in stream:
                    started = True
                    if event.type == "content_block_delta":
                        if event.delta.type == "text_delta":
                            yield TextChunk(event.delta.text)
                        elif event.delta.type == "thinking_delta":
                            yield TextChunk(event.delta.thinking, "thinking")
                final = await stream.get_final_message()
        except sdk.APIStatusError as e:
            message = e.api_message or str(e)
            raise from_status(
                e.status_code, message, e.response.headers, endpoint=self.endpoint, model=request.model
            ) from None
        except sdk.APIConnectionError as e:
            if started:  # the SDK reports a body cut mid-way as a connection error
                raise ProviderError("stream_broken", f"response stream broke: {e}") from None
            raise unreachable(self.endpoint, str(e) or type(e).__name__) from None
        except (sdk.APIError, OSError, ValueError, RuntimeError) as e:
            raise ProviderError("stream_broken", f"response stream broke: {type(e).__name__}: {e}") from None
        except Exception as e:  # transport errors of the SDK's HTTP client
            if type(e).__module__.startswith(("httpx", "httpcore", "h11")):
                raise ProviderError("stream_broken", f"response stream broke: {type(e).__name__}: {e}") from None
            raise
        if final.stop_reason is None:
            raise ProviderError("stream_broken", "response stream ended before the message was complete")
        yield ModelResponse(
            message=message_from_wire(list(final.content)),
            stop_reason=final.stop_reason,
            usage=usage_from_wire(final.usage),
            model=final.model,
        )

    async def aclose(self) -> None:
        await self._client.close()
