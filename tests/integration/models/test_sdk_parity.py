"""Parity: every fake-llm scenario through keel's own wire clients and through the official SDKs.

The SDK path is the oracle. Each script is played to its end through ``stream_with_retry`` (as the
loop uses it) on both paths and in both wire formats; the neutral messages, stop reasons, usage,
streamed text, retry counts and error kinds must be the same, and so must the request bodies the
server received. A difference means the wire client drifted from what the SDKs do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentkeel.core.events import Event, StreamRetry
from agentkeel.core.provider import ModelRequest, ModelResponse, Provider, ProviderError, StreamChunk, TextChunk
from agentkeel.core.retry import RetryPolicy, stream_with_retry
from agentkeel.core.types import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolSpec, ToolUseBlock
from agentkeel.models.anthropic_messages import AnthropicProvider
from agentkeel.models.anthropic_wire import AnthropicWireProvider
from agentkeel.models.endpoints import AnthropicEndpoint, OpenAIEndpoint
from agentkeel.models.fake.script import EXHAUSTED
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.models.openai_chat import OpenAIChatProvider
from agentkeel.models.openai_wire import OpenAIWireProvider
from scenarios import twenty_step_session, wire_scenarios

FAKE_KEY = "sk-test-not-a-real-key"
FAST = RetryPolicy(max_retries=4, base_delay_s=0.001, max_delay_s=0.01)
STALL_TIMEOUT_S = 0.5  # the stalled_stream scenario waits this long for data, then retries

REQUEST = ModelRequest(
    model="fake-model",
    system="be brief",
    messages=[
        Message.user("read it"),
        Message(
            role="assistant",
            content=[
                ThinkingBlock(thinking="plan", signature="sig"),
                TextBlock(text="ok"),
                ToolUseBlock(id="t1", name="Read", input={"file_path": "/a"}),
            ],
        ),
        Message(role="user", content=[ToolResultBlock(tool_use_id="t1", content="contents"), TextBlock(text="go")]),
    ],
    tools=[ToolSpec(name="Read", description="read", input_schema={"type": "object", "properties": {}})],
    max_tokens=100,
)


def make_provider(path: str, wire: str, server: FakeLLMServer) -> Provider:
    if wire == "anthropic":
        a = AnthropicEndpoint(base_url=server.url, api_key=FAKE_KEY, timeout_s=STALL_TIMEOUT_S)
        return AnthropicWireProvider(a) if path == "wire" else AnthropicProvider(endpoint=a)
    o = OpenAIEndpoint(base_url=server.url + "/v1", api_key=FAKE_KEY, timeout_s=STALL_TIMEOUT_S)
    return OpenAIWireProvider(o) if path == "wire" else OpenAIChatProvider(endpoint=o)


class Recording:
    """A provider seen through the Provider seam: records the kind of every failed attempt."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name
        self.failures: list[str] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in self.inner.stream(request):
                yield chunk
        except ProviderError as err:
            self.failures.append(err.kind)
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class Played:
    outcomes: list[tuple[Any, ...]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # the kind of each failed attempt, retried or not
    bodies: list[dict[str, Any]] = field(default_factory=list)


async def play(path: str, wire: str, server: FakeLLMServer) -> Played:
    """Request after request until the script is exhausted, as the loop would (retries included)."""
    provider = Recording(make_provider(path, wire, server))
    played = Played()
    try:
        for _ in range(40):
            retries: list[StreamRetry] = []
            streamed: list[str] = []

            def emit(event: Event, retries: list[StreamRetry] = retries, streamed: list[str] = streamed) -> None:
                if isinstance(event, StreamRetry):
                    retries.append(event)
                    streamed.clear()  # what a reader shows is superseded by the retry

            try:
                final: ModelResponse | None = None
                async for chunk in stream_with_retry(provider, REQUEST, FAST, emit):
                    if isinstance(chunk, TextChunk):
                        streamed.append(f"{chunk.kind}:{chunk.text}")
                    else:
                        final = chunk
                assert final is not None
                if final.message.text() == EXHAUSTED:
                    break
                played.outcomes.append(
                    ("ok", final.message, final.stop_reason, final.usage, final.model, "".join(streamed), len(retries))
                )
            except ProviderError as err:
                played.outcomes.append(("error", err.kind, type(err).__name__, err.status, len(retries)))
    finally:
        await provider.aclose()
    played.failures = provider.failures
    played.bodies = [r["body"] for r in server.cursor.requests]
    return played


def all_scenarios() -> dict[str, dict[str, Any]]:
    scenarios = wire_scenarios()
    scenarios["twenty_step_session"] = twenty_step_session(Path("/tmp/keel-parity"), "http://127.0.0.1:9/health")
    return scenarios


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
@pytest.mark.parametrize("name", sorted(all_scenarios()))
async def test_wire_client_matches_sdk(name: str, wire: str, fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    script = all_scenarios()[name]
    sdk = await play("sdk", wire, fake_llm(script))
    ours = await play("wire", wire, fake_llm(script))
    assert ours.outcomes == sdk.outcomes
    assert ours.failures == sdk.failures
    assert ours.bodies == sdk.bodies
    assert any(o[0] == "ok" for o in ours.outcomes)  # the scenario was played, not refused wholesale
