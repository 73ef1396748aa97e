"""Where the Anthropic wire puts its cache breakpoints, the minimum cacheable lengths it reads from
the model catalog, and the session parts (date, skills listing) it sends after the stable prefix."""

from __future__ import annotations

import json
from typing import Any

from agentkeel.core.provider import ModelRequest
from agentkeel.core.types import Message, TextBlock, ToolResultBlock, ToolSpec, ToolUseBlock
from agentkeel.models import anthropic_format, openai_format
from agentkeel.models._body import BodyCache, encode_json
from agentkeel.models.caching import session_part, split_session
from agentkeel.models.catalog import min_cache_tokens, model_info

LONG = (
    "x" * 4000
)  # tools + system: about 2,000-2,700 tokens, over Sonnet 4.5's minimum (1,024), under Haiku 4.5's (4,096)
TOOLS = [
    ToolSpec(name="Bash", description="run " + LONG, input_schema={"type": "object"}),
    ToolSpec(
        name="Skill",
        description="Run a skill." + session_part("The following skills are available:\n- release: cut one"),
        input_schema={"type": "object"},
    ),
]
SYSTEM = "You are keel. " + LONG + session_part("Today's date: 2026-11-28")


def _turns(parallel: int) -> list[Message]:
    calls = [ToolUseBlock(id=f"t{i}", name="Bash", input={"command": f"echo {i}"}) for i in range(parallel)]
    results = [ToolResultBlock(tool_use_id=f"t{i}", content=f"{i}") for i in range(parallel)]
    return [
        Message.user("go"),
        Message(role="assistant", content=calls),
        Message(role="user", content=results),
    ]


def _marks(body: dict[str, Any]) -> list[str]:
    out = [f"tool:{t['name']}" for t in body.get("tools", []) if "cache_control" in t]
    out += [f"system:{i}" for i, b in enumerate(body.get("system", [])) if "cache_control" in b]
    for i, m in enumerate(body["messages"]):
        out += [f"message:{i}:{j}" for j, b in enumerate(m["content"]) if "cache_control" in b]
    return out


def test_minimum_cacheable_lengths_are_catalog_data() -> None:
    assert min_cache_tokens("anthropic", "claude-sonnet-4-5") == 1024
    assert min_cache_tokens("anthropic", "claude-opus-4-5") == 4096
    assert min_cache_tokens("anthropic", "claude-haiku-4-5-20251001") == 4096  # a dated id: its family's
    assert min_cache_tokens("anthropic", "claude-3-5-haiku-20241022") == 2048
    assert min_cache_tokens("anthropic", "claude-some-future-model") == 1024
    assert min_cache_tokens("openai", "gpt-4.1") == 0
    assert model_info("anthropic", "claude-haiku-4-5").min_cache_tokens == 4096


def test_breakpoints_at_the_stable_ends_and_at_both_tails() -> None:
    request = ModelRequest("claude-sonnet-4-5", SYSTEM, _turns(12), TOOLS, 1024)
    body = anthropic_format.request_params(request)
    # stable system end, session block end, the previous turn's tail (the first user message), the last tail
    assert _marks(body) == ["system:0", "system:1", "message:0:0", "message:2:11"]
    # a first request (no previous turn) has a slot left: the end of the tools
    first = ModelRequest("claude-sonnet-4-5", SYSTEM, [Message.user("go")], TOOLS, 1024)
    assert _marks(anthropic_format.request_params(first)) == ["tool:Skill", "system:0", "system:1", "message:0:0"]


def test_a_stable_prefix_under_the_model_minimum_gets_no_breakpoint() -> None:
    """Haiku 4.5 caches nothing under 4,096 tokens: a breakpoint there would write nothing. The
    conversation's breakpoints stay (they cache once the request is long enough)."""
    request = ModelRequest("claude-haiku-4-5", SYSTEM, _turns(2), TOOLS, 1024)
    assert _marks(anthropic_format.request_params(request)) == ["message:0:0", "message:2:1"]
    # a prefix over the minimum keeps them, whatever the model
    big = ModelRequest("claude-haiku-4-5", "You are keel. " + LONG * 4, _turns(2), TOOLS, 1024)
    assert _marks(anthropic_format.request_params(big))[:1] == ["system:0"]


def test_session_parts_go_after_the_stable_prefix() -> None:
    request = ModelRequest("claude-sonnet-4-5", SYSTEM, _turns(1), TOOLS, 1024)
    body = anthropic_format.request_params(request)
    assert [t["description"] for t in body["tools"]] == ["run " + LONG, "Run a skill."]
    stable, session = body["system"]
    assert stable["text"] == "You are keel. " + LONG and "cache_control" in stable
    assert "cache_control" in session  # the sessions of a day, nothing edited, share it too
    assert session["text"] == (
        "<session-context>\nToday's date: 2026-11-28\n</session-context>\n\n"
        "<session-context>\nThe following skills are available:\n- release: cut one\n</session-context>"
    )
    # the OpenAI format too: stable system text first, the session parts at its end, bare tools
    oa = openai_format.request_params(request)
    assert oa["messages"][0]["content"].startswith("You are keel. ")
    assert oa["messages"][0]["content"].endswith(session["text"])
    assert [t["function"]["description"] for t in oa["tools"]] == ["run " + LONG, "Run a skill."]


def test_split_session_cuts_at_the_last_mark() -> None:
    assert split_session("plain") == ("plain", "")
    text = "a" + session_part("one") + "b" + session_part("two")
    stable, part = split_session(text)
    assert part == "<session-context>\ntwo\n</session-context>"
    assert stable.endswith("b")


def test_spliced_body_matches_the_plain_encoding_with_marked_earlier_turns() -> None:
    cache = BodyCache()
    messages = _turns(3)
    for extra in range(4):
        messages = [
            *messages,
            Message(role="assistant", content=[TextBlock(text=f"next {extra}")]),
            Message.user(f"more {extra}"),
        ]
        request = ModelRequest("claude-sonnet-4-5", SYSTEM, messages, TOOLS, 1024)
        plain = encode_json({**anthropic_format.request_params(request), "stream": True})
        assert anthropic_format.request_body(request, cache) == plain
        assert json.loads(plain)["messages"][-3]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_no_system_prompt_means_none_is_made_up() -> None:
    """The Agent SDK's default ``--system-prompt ""``: the tools keep their listings."""
    request = ModelRequest("claude-sonnet-4-5", "", _turns(1), TOOLS, 1024)
    body = anthropic_format.request_params(request)
    assert "system" not in body
    assert body["tools"][1]["description"] == TOOLS[1].description
