"""Retries for model requests: backoff with jitter, honouring retry-after."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Callable

import msgspec

from agentkeel.core.events import Event, StreamRetry
from agentkeel.core.provider import ModelRequest, ModelResponse, Provider, ProviderError, StreamChunk


class RetryPolicy(msgspec.Struct, frozen=True):
    max_retries: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    max_retry_after_s: float = 60.0

    def delay(self, attempt: int, err: ProviderError) -> float:
        if err.retry_after is not None:
            return float(min(max(err.retry_after, 0.0), self.max_retry_after_s))
        backoff: float = min(self.base_delay_s * 2.0 ** (attempt - 1), self.max_delay_s)
        return backoff * (0.5 + random.random() / 2)


async def stream_with_retry(
    provider: Provider,
    request: ModelRequest,
    policy: RetryPolicy,
    emit: Callable[[Event], None],
) -> AsyncGenerator[StreamChunk, None]:
    """Yield chunks of one response; on a retryable failure emit StreamRetry and start over.

    Chunks already yielded from a failed attempt are superseded: a reader that shows
    partial text clears it on StreamRetry. Only the final ModelResponse is ever applied.
    """
    attempt = 0
    while True:
        try:
            chunks = provider.stream(request)
            try:
                async for chunk in chunks:
                    yield chunk
                    if isinstance(chunk, ModelResponse):
                        return
            finally:  # the provider's stream ends with this one, not when the garbage collector gets to it
                close = getattr(chunks, "aclose", None)
                if close is not None:
                    await close()
            raise ProviderError("stream_broken", "the response ended without a final message")
        except ProviderError as err:
            attempt += 1
            if not err.retryable or attempt > policy.max_retries:
                raise
            delay = policy.delay(attempt, err)
            emit(StreamRetry(attempt=attempt, delay_s=round(delay, 3), error=str(err)))
            await asyncio.sleep(delay)
