"""Anthropic Messages API through the official ``anthropic`` SDK (the ``sdk`` transport; keel's own
client in :mod:`agentkeel.models.anthropic_wire` is the default). The SDK is imported in the
constructor; request and response conversion is shared with the wire client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from agentkeel.core.provider import ModelRequest, ModelResponse, ProviderError, StreamChunk, TextChunk
from agentkeel.models._errors import (
    from_stream_error,
    sdk_status_error,
    sdk_transport_error,
    timed_out,
    unreachable,
)
from agentkeel.models.anthropic_format import (
    block_to_wire,
    message_from_wire,
    request_params,
    usage_from_wire,
)
from agentkeel.models.endpoints import CONNECT_TIMEOUT_S, DEFAULT_TIMEOUT_S, AnthropicEndpoint

if TYPE_CHECKING:
    import anthropic

__all__ = ["AnthropicProvider", "block_to_wire", "message_from_wire", "request_params", "usage_from_wire"]


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        auth_token: str | None = None,
        base_url: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        caching: bool = True,
        endpoint: AnthropicEndpoint | None = None,
    ) -> None:
        import anthropic

        ep = endpoint or AnthropicEndpoint(
            base_url=base_url or AnthropicEndpoint.base_url, api_key=api_key, auth_token=auth_token, timeout_s=timeout_s
        )
        self._sdk = anthropic
        self._client: anthropic.AsyncAnthropic = anthropic.AsyncAnthropic(
            api_key=ep.api_key,
            auth_token=ep.auth_token,
            base_url=ep.base_url,
            default_headers=ep.extra_headers() or None,
            max_retries=0,
            timeout=anthropic.Timeout(ep.timeout_s, connect=min(CONNECT_TIMEOUT_S, ep.timeout_s)),
        )
        self.endpoint = ep.base_url
        self.key_hint = ep.key_hint
        self.timeout_s = ep.timeout_s
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
                if not started:  # the SDK asserts on an empty body
                    raise ProviderError(
                        "stream_broken", f"{self.endpoint} answered 200 with an empty body (no message)"
                    )
                final = await stream.get_final_message()
        except sdk.APIStatusError as e:
            if e.status_code < 300:  # an error event mid-stream (overloaded_error...), after a 200
                raise from_stream_error(e.body, endpoint=self.endpoint) from None
            raise sdk_status_error(e, endpoint=self.endpoint, model=request.model, key_hint=self.key_hint) from None
        except sdk.APITimeoutError:
            raise timed_out(self.endpoint, self.timeout_s, waiting_for="data" if started else "response") from None
        except sdk.APIConnectionError as e:
            if started:  # the SDK reports a body cut mid-way as a connection error
                raise ProviderError("stream_broken", f"response stream broke: {e}") from None
            raise unreachable(self.endpoint, str(e) or type(e).__name__) from None
        except (sdk.APIError, OSError, ValueError, RuntimeError) as e:
            raise ProviderError("stream_broken", f"response stream broke: {type(e).__name__}: {e}") from None
        except Exception as e:  # the SDK's HTTP stack, unwrapped
            transport = sdk_transport_error(e, endpoint=self.endpoint, timeout_s=self.timeout_s)
            if transport is None:
                raise
            raise transport from None
        if final.stop_reason is None:
            raise ProviderError("stream_broken", "response stream ended before the message was complete")
        yield ModelResponse(
            message=message_from_wire([b.to_dict() for b in final.content]),
            stop_reason=final.stop_reason,
            usage=usage_from_wire(final.usage.to_dict()),
            model=final.model,
        )

    async def aclose(self) -> None:
        await self._client.close()
