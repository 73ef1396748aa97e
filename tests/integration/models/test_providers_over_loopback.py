"""Providers against the fake server over loopback, on both transports: keel's own wire clients
(the default) and the official SDK clients (the ``sdk`` transport)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentkeel.core.events import Event, EventBus, StreamRetry
from agentkeel.core.loop import Agent
from agentkeel.core.provider import ModelRequest, ModelResponse, Provider, ProviderError, StreamChunk, TextChunk
from agentkeel.core.retry import RetryPolicy
from agentkeel.core.run import LoopConfig
from agentkeel.core.tools import Services, ToolContext, ToolRegistry
from agentkeel.core.types import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolSpec, ToolUseBlock
from agentkeel.models.anthropic_messages import AnthropicProvider
from agentkeel.models.anthropic_wire import AnthropicWireProvider
from agentkeel.models.endpoints import AnthropicEndpoint, OpenAIEndpoint
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.models.openai_chat import OpenAIChatProvider
from agentkeel.models.openai_wire import OpenAIWireProvider

WIRES = ["anthropic", "openai"]
TRANSPORTS = ["wire", "sdk"]


def provider_at(wire: str, transport: str, base_url: str) -> Provider:
    if wire == "anthropic":
        a = AnthropicEndpoint(base_url=base_url, api_key="sk-ant-test-not-a-real-key")
        return AnthropicWireProvider(a) if transport == "wire" else AnthropicProvider(endpoint=a)
    o = OpenAIEndpoint(base_url=base_url + "/v1", api_key="sk-test-not-a-real-key")
    return OpenAIWireProvider(o) if transport == "wire" else OpenAIChatProvider(endpoint=o)


def provider_for(wire: str, server: FakeLLMServer, transport: str = "wire") -> Provider:
    return provider_at(wire, transport, server.url)


REQUEST = ModelRequest(
    model="fake-model",
    system="be brief",
    messages=[
        Message.user("read it"),
        Message(
            role="assistant",
            content=[
                ThinkingBlock(thinking="plan", signature="s"),
                TextBlock(text="ok"),
                ToolUseBlock(id="t1", name="Read", input={"file_path": "/a"}),
            ],
        ),
        Message(role="user", content=[ToolResultBlock(tool_use_id="t1", content="contents"), TextBlock(text="go")]),
    ],
    tools=[ToolSpec(name="Read", description="read", input_schema={"type": "object", "properties": {}})],
    max_tokens=100,
)


async def collect(provider: Provider, request: ModelRequest = REQUEST) -> list[StreamChunk]:
    return [c async for c in provider.stream(request)]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("wire", WIRES)
async def test_text_thinking_and_tool_calls(
    wire: str, transport: str, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm(
        {
            "steps": [
                {
                    "thinking": "let me think",
                    "text": "Reading.",
                    "tool_calls": [
                        {"name": "Read", "input": {"file_path": "/x", "n": [1, 2]}},
                        {"name": "LS", "input": {"path": "/"}},
                    ],
                    "usage": {"input_tokens": 120, "output_tokens": 30},
                }
            ]
        }
    )
    provider = provider_for(wire, server, transport)
    chunks = await collect(provider)
    await provider.aclose()
    text = "".join(c.text for c in chunks if isinstance(c, TextChunk) and c.kind == "text")
    thinking = "".join(c.text for c in chunks if isinstance(c, TextChunk) and c.kind == "thinking")
    assert (text, thinking) == ("Reading.", "let me think")
    final = chunks[-1]
    assert isinstance(final, ModelResponse) and final.stop_reason == "tool_use"
    uses = final.message.tool_uses()
    assert [(u.name, u.input) for u in uses] == [("Read", {"file_path": "/x", "n": [1, 2]}), ("LS", {"path": "/"})]
    assert final.usage.output_tokens == 30 and final.usage.input_tokens == 120


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_anthropic_request_shape_and_prompt_caching(
    transport: str, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": ["fine"]})
    provider = provider_for("anthropic", server, transport)
    await collect(provider)
    body = server.cursor.requests[0]["body"]
    # tools and system prompt far below the model's minimum cacheable length (catalog data): no
    # breakpoint there, it would write nothing (tests/unit/models/test_cache_breakpoints.py)
    assert body["stream"] is True and "cache_control" not in body["system"][-1]
    assert "cache_control" not in body["tools"][-1]
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assistant = body["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use"]
    assert body["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "contents",
        "is_error": False,
    }


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_openai_request_shape(transport: str, fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    server = fake_llm({"steps": ["fine"]})
    await collect(provider_for("openai", server, transport))
    msgs = server.cursor.requests[0]["body"]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "user"]
    assert msgs[2]["tool_calls"][0]["function"] == {"name": "Read", "arguments": '{"file_path": "/a"}'}
    assert msgs[3] == {"role": "tool", "tool_call_id": "t1", "content": "contents"}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("step", "kind", "retry_after"),
    [
        ({"error": {"status": 429, "retry_after": 0.25}}, "rate_limit", 0.25),
        ({"error": {"status": 529}}, "overloaded", None),
        ({"error": {"status": 500}}, "server", None),
        ({"error": {"status": 401}}, "auth", None),
        ({"error": {"status": 404}}, "not_found", None),
        ({"error": {"status": 429, "retry_after_ms": 40}}, "rate_limit", 0.04),
        ({"error": {"status": 408}}, "timeout", None),
        ({"error": {"status": 409}}, "conflict", None),
        ({"error": {"status": 400, "message": "prompt is too long: 9 tokens > 8 maximum"}}, "prompt_too_long", None),
        ({"error": {"status": 400, "message": "messages: field required"}}, "bad_request", None),
        ({"text": "a long answer that breaks", "break_after": 3}, "stream_broken", None),
        ({"text": "a long answer that is reset", "reset_after": 3}, "stream_broken", None),
        ({"empty_body": True}, "stream_broken", None),
        ({"text": "overloaded mid-way", "stream_error": {"type": "overloaded_error", "after": 3}}, "overloaded", None),
        (
            {"text": "rate limited mid-way", "stream_error": {"type": "rate_limit_error", "after": 3}},
            "rate_limit",
            None,
        ),
    ],
)
async def test_errors_are_classified(
    wire: str,
    transport: str,
    step: dict[str, Any],
    kind: str,
    retry_after: float | None,
    fake_llm: Callable[[Any], FakeLLMServer],
) -> None:
    server = fake_llm({"steps": [step]})
    with pytest.raises(ProviderError) as err:
        await collect(provider_for(wire, server, transport))
    assert err.value.kind == kind
    assert err.value.retry_after == retry_after
    if kind == "not_found":
        assert "check --model" in str(err.value)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("wire", WIRES)
async def test_unreachable(wire: str, transport: str) -> None:
    provider = provider_at(wire, transport, "http://127.0.0.1:9")
    with pytest.raises(ProviderError) as err:
        await collect(provider)
    assert err.value.kind == "connection" and "cannot reach http://127.0.0.1:9" in str(err.value)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("wire", WIRES)
async def test_loop_retries_over_the_wire(
    wire: str, transport: str, tmp_path: Any, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm(
        {
            "steps": [
                {"error": {"status": 429, "retry_after": 0.01}},
                {"text": "half of a reply that is cut", "break_after": 3},
                {"error": {"status": 529}},
                {"text": "half of an overloaded reply", "stream_error": {"type": "overloaded_error", "after": 4}},
                {"empty_body": True},
                "whole reply",
            ]
        }
    )
    events: list[Event] = []
    bus = EventBus()
    bus.subscribe(events.append)
    agent = Agent(
        provider_for(wire, server, transport),
        ToolRegistry(),
        LoopConfig(model="fake-model", retry=RetryPolicy(max_retries=5, base_delay_s=0.001, max_delay_s=0.01)),
        bus=bus,
        context=ToolContext(cwd=tmp_path, session_id="s", services=Services(), emit=bus.emit),
    )
    result = await agent.run("hi")
    assert result.subtype == "success" and result.result == "whole reply"
    assert [e.attempt for e in events if isinstance(e, StreamRetry)] == [1, 2, 3, 4, 5]
    assert [m.text() for m in agent.messages] == ["hi", "whole reply"]
