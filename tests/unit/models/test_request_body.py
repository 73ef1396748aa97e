"""Request bodies built from cached per-message JSON are the plain encoding, byte for byte, turn
after turn; and a turn encodes only what is new."""

from __future__ import annotations

import json

import pytest

from agentkeel.core.provider import ModelRequest
from agentkeel.core.types import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from agentkeel.models import anthropic_format, openai_format
from agentkeel.models._body import BodyCache, encode_json

HOLE = "\x00keel:spliced\x00"  # what the splicer leaves in its skeleton: a model may say it too


def conversation(turns: int) -> list[Message]:
    messages = [Message.user("hello \ud800 lone surrogate, and the hole: " + HOLE)]
    for i in range(turns):
        messages.append(
            Message(
                role="assistant",
                content=[
                    ThinkingBlock(thinking=f"think {i}", signature="sig"),
                    TextBlock(text=f'step {i} "quoted" ünïcode'),
                    ToolUseBlock(id=f"t{i}", name="Bash", input={"command": f"echo {i}", "tools": HOLE}),
                ],
            )
        )
        result: str | list[TextBlock | ImageBlock] = (
            f"out {i}\n" if i % 2 else [TextBlock(text="img"), ImageBlock(media_type="image/png", data="AAAA")]
        )
        messages.append(
            Message(role="user", content=[ToolResultBlock(tool_use_id=f"t{i}", content=result, is_error=i == 3)])
        )
    return messages


TOOLS = [
    ToolSpec(name="Bash", description="run", input_schema={"type": "object", "properties": {"command": {}}}),
    ToolSpec(name="Read", description="read", input_schema={"type": "object"}),
]


@pytest.mark.parametrize("system", ["you are keel", ""])
@pytest.mark.parametrize("tools", [TOOLS, []])
def test_spliced_bodies_equal_the_plain_encoding_every_turn(system: str, tools: list[ToolSpec]) -> None:
    messages = conversation(6)
    anthropic, openai = BodyCache(), BodyCache()
    for n in range(0, len(messages) + 1):
        request = ModelRequest(model="m", system=system, messages=messages[:n], tools=tools, max_tokens=100)
        for caching in (True, False):
            plain = encode_json({**anthropic_format.request_params(request, caching=caching), "stream": True})
            assert anthropic_format.request_body(request, anthropic, caching=caching) == plain
        assert openai_format.request_body(request, openai) == encode_json(openai_format.request_params(request))
    json.loads(openai_format.request_body(request, openai))  # valid JSON, the hole text kept as text


def test_a_turn_encodes_only_its_new_messages() -> None:
    cache = BodyCache()
    encoded: list[str] = []

    def to_json(item: str) -> bytes:
        encoded.append(item)
        return encode_json(item)

    items = [f"m{i}" for i in range(200)]
    for n in range(1, 201):
        assert cache.items(items[:n], to_json) == [encode_json(i) for i in items[:n]]
    assert len(encoded) == 200  # each once, not 1 + 2 + ... + 200
    edited = [*items[:100], "changed", *items[101:]]
    cache.items(edited, to_json)
    assert encoded[200:] == ["changed"]  # an edited view (compaction, rewind) costs what changed
