"""The request validators walk only what is new (a request repeats the last one's messages), and
still catch a defect in an old message: one changed in place since they saw it, or one that is
a different message with the same place in the list."""

from __future__ import annotations

import asyncio
import sys
from types import FrameType
from typing import Any

from msgspec.structs import replace

from agentkeel.core.events import EventBus, Notice
from agentkeel.core.extensions import Extension
from agentkeel.core.provider import ModelRequest
from agentkeel.core.types import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agentkeel.reliability.messages import (
    EMPTY_PLACEHOLDER,
    empty_sanitizer,
    paired,
    pairing_validator,
    thinking_validator,
)
from agentkeel.reliability.state import ReliabilityState


def _turn(i: int) -> list[Message]:
    use = ToolUseBlock(id=f"t{i}", name="Read", input={"file_path": f"/p/m{i}.py"})
    return [
        Message(role="assistant", content=[TextBlock(text=f"step {i}"), use]),
        Message(role="user", content=[ToolResultBlock(tool_use_id=f"t{i}", content=f"body {i}")]),
    ]


class Validators:
    """The three validators of one session, in the loop's order, and the notices they raise."""

    def __init__(self) -> None:
        bus, state = EventBus(), ReliabilityState()
        self.notices: list[str] = []
        bus.subscribe(lambda e: self.notices.append(e.message) if isinstance(e, Notice) else None)
        self.exts: list[Extension] = [f(bus, state) for f in (thinking_validator, empty_sanitizer, pairing_validator)]

    def __call__(self, messages: list[Message], thinking: int | None = None) -> ModelRequest:
        request = ModelRequest(model="m", system="", messages=messages, tools=[], max_tokens=100)
        request = replace(request, thinking_budget=thinking)
        for ext in self.exts:
            assert ext.before_request is not None
            request = asyncio.run(ext.before_request(request))
        return request


def _conversation(turns: int) -> list[Message]:
    out = [Message.user("go")]
    for i in range(turns):
        out += _turn(i)
    return out


def test_an_old_message_changed_in_place_is_checked_again() -> None:
    check = Validators()
    messages = _conversation(30)
    for n in range(5, 30):  # the session grows; every request is valid and passes unchanged
        request = check(messages[: 2 * n + 1])
        assert request.messages == messages[: 2 * n + 1]
    assert check.notices == []
    # an extension changes an old message in place: an empty text block in it
    messages[7].content.append(TextBlock(text="  "))
    request = check(messages)
    assert TextBlock(text="  ") not in request.messages[7].content, "the empty block went out"
    assert any("empty content block" in n for n in check.notices)
    # and an old assistant turn gains a tool_use nobody answered
    messages[9].content.append(ToolUseBlock(id="late", name="Bash", input={}))
    request = check(messages)
    assert paired(request.messages)
    assert any("request repaired" in n for n in check.notices)


def test_a_different_message_in_an_old_place_is_checked() -> None:
    check = Validators()
    messages = _conversation(20)
    check(messages)
    swapped = list(messages)
    swapped[5] = Message(role="assistant", content=[TextBlock(text=""), *messages[5].content])  # another message
    request = check(swapped)
    assert request.messages[5].content == messages[5].content
    swapped[7] = Message(role="assistant", content=[TextBlock(text=" ")])  # and one left empty
    swapped[8] = Message.user("no result")
    request = check(swapped)
    assert request.messages[7].content == [TextBlock(text=EMPTY_PLACEHOLDER)]
    # thinking after text in an old assistant message, with thinking on: thinking goes first
    think = ThinkingBlock(thinking="hm", signature="sig")
    swapped = [*messages, Message(role="assistant", content=[think, TextBlock(text="ok")]), Message.user("next")]
    check(swapped, thinking=1024)
    swapped[3] = Message(role="assistant", content=[*messages[3].content, think])
    request = check(swapped, thinking=1024)
    assert request.messages[3].content[0] == think
    # and with thinking off, it is left out
    request = check(swapped)
    assert think not in request.messages[3].content


def test_the_last_message_keeps_its_own_rule_as_the_session_grows() -> None:
    check = Validators()
    messages = _conversation(10)
    check(messages)
    ending = [*messages, Message(role="assistant", content=[TextBlock(text="done  ")])]
    assert check(ending).messages[-1].content == [TextBlock(text="done")]  # trailing blank off the final text
    more = [*messages, Message(role="assistant", content=[TextBlock(text="done  ")]), Message.user("again")]
    assert check(more).messages[-2].content == [TextBlock(text="done  ")]  # not final any more: left as it is


def _calls(fn: Any) -> int:
    calls = [0]

    def count(frame: FrameType, what: str, arg: Any) -> None:
        if what in ("call", "c_call"):
            calls[0] += 1

    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls[0]


def test_a_request_at_turn_400_costs_what_one_at_turn_20_did() -> None:
    """Counted work (Python calls) of the validators for one request, the session grown one turn
    since the last: flat, where walking every message made it grow with the session (20x here)."""
    check = Validators()
    messages = _conversation(401)
    for n in range(1, 20):
        check(messages[: 2 * n + 1])
    early = _calls(lambda: check(messages[:41]))
    for n in range(21, 400):
        check(messages[: 2 * n + 1])
    late = _calls(lambda: check(messages[:801]))
    assert late < early * 1.5, (early, late)


class Watched:
    """A provider whose stream says when it is closed (its ``finally`` ran)."""

    name = "watched"

    def __init__(self, steps: list[Any]) -> None:
        from agentkeel.models.fake.script import Script
        from agentkeel.models.scripted import ScriptedProvider

        self.inner = ScriptedProvider(Script.from_data({"steps": steps}))
        self.open = 0

    async def stream(self, request: ModelRequest) -> Any:
        self.open += 1
        try:
            async for chunk in self.inner.stream(request):
                yield chunk
        finally:
            self.open -= 1

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_response_stream_is_closed_before_its_message_is_applied(tmp_path: Any) -> None:
    """The loop closes the provider's stream (and the retry layer's) itself once the final response
    is in, rather than leaving it to the garbage collector's callback on a later turn of the loop."""
    from agentkeel.core.events import AssistantMessage
    from agentkeel.core.loop import Agent
    from agentkeel.core.run import LoopConfig
    from agentkeel.core.tools import Services, ToolContext, ToolRegistry
    from agentkeel.tools import builtin_tools

    provider = Watched([{"text": "look", "tool_calls": [{"name": "LS", "input": {"path": str(tmp_path)}}]}, "done"])
    bus = EventBus()
    open_at_message: list[int] = []
    bus.subscribe(lambda e: open_at_message.append(provider.open) if isinstance(e, AssistantMessage) else None)
    ctx = ToolContext(cwd=tmp_path, session_id="t", services=Services(), emit=bus.emit)
    agent = Agent(provider, ToolRegistry(builtin_tools()), LoopConfig(model="scripted"), bus=bus, context=ctx)
    result = await agent.run("go")
    assert result.subtype == "success"
    assert open_at_message == [0, 0]


def test_event_ids_are_version_4_uuids_written_as_uuid_writes_them() -> None:
    import uuid

    from agentkeel.core.events import new_id

    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


async def test_which_tools_are_shown_is_asked_once_per_request(tmp_path: Any) -> None:
    """The context point builds the request to measure it, then the loop builds it to send it: the
    tools shown are decided once for both (a hiding extension is asked once per tool and request)."""
    from agentkeel.core.extensions import Extensions
    from agentkeel.core.loop import Agent
    from agentkeel.core.run import LoopConfig
    from agentkeel.core.tools import Services, ToolContext, ToolRegistry
    from agentkeel.models.fake.script import Script
    from agentkeel.models.scripted import ScriptedProvider
    from agentkeel.tools import builtin_tools

    asked: list[str] = []
    seen: list[list[str]] = []

    def hide(tool: Any) -> bool:
        asked.append(tool.name)
        return tool.name == "Write"

    async def fit(request: ModelRequest, error: Any) -> None:
        seen.append([t.name for t in request.tools])
        return None

    exts = Extensions([Extension("hider", hide_tool=hide), Extension("measure", fit_context=fit)])
    ls = {"name": "LS", "input": {"path": str(tmp_path)}}
    provider = ScriptedProvider(Script.from_data({"steps": [{"tool_calls": [ls]}, {"tool_calls": [ls]}, "done"]}))
    ctx = ToolContext(cwd=tmp_path, session_id="t", services=Services(), emit=lambda e: None)
    registry = ToolRegistry(builtin_tools())
    agent = Agent(provider, registry, LoopConfig(model="scripted"), extensions=exts, context=ctx)
    result = await agent.run("go")
    assert result.subtype == "success"
    tools = len(registry.visible())  # LS is registered (the model's call of it runs) but not offered
    assert len(asked) == 3 * tools, "asked more than once per tool and request"
    assert len(seen) == 3 and all("Write" not in names and "LS" not in names and "Glob" in names for names in seen)
