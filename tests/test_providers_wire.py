"""Provider adapters against the fake server: the official SDK clients on the real wire formats."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentkeel.core.events import Event, EventBus, StreamRetry
from agentkeel.core.loop import Agent, LoopConfig
from agentkeel.core.provider import ModelRequest, ModelResponse, Provider, ProviderError, StreamChunk, TextChunk
from agentkeel.core.retry import RetryPolicy
from agentkeel.core.tools import Services, ToolContext, ToolRegistry
from agentkeel.core.types import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolSpec, ToolUseBlock
from agentkeel.fakellm.server import FakeLLMServer
from agentkeel.providers.anthropic_messages import AnthropicProvider
from agentkeel.providers.openai_chat import OpenAIChatProvider

WIRES = ["anthropic", "openai"]


def provider_for(wire: str, server: FakeLLMServer) -> Provider:
    if wire == "anthropic":
        return AnthropicProvider(api_key="sk-ant-test-not-a-real-key", base_url=server.url)
    return OpenAIChatProvider(api_key="sk-test-not-a-real-key", base_url=server.url + "/v1")


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


@pytest.mark.parametrize("wire", WIRES)
async def test_text_thinking_and_tool_calls(wire: str, fake_llm: Callable[[Any], FakeLLMServer]) -> None:
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
    provider = provider_for(wire, server)
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


async def test_anthropic_request_shape_and_prompt_caching(fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    server = fake_llm({"steps": ["fine"]})
    provider = provider_for("anthropic", server)
    await collect(provider)
    body = server.cursor.requests[0]["body"]
    assert body["stream"] is True and body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assistant = body["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use"]
    assert body["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "contents",
        "is_error": False,
    }


async def test_openai_request_shape(fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    server = fake_llm({"steps": ["fine"]})
    await collect(provider_for("openai", server))
    msgs = server.cursor.requests[0]["body"]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "user"]
    assert msgs[2]["tool_calls"][0]["function"] == {"name": "Read", "arguments": '{"file_path": "/a"}'}
    assert msgs[3] == {"role": "tool", "tool_call_id": "t1", "content": "contents"}


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("step", "kind", "retry_after"),
    [
        ({"error": {"status": 429, "retry_after": 0.25}}, "rate_limit", 0.25),
        ({"error": {"status": 529}}, "overloaded", None),
        ({"error": {"status": 500}}, "server", None),
        ({"error": {"status": 401}}, "auth", None),
        ({"error": {"status": 404}}, "not_found", None),
        ({"error": {"status": 400, "message": "prompt is too long"}}, "bad_request", None),
        ({"text": "a long answer that breaks", "break_after": 3}, "stream_broken", None),
    ],
)
async def test_errors_are_classified(
    wire: str, step: dict[str, Any], kind: str, retry_after: float | None, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": [step]})
    with pytest.raises(ProviderError) as err:
        await collect(provider_for(wire, server))
    assert err.value.kind == kind
    assert err.value.retry_after == retry_after
    if kind == "not_found":
        assert "check --model" in str(err.value)


@pytest.mark.parametrize("wire", WIRES)
async def test_unreachable(wire: str) -> None:
    provider: Provider = (
        AnthropicProvider(api_key="k", base_url="http://127.0.0.1:9")
        if wire == "anthropic"
        else OpenAIChatProvider(api_key="k", base_url="http://127.0.0.1:9/v1")
    )
    with pytest.raises(ProviderError) as err:
        await collect(provider)
    assert err.value.kind == "connection" and "cannot reach http://127.0.0.1:9" in str(err.value)


@pytest.mark.parametrize("wire", WIRES)
async def test_loop_retries_over_the_wire(wire: str, tmp_path: Any, fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    server = fake_llm(
        {
            "steps": [
                {"error": {"status": 429, "retry_after": 0.01}},
                {"text": "half of a reply that is cut", "break_after": 3},
                {"error": {"status": 529}},
                "whole reply",
            ]
        }
    )
    events: list[Event] = []
    bus = EventBus()
    bus.subscribe(events.append)
    agent = Agent(
        provider_for(wire, server),
        ToolRegistry(),
        LoopConfig(model="fake-model", retry=RetryPolicy(base_delay_s=0.001, max_delay_s=0.01)),
        bus=bus,
        context=ToolContext(cwd=tmp_path, session_id="s", services=Services(), emit=bus.emit),
    )
    result = await agent.run("hi")
    assert result.subtype == "success" and result.result == "whole reply"
    assert [e.attempt for e in events if isinstance(e, StreamRetry)] == [1, 2, 3]
    assert [m.text() for m in agent.messages] == ["hi", "whole reply"]
