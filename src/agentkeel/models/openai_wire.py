"""OpenAI-compatible Chat Completions over keel's own HTTP client (the default ``wire`` transport):
OpenAI, Ollama, vLLM, llama.cpp server, LM Studio, OpenRouter, DeepSeek. Streamed tool-call deltas
by index, ``stream_options.include_usage``, reasoning deltas, an error chunk mid-stream. No SDK.
Each turn serialises only its new messages."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any

from agentkeel.core.provider import ModelRequest, Provider, StreamChunk
from agentkeel.models._body import BodyCache
from agentkeel.models._http import WHOLE_BODY, HttpSession, Target, parse_data
from agentkeel.models.catalog import ModelInfo
from agentkeel.models.endpoints import OpenAIEndpoint, openai_endpoint, shown_url
from agentkeel.models.factory import pick_transport, sdk_missing
from agentkeel.models.openai_format import ChunkAccumulator, completion_from_wire, request_body


def make(info: ModelInfo, env: Mapping[str, str], transport: str | None) -> Provider:
    """An OpenAI-compatible provider (``openai``, ``ollama``, ``vllm``...): keel's own client, or
    the official SDK's (``transport``)."""
    how = pick_transport(transport, env)
    endpoint = openai_endpoint(info.provider, env)
    if how == "wire":
        return OpenAIWireProvider(endpoint)
    try:
        from agentkeel.models.openai_chat import OpenAIChatProvider

        return OpenAIChatProvider(endpoint=endpoint)
    except ImportError:
        raise sdk_missing("openai") from None


class OpenAIWireProvider:
    name = "openai"

    def __init__(self, endpoint: OpenAIEndpoint) -> None:
        self.config = endpoint
        self.endpoint = endpoint.base_url
        self._headers = endpoint.headers()
        self._http = HttpSession(endpoint.base_url)
        self._body = BodyCache()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        target = Target(
            url=f"{self.endpoint}/chat/completions",
            endpoint=self.endpoint,
            model=request.model,
            key_hint=self.config.key_hint,
            timeout_s=self.config.timeout_s,
        )
        acc = ChunkAccumulator(shown_url(self.endpoint))
        whole: Any = None
        async with aclosing(self._http.post_sse(target, self._headers, request_body(request, self._body))) as events:
            async for event in events:
                if event.data.startswith("[DONE]"):
                    continue  # read on to the end of the body: the connection goes back to the pool
                data = parse_data(event, self.endpoint)
                if event.event == WHOLE_BODY:  # a server that ignored "stream": true
                    whole = data
                    continue
                for chunk in acc.add(data):
                    yield chunk
        yield completion_from_wire(whole, self.endpoint) if whole is not None else acc.response()

    async def aclose(self) -> None:
        await self._http.aclose()
