"""OpenAI-compatible Chat Completions through the official ``openai`` SDK (the ``sdk`` transport;
keel's own client in :mod:`agentkeel.models.openai_wire` is the default). The SDK is imported in
the constructor; the request body and the folding of chunks are shared with the wire client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agentkeel.core.provider import ModelRequest, ProviderError, StreamChunk
from agentkeel.models._errors import (
    from_stream_error,
    sdk_status_error,
    sdk_transport_error,
    timed_out,
    unreachable,
)
from agentkeel.models.endpoints import CONNECT_TIMEOUT_S, DEFAULT_TIMEOUT_S, OpenAIEndpoint, shown_url
from agentkeel.models.openai_format import (
    STOP_REASONS,
    ChunkAccumulator,
    messages_to_wire,
    request_params,
)

if TYPE_CHECKING:
    import openai

__all__ = ["STOP_REASONS", "ChunkAccumulator", "OpenAIChatProvider", "messages_to_wire", "request_params"]


class OpenAIChatProvider:
    name = "openai"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        endpoint: OpenAIEndpoint | None = None,
    ) -> None:
        import openai

        ep = endpoint or OpenAIEndpoint(
            base_url=base_url or OpenAIEndpoint.base_url, api_key=api_key, timeout_s=timeout_s
        )
        self._sdk = openai
        self._client: openai.AsyncOpenAI = openai.AsyncOpenAI(
            api_key=ep.api_key or "not-needed",
            organization=ep.organization,
            project=ep.project,
            base_url=ep.base_url,
            default_headers=dict(ep.custom_headers) or None,
            max_retries=0,
            timeout=openai.Timeout(ep.timeout_s, connect=min(CONNECT_TIMEOUT_S, ep.timeout_s)),
        )
        self.endpoint = ep.base_url
        self.key_hint = ep.key_hint
        self.timeout_s = ep.timeout_s

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        sdk = self._sdk
        acc = ChunkAccumulator(shown_url(self.endpoint))
        started = False
        try:
            stream = await self._client.chat.completions.create(**request_params(request))
            async for chunk in stream:
                started = True
                for piece in acc.add(chunk.to_dict()):
                    yield piece
        except sdk.APIStatusError as e:
            raise sdk_status_error(e, endpoint=self.endpoint, model=request.model, key_hint=self.key_hint) from None
        except sdk.APITimeoutError:
            raise timed_out(self.endpoint, self.timeout_s, waiting_for="data" if started else "response") from None
        except sdk.APIConnectionError as e:
            if started:  # the SDK reports a body cut mid-way as a connection error
                raise ProviderError("stream_broken", f"response stream broke: {e}") from None
            raise unreachable(self.endpoint, str(e) or type(e).__name__) from None
        except sdk.APIError as e:  # an {"error": ...} chunk mid-stream
            body: Any = e.body
            raise from_stream_error(
                {"error": body} if isinstance(body, dict) else {"error": {"message": str(e)}}, endpoint=self.endpoint
            ) from None
        except (OSError, ValueError, RuntimeError) as e:
            raise ProviderError("stream_broken", f"response stream broke: {type(e).__name__}: {e}") from None
        except Exception as e:  # the SDK's HTTP stack, unwrapped
            transport = sdk_transport_error(e, endpoint=self.endpoint, timeout_s=self.timeout_s)
            if transport is None:
                raise
            raise transport from None
        yield acc.response()

    async def aclose(self) -> None:
        await self._client.close()
