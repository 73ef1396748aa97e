"""Pruning never costs more than it saves (#35 item 4): something new is pruned only when the saving
exceeds the prompt-cache rewrite it causes, which in practice is at a compaction; what was pruned
once stays pruned."""

from __future__ import annotations

import asyncio

from agentkeel.config.settings import ReliabilitySettings
from agentkeel.core.events import EventBus
from agentkeel.core.extensions import Extension
from agentkeel.core.provider import ModelRequest
from agentkeel.core.types import Message, ToolResultBlock, ToolUseBlock
from agentkeel.reliability.pruning import DUPLICATE, context_pruning, pays_off
from agentkeel.reliability.state import ReliabilityState


def test_the_rule() -> None:
    # the measured case: ~120k cached tokens rewritten to save 97 -> never worth it
    assert not pays_off(rewritten=120_000, saved=97, requests_left=50)
    assert not pays_off(rewritten=120_000, saved=97, requests_left=10**6)  # the horizon is capped
    # nothing cached from the pruned block on (a compaction rewrote the view): free, always done
    assert pays_off(rewritten=0, saved=97, requests_left=1)
    # a saving close to the rewrite, or a smaller one over many requests to come, pays
    assert pays_off(rewritten=2_000, saved=1_900, requests_left=1)
    assert not pays_off(rewritten=2_000, saved=1_500, requests_left=1)
    assert pays_off(rewritten=10_000, saved=1_000, requests_left=200)
    assert not pays_off(rewritten=10_000, saved=1_000, requests_left=2)
    assert not pays_off(rewritten=500, saved=0, requests_left=5)  # nothing saved: not worth a rewrite


def _turn(i: int, path: str, result: str) -> list[Message]:
    return [
        Message(role="assistant", content=[ToolUseBlock(id=f"t{i}", name="Read", input={"file_path": path})]),
        Message(role="user", content=[ToolResultBlock(tool_use_id=f"t{i}", content=result)]),
    ]


def _send(ext: Extension, messages: list[Message]) -> ModelRequest:
    hook = ext.before_request
    assert hook is not None
    request = ModelRequest(model="m", system="", messages=messages, tools=[], max_tokens=100)

    async def go() -> ModelRequest:
        return await hook(request)

    return asyncio.run(go())


def _results(request: ModelRequest) -> dict[str, str]:
    return {b.tool_use_id: b.text() for m in request.messages for b in m.tool_results()}


def test_a_duplicate_far_back_waits_for_the_compaction_and_then_stays_pruned() -> None:
    state = ReliabilityState(
        config=ReliabilitySettings(pruneProtectTurns=1), context_window=200_000, last_input_tokens=150_000
    )
    ext = context_pruning(EventBus(), state)

    def send(messages: list[Message]) -> ModelRequest:
        return _send(ext, messages)

    early = "small early result " * 5  # ~95 characters saved by pruning it
    history = [Message.user("go"), *_turn(0, "/p/a.py", early)]
    for i in range(1, 40):
        history += _turn(i, f"/p/big{i}.py", "x" * 12_000)  # ~470 kB cached after the early read
    first = send(history)
    assert _results(first)["t0"] == early  # nothing to prune yet

    # the same call again: pruning t0 would rewrite every cached message after it to save ~95
    # characters; it is left as it was (the request keeps its cached prefix byte for byte)
    grown = [*history, *_turn(40, "/p/a.py", early), *_turn(41, "/p/c.py", "y")]
    second = send(grown)
    assert _results(second)["t0"] == early
    assert second.messages[: len(history)] == history

    # a compaction starts the view over (a new first message): the whole view is written anew,
    # so pruning costs nothing more and t0 goes
    compacted = [Message.user("<keel-context-carryover>summary</keel-context-carryover>"), *grown[1:]]
    third = send(compacted)
    assert _results(third)["t0"] == DUPLICATE

    # from then on it stays pruned: the next request has the same prefix, byte for byte
    fourth = send([*compacted, *_turn(42, "/p/d.py", "z")])
    assert _results(fourth)["t0"] == DUPLICATE
    assert fourth.messages[: len(third.messages)] == third.messages


def test_early_in_a_session_pruning_still_pays() -> None:
    """Little cached after the duplicate and many requests to come: pruned at once."""
    state = ReliabilityState(
        config=ReliabilitySettings(pruneProtectTurns=1, pruneAtPercent=0),
        context_window=200_000,
        last_input_tokens=5_000,
    )
    ext = context_pruning(EventBus(), state)
    big = "A" * 6_000
    history = [Message.user("go"), *_turn(0, "/p/a.py", big), *_turn(1, "/p/b.py", "b")]
    _send(ext, history)
    grown = [*history, *_turn(2, "/p/a.py", big), *_turn(3, "/p/c.py", "c")]
    out = _send(ext, grown)
    assert _results(out)["t0"] == DUPLICATE
