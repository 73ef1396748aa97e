"""The one interface every model provider implements.

A provider turns a :class:`ModelRequest` into a stream of :class:`StreamChunk` items and
ends the stream with exactly one :class:`ModelResponse`. It assembles the final message
itself, so a stream that breaks mid-way never yields a half message: the provider raises
:class:`ProviderError` and the caller retries or reports.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

from agentkeel.core.types import Message, ToolSpec, Usage


@dataclass(frozen=True)
class ModelRequest:
    model: str  # the provider's own model id (no "provider:" prefix)
    system: str
    messages: list[Message]
    tools: list[ToolSpec]
    max_tokens: int
    thinking_budget: int | None = None
    temperature: float | None = None


@dataclass(frozen=True)
class TextChunk:
    text: str
    kind: Literal["text", "thinking"] = "text"


@dataclass(frozen=True)
class ModelResponse:
    message: Message
    stop_reason: str | None
    usage: Usage = field(default_factory=Usage)
    model: str = ""


StreamChunk = TextChunk | ModelResponse

ErrorKind = Literal[
    "rate_limit",  # 429
    "overloaded",  # 529 / 503
    "server",  # other 5xx
    "connection",  # unreachable, reset, timeout
    "stream_broken",  # the response stream ended before the message was complete
    "auth",  # 401/403
    "not_found",  # unknown model or wrong endpoint
    "bad_request",  # 400/422 (includes prompt too long)
    "other",
]

RETRYABLE: frozenset[str] = frozenset({"rate_limit", "overloaded", "server", "connection", "stream_broken"})


class ProviderError(Exception):
    """A failure talking to the model, classified so the caller can decide what to do."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE


class Provider(Protocol):
    """Streams one model response. Implementations live in :mod:`agentkeel.providers`."""

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]: ...

    async def aclose(self) -> None: ...
