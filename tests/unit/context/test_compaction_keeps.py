"""Compaction, in-process (#35 item 1): stubs of an earlier compaction are dropped, not kept; the
earlier summary reaches the next summariser and is carried when no new summary can be written; the
carry-over names the transcript; our own structured instruction covers what must be kept."""

from __future__ import annotations

import asyncio
import itertools

from agentkeel.context.compaction import (
    CLEARED,
    SUMMARY_SYSTEM,
    Plan,
    compact,
    drop_cleared,
    earlier_summary,
)
from agentkeel.context.tokens import Estimator
from agentkeel.core.types import Message, ToolResultBlock, ToolUseBlock


def _turn(i: int, size: int = 3000) -> list[Message]:
    return [
        Message(role="assistant", content=[ToolUseBlock(id=f"t{i}", name="Read", input={"file_path": f"/f{i}"})]),
        Message(role="user", content=[ToolResultBlock(tool_use_id=f"t{i}", content=f"content {i} " + "z" * size)]),
    ]


def _session(turns: range) -> list[Message]:
    return [Message.user("task"), *[m for i in turns for m in _turn(i)]]


PLAN = Plan(target=3000, keep=1500, summary_max=300, summariser_input=50_000)


def _stubs(messages: list[Message]) -> int:
    return sum(
        1 for m in messages for b in m.content if isinstance(b, ToolResultBlock) and b.text().startswith(CLEARED)
    )


def test_clear_tool_results_drops_the_stubs_of_the_compaction_before() -> None:
    """The floor after a compaction does not rise: a stub lives one compaction cycle."""
    est = Estimator("claude-x")
    first = asyncio.run(compact(_session(range(8)), PLAN, est, strategy="clear-tool-results", summarise=None, extra=[]))
    assert first is not None and _stubs(first.messages) == 7  # t0..t6; the last turn kept whole
    later = [*first.messages, *[m for i in range(8, 16) for m in _turn(i)]]
    second = asyncio.run(compact(later, PLAN, est, strategy="clear-tool-results", summarise=None, extra=[]))
    assert second is not None
    ids = {b.id for m in second.messages for b in m.content if isinstance(b, ToolUseBlock)}
    assert not ids & {f"t{i}" for i in range(7)}  # the old calls and their stubs are gone
    assert _stubs(second.messages) == 8  # t7..t14 cleared now, t15 kept whole
    assert est.messages_tokens(second.messages) <= est.messages_tokens(first.messages) + 8 * 120
    roles = [m.role for m in second.messages]
    assert all(a != b for a, b in itertools.pairwise(roles))  # roles still alternate


def test_drop_cleared_keeps_pairs_whole_and_roles_alternating() -> None:
    stub = ToolResultBlock(tool_use_id="a", content=f"{CLEARED} Read(file_path=/x); run it again]")
    msgs = [
        Message.user("task"),
        Message(role="assistant", content=[ToolUseBlock(id="a", name="Read", input={})]),
        Message(role="user", content=[stub]),
        Message(role="assistant", content=[ToolUseBlock(id="b", name="Read", input={})]),
        Message(role="user", content=[ToolResultBlock(tool_use_id="b", content="kept")]),
    ]
    out = drop_cleared(msgs)
    assert [m.role for m in out] == ["user", "assistant", "user"]
    assert [b.id for m in out for b in m.content if isinstance(b, ToolUseBlock)] == ["b"]


def test_the_earlier_summary_feeds_the_next_and_survives_a_failing_summariser() -> None:
    est = Estimator("claude-x")
    asked: list[str] = []

    async def summarise(text: str, max_tokens: int) -> str:
        asked.append(text)
        return "NOTE-ONE: the failing test is test_kiwi"

    first = asyncio.run(
        compact(_session(range(8)), PLAN, est, strategy="summarize", summarise=summarise, extra=[], source="/t/s.jsonl")
    )
    assert first is not None and first.stage == "summary"
    assert earlier_summary(first.messages) == "NOTE-ONE: the failing test is test_kiwi"
    assert "/t/s.jsonl" in str(first.messages[0])  # the carry-over points at the full transcript

    async def broken(text: str, max_tokens: int) -> str:
        raise RuntimeError("the provider is down")

    later = [*first.messages, *[m for i in range(8, 16) for m in _turn(i)]]
    asyncio.run(compact(later, PLAN, est, strategy="summarize", summarise=summarise, extra=[]))
    assert "NOTE-ONE: the failing test is test_kiwi" in asked[-1]  # the next summariser sees it
    second = asyncio.run(compact(later, PLAN, est, strategy="summarize", summarise=broken, extra=[]))
    assert second is not None and second.stage in ("clear-tool-results", "truncate")
    assert "NOTE-ONE: the failing test is test_kiwi" in str(second.messages[0])  # carried as it was


def test_the_instruction_covers_what_must_be_kept() -> None:
    text = SUMMARY_SYSTEM.lower()
    for item in ("every message and instruction from the user", "verbatim", "decisions", "files", "errors"):
        assert item in text, item
    assert "facts from tool output" in text and "open tasks" in text
