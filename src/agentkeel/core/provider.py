"""The one interface every model provider implements.

A provider turns a :class:`ModelRequest` into a stream of :class:`StreamChunk` items and
ends the stream with exactly one :class:`ModelResponse`. It assembles the final message
itself, so a stream that breaks mid-way never yields a half message: the provider raises
:class:`ProviderError` and the caller retries or reports.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal, Protocol

import msgspec

from agentkeel.core.types import Message, ToolSpec, Usage


class ModelRequest(msgspec.Struct, frozen=True):
    model: str  # the provider's own model id (no "provider:" prefix)
    system: str
    messages: list[Message]
    tools: list[ToolSpec]
    max_tokens: int
    thinking_budget: int | None = None
    temperature: float | None = None


class TextChunk(msgspec.Struct, frozen=True):
    text: str
    kind: Literal["text", "thinking"] = "text"


class ModelResponse(msgspec.Struct, frozen=True):
    message: Message
    stop_reason: str | None
    usage: Usage = msgspec.field(default_factory=Usage)
    model: str = ""


StreamChunk = TextChunk | ModelResponse

ErrorKind = Literal[
    "rate_limit",  # 429
    "overloaded",  # 529 / 503, or an overloaded_error event mid-stream
    "server",  # other 5xx, or a server error event mid-stream
    "conflict",  # 409
    "timeout",  # 408, or no data within the read timeout
    "connection",  # unreachable, refused, reset before the response began
    "stream_broken",  # the response stream ended before the message was complete (or was empty)
    "auth",  # 401/403
    "not_found",  # unknown model or wrong endpoint
    "prompt_too_long",  # the request does not fit the model's context window (see PromptTooLongError)
    "bad_request",  # other 400/413/422
    "other",
]

RETRYABLE: frozenset[str] = frozenset(
    {"rate_limit", "overloaded", "server", "conflict", "timeout", "connection", "stream_broken"}
)


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


class PromptTooLongError(ProviderError):
    """The request is larger than the model's context window (Anthropic's 400 "prompt is too long",
    OpenAI's ``context_length_exceeded``). Not retried as is: the context has to shrink first.
    ``tokens`` and ``limit`` are the figures the server gave, when it gave them."""

    def __init__(
        self, message: str, *, status: int | None = None, tokens: int | None = None, limit: int | None = None
    ) -> None:
        super().__init__("prompt_too_long", message, status=status)
        self.tokens = tokens
        self.limit = limit


class Provider(Protocol):
    """Streams one model response. Implementations live in :mod:`agentkeel.models`."""

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]: ...

    async def aclose(self) -> None: ...
