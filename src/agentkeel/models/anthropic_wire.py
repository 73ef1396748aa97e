"""Anthropic Messages API over keel's own HTTP client (the default ``wire`` transport): streamed
SSE, text, thinking with signatures, redacted thinking, tool use, prompt caching, usage with cache
reads and writes, an ``error`` event mid-stream. No SDK. Each turn serialises only its new messages."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any

from agentkeel.core.provider import ModelRequest, Provider, StreamChunk
from agentkeel.models._body import BodyCache
from agentkeel.models._http import WHOLE_BODY, HttpSession, Target, parse_data
from agentkeel.models.anthropic_format import MessageStream, request_body, response_from_wire
from agentkeel.models.catalog import ModelInfo
from agentkeel.models.endpoints import AnthropicEndpoint, anthropic_endpoint, shown_url
from agentkeel.models.factory import pick_transport, sdk_missing


def make(info: ModelInfo, env: Mapping[str, str], transport: str | None) -> Provider:
    """The ``anthropic`` provider: keel's own client, or the official SDK's (``transport``)."""
    how = pick_transport(transport, env)
    endpoint = anthropic_endpoint(env)
    if how == "wire":
        return AnthropicWireProvider(endpoint)
    try:
        from agentkeel.models.anthropic_messages import AnthropicProvider

        return AnthropicProvider(endpoint=endpoint)
    except ImportError:
        raise sdk_missing("anthropic") from None


class AnthropicWireProvider:
    name = "anthropic"

    def __init__(self, endpoint: AnthropicEndpoint, *, caching: bool = True) -> None:
        self.config = endpoint
        self.endpoint = endpoint.base_url
        self.caching = caching
        self._headers = endpoint.headers()
        self._http = HttpSession(endpoint.base_url)
        self._body = BodyCache()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        body = request_body(request, self._body, caching=self.caching)
        target = Target(
            url=f"{self.endpoint}/v1/messages",
            endpoint=self.endpoint,
            model=request.model,
            key_hint=self.config.key_hint,
            timeout_s=self.config.timeout_s,
        )
        state = MessageStream(shown_url(self.endpoint))
        whole: Any = None
        async with aclosing(self._http.post_sse(target, self._headers, body)) as events:
            async for event in events:
                data = parse_data(event, self.endpoint)
                if event.event == WHOLE_BODY:  # a server that ignored "stream": true
                    whole = data
                    continue
                for chunk in state.feed(event.event, data):
                    yield chunk
        yield response_from_wire(whole) if whole is not None else state.response()

    async def aclose(self) -> None:
        await self._http.aclose()
