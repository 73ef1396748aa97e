"""Compaction strategies over the message view (pure, but for the summariser call).

The result is the message list a :class:`~agentkeel.core.view.Compaction` event carries: a user
message with the carry-over (summary, working state, re-injected instructions) followed by the
recent turns kept verbatim. The cut is always made before an assistant message, so a tool_use and
its tool_result are never split. Strategies:

- ``clear-tool-results``: old bulky tool results become a stub naming the call that made them;
- ``truncate-oldest``: the oldest turns are dropped, no model call;
- ``summarize``: the older part is summarised, with a three-stage fallback: one full summary ->
  summaries of chunks -> truncate-oldest (no model call) when the summariser fails, times out or
  returns too much;
- ``hybrid``: clear tool results when that is enough, else summarise.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import msgspec

from agentkeel.context.tokens import SUMMARY_MARK, Estimator
from agentkeel.core.types import ContentBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock, replace

CLEARED = "[tool result cleared to save context:"
COMPACT_MARK = "<keel-compact-request>"
Summariser = Callable[[str, int], Awaitable[str]]  # (transcript, max tokens) -> summary

SUMMARY_SYSTEM = """You summarise the earlier part of a coding session so that the work can go on without it.
Write a dense summary: the user's requests and intent, what was done and found (files, functions, commands,
errors and their fixes), decisions taken and why, and what remains to do. Keep exact file paths and names."""


class SummaryFailed(Exception):
    pass


class Plan(msgspec.Struct):
    """What a compaction must achieve, in tokens of the conversation (system and tools excluded)."""

    target: int  # the messages after compaction must fit this
    keep: int  # at most this much of the recent conversation is kept verbatim
    summary_max: int  # the longest acceptable summary
    summariser_input: int  # the most one summariser request may carry
    timeout_s: float = 120.0


class Outcome(msgspec.Struct):
    messages: list[Message]
    stage: str
    summary: str = ""
    notes: tuple[str, ...] = ()


def strip_carryover(messages: list[Message]) -> list[Message]:
    """The view without the carry-over blocks of an earlier compaction (they are made anew)."""
    if not messages or messages[0].role != "user":
        return messages
    kept = [b for b in messages[0].content if not (isinstance(b, TextBlock) and b.text.startswith(SUMMARY_MARK))]
    if len(kept) == len(messages[0].content):
        return messages
    return ([Message(role="user", content=kept)] if kept else []) + messages[1:]


def _uses(messages: list[Message]) -> dict[str, ToolUseBlock]:
    return {b.id: b for m in messages for b in m.content if isinstance(b, ToolUseBlock)}


def _call_name(use: ToolUseBlock | None) -> str:
    if use is None:
        return "an earlier tool call"
    args = ", ".join(f"{k}={v}" for k, v in use.input.items() if isinstance(v, str | int | float) and len(str(v)) < 120)
    return f"{use.name}({args})"


def clear_tool_results(messages: list[Message], keep_last: int, min_chars: int = 400) -> list[Message]:
    """Replace bulky tool results outside the last ``keep_last`` messages by a stub that says how
    to get them again."""
    uses = _uses(messages)
    out: list[Message] = []
    cut = max(0, len(messages) - keep_last)
    for i, msg in enumerate(messages):
        if i >= cut or msg.role != "user":
            out.append(msg)
            continue
        blocks: list[ContentBlock] = []
        for b in msg.content:
            if isinstance(b, ToolResultBlock) and len(b.text()) >= min_chars and not b.text().startswith(CLEARED):
                stub = f"{CLEARED} {_call_name(uses.get(b.tool_use_id))}; run it again if you need the output]"
                b = replace(b, content=stub)
            blocks.append(b)
        out.append(Message(role="user", content=blocks))
    return out


def shrink_results(messages: list[Message], max_chars: int) -> list[Message]:
    """Cut every tool result longer than ``max_chars`` to its head and tail (the last resort for
    recent turns too big to keep whole)."""
    out: list[Message] = []
    for msg in messages:
        blocks: list[ContentBlock] = []
        for b in msg.content:
            if isinstance(b, ToolResultBlock) and len(b.text()) > max_chars:
                t = b.text()
                half = max_chars // 2
                b = replace(
                    b,
                    content=f"{t[:half]}\n[... {len(t) - 2 * half} characters cut to fit the context ...]\n{t[-half:]}",
                )
            blocks.append(b)
        out.append(Message(role=msg.role, content=blocks))
    return out


def split_point(messages: list[Message], est: Estimator, keep: int) -> int:
    """The index of the earliest assistant message from which the rest fits ``keep`` tokens (the
    last assistant message when nothing fits); 0 when there is no assistant message to cut at."""
    starts = [i for i, m in enumerate(messages) if m.role == "assistant" and i > 0]
    if not starts:
        return 0
    tail = 0
    best = starts[-1]
    sizes = [est.message_chars(m) for m in messages]
    for i in range(len(messages) - 1, 0, -1):
        tail += sizes[i]
        if messages[i].role == "assistant" and i in starts:
            if est.tokens(tail) > keep:
                break
            best = i
    return best


def transcript(messages: list[Message], limit_chars: int = 4000) -> str:
    """The messages as plain text for the summariser (long tool results cut)."""
    lines: list[str] = []
    for m in messages:
        for b in m.content:
            if isinstance(b, TextBlock):
                if not b.text.startswith(SUMMARY_MARK):
                    lines.append(f"{m.role}: {b.text}")
                else:
                    lines.append(f"(earlier summary) {b.text}")
            elif isinstance(b, ToolUseBlock):
                lines.append(f"assistant called {b.name} {json.dumps(b.input)[:limit_chars]}")
            elif isinstance(b, ToolResultBlock):
                t = b.text()
                if len(t) > limit_chars:
                    t = (
                        t[: limit_chars // 2]
                        + f"\n[... {len(t) - limit_chars} characters ...]\n"
                        + t[-limit_chars // 2 :]
                    )
                lines.append(f"tool result{' (error)' if b.is_error else ''}: {t}")
    return "\n".join(lines)


def chunks(text: str, max_chars: int) -> list[str]:
    out: list[str] = []
    while text:
        if len(text) <= max_chars:
            out.append(text)
            break
        cut = text.rfind("\n", 0, max_chars)
        cut = cut if cut > max_chars // 2 else max_chars
        out.append(text[:cut])
        text = text[cut:]
    return out


async def _one(summarise: Summariser, text: str, max_tokens: int, est: Estimator, timeout_s: float) -> str:
    try:
        summary = await asyncio.wait_for(summarise(text, max_tokens), timeout_s)
    except TimeoutError:
        raise SummaryFailed(f"the summariser did not answer within {timeout_s:g}s") from None
    except SummaryFailed:
        raise
    except Exception as exc:  # a provider error, a broken stream
        raise SummaryFailed(f"the summariser failed: {exc}") from None
    summary = summary.strip()
    if not summary:
        raise SummaryFailed("the summariser returned nothing")
    if est.tokens(len(summary)) > max_tokens:
        raise SummaryFailed(f"the summary was too long ({est.tokens(len(summary))} tokens > {max_tokens})")
    return summary


async def summarise_head(
    head: list[Message], plan: Plan, est: Estimator, summarise: Summariser, instructions: str = ""
) -> tuple[str, str, list[str]]:
    """(summary, stage, notes): stage ``summary``, else ``chunked``, else ``truncate`` with no summary."""
    notes: list[str] = []
    text = transcript(head)
    extra = f"\n\nFocus the summary on: {instructions}" if instructions else ""
    max_chars = int(plan.summariser_input * est.chars_per_token)
    if len(text) <= max_chars:
        try:
            return await _one(summarise, text + extra, plan.summary_max, est, plan.timeout_s), "summary", notes
        except SummaryFailed as e:
            notes.append(f"full summary failed: {e}")
    else:
        notes.append("the transcript is too long for one summary request")
    parts = chunks(text, max(2000, max_chars))
    per = max(64, plan.summary_max // max(1, len(parts)))
    try:
        pieces = [await _one(summarise, p + extra, per, est, plan.timeout_s) for p in parts]
        return "\n\n".join(pieces), "chunked", notes
    except SummaryFailed as e:
        notes.append(f"chunked summaries failed: {e}")
    return "", "truncate", notes


def carryover(stage: str, removed: int, summary: str, extra: list[str]) -> Message:
    if summary:
        head = (
            f'{SUMMARY_MARK} stage="{stage}">\nThis session continues a conversation compacted to fit the context '
            f"window ({removed} earlier messages replaced by this summary).\n<summary>\n{summary}\n</summary>"
        )
    else:
        head = (
            f'{SUMMARY_MARK} stage="{stage}">\nThis session continues a conversation compacted to fit the context '
            f"window: {removed} earlier messages were removed without a summary."
        )
    blocks: list[ContentBlock] = [TextBlock(text=head + "\n</keel-context-carryover>")]
    blocks += [TextBlock(text=f"{SUMMARY_MARK}>\n{x}\n</keel-context-carryover>") for x in extra if x]
    return Message(role="user", content=blocks)


async def compact(
    messages: list[Message],
    plan: Plan,
    est: Estimator,
    *,
    strategy: str,
    summarise: Summariser | None,
    extra: list[str],
    instructions: str = "",
) -> Outcome | None:
    """Compact ``messages`` to fit ``plan.target``; None when there is nothing to compact."""
    view = strip_carryover(messages)
    extra_tokens = est.tokens(sum(len(x) for x in extra) + 400)
    if strategy in ("clear-tool-results", "hybrid"):
        cleared = clear_tool_results(view, keep_last=2)
        if strategy == "clear-tool-results" or est.messages_tokens(cleared) + extra_tokens <= plan.target:
            if cleared != view:
                first = carryover("clear-tool-results", 0, "", extra) if extra else None
                head = [first] if first is not None else []
                return Outcome(_join(head, cleared), "clear-tool-results", notes=("old tool results cleared",))
            if strategy == "clear-tool-results":
                return None
    cut = split_point(view, est, min(plan.keep, max(0, plan.target - extra_tokens - plan.summary_max)))
    if cut == 0:
        tail = shrink_results(view, 2000)
        return (
            Outcome(tail, "truncate", notes=("nothing to cut before: tool results shortened",))
            if tail != view
            else None
        )
    head, tail = view[:cut], view[cut:]
    budget_tail = max(1, plan.target - extra_tokens - plan.summary_max)
    if est.messages_tokens(tail) > budget_tail:
        tail = clear_tool_results(tail, keep_last=1)
    size = 8000
    while est.messages_tokens(tail) > budget_tail and size >= 500:
        tail = shrink_results(tail, size)
        size //= 2
    summary, stage, notes = "", "truncate", ["truncate-oldest: no model call"]
    if strategy != "truncate-oldest" and summarise is not None:
        summary, stage, notes = await summarise_head(head, plan, est, summarise, instructions)
    return Outcome([carryover(stage, len(head), summary, extra), *tail], stage, summary, tuple(notes))


def _join(head: list[Message], rest: list[Message]) -> list[Message]:
    if head and rest and rest[0].role == "user":
        return [Message(role="user", content=[*head[0].content, *rest[0].content]), *rest[1:]]
    return [*head, *rest]
