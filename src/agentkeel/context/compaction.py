"""Compaction strategies over the message view (pure, but for the summariser call).

The result is the message list a :class:`~agentkeel.core.view.Compaction` event carries: a user
message with the carry-over (summary, working state, re-injected instructions) followed by the
recent turns kept verbatim. The cut is always made before an assistant message, so a tool_use and
its tool_result are never split. Strategies:

- ``summarize`` (the default): the older part is replaced by a summary the model writes from our
  structured instruction (:data:`SUMMARY_SYSTEM`); the last turns stay verbatim and the carry-over
  points at the full transcript. Fallback when the summariser fails, times out or returns too
  much: summaries of chunks -> clear-tool-results (no model call) -> truncate-oldest;
- ``clear-tool-results``: old bulky tool results become a stub naming the call that made them;
- ``truncate-oldest``: the oldest turns are dropped, no model call;
- ``hybrid``: clear tool results when that is enough, else summarise.

Every strategy first drops the stubs an earlier compaction left (the call and its stub go
together): a stub is kept for one compaction cycle, never for the rest of the session, so the
floor after a compaction does not rise. An earlier summary is handed to the next summariser and,
when no new one can be written, carried forward as it was.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable

import msgspec

from agentkeel.context.tokens import SUMMARY_MARK, Estimator
from agentkeel.core.types import ContentBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock, replace

CLEARED = "[tool result cleared to save context:"
COMPACT_MARK = "<keel-compact-request>"
Summariser = Callable[[str, int], Awaitable[str]]  # (transcript, max tokens) -> summary

SUMMARY_SYSTEM = """You write the hand-over note of a coding session whose earlier part is about to leave the context.
The work goes on from your note and the last few turns alone: what the note leaves out is lost. Write dense
plain text under these headings, with no preamble:

1. User messages: every message and instruction from the user, in order, verbatim or nearly (shorten only long
   pasted content; keep every constraint, preference and correction).
2. Goal and state: what the user wants overall and how far the work has got.
3. Decisions: what was decided and why, and approaches tried and given up.
4. Files: each file read, created or changed, and why; exact paths and the names that matter in them.
5. Errors and fixes: each error met (exact message, the failing test's name) and its fix, or that it is open.
6. Facts from tool output: names, values, paths, versions and command results later steps depend on, copied
   exactly.
7. Open tasks: what remains to do, the next step first.

If the session already has an earlier note, it is part of what you summarise: keep what still matters in it."""


# the instruction after the conversation when it is summarised as it is (see ``compact``'s ``whole``)
WHOLE_REQUEST = f"""{COMPACT_MARK}
The conversation above is about to be compacted. Write the hand-over note for all of it now, as the
instructions below say; answer with the note as text only and call no tool.

{SUMMARY_SYSTEM}"""


class SummaryFailed(Exception):
    pass


def budget_line(max_tokens: int) -> str:
    """The size limit, said to the summariser: the request's output limit is the same figure, and a
    longer answer (cut off, or judged longer) is rejected."""
    return (
        f"\n\nKeep the note under {max_tokens} tokens (about {max_tokens * 3 // 4} words): "
        "a longer one is cut off and lost."
    )


class Plan(msgspec.Struct):
    """What a compaction must achieve, in tokens of the conversation (system and tools excluded)."""

    target: int  # the messages after compaction must fit this
    keep: int  # at most this much of the recent conversation is kept verbatim
    summary_max: int  # the longest acceptable summary
    summariser_input: int  # the most one summariser request may carry
    whole_max: int = 0  # the longest summary asked after the conversation as it is (0: summary_max)
    timeout_s: float = 120.0


class Outcome(msgspec.Struct):
    messages: list[Message]
    stage: str
    summary: str = ""
    notes: tuple[str, ...] = ()


_SUMMARY_BODY = re.compile(r"<summary>\n(.*)\n</summary>", re.DOTALL)


def earlier_summary(messages: list[Message]) -> str:
    """The summary the carry-over of an earlier compaction holds ('' when none)."""
    if not messages or messages[0].role != "user":
        return ""
    for b in messages[0].content:
        if isinstance(b, TextBlock) and b.text.startswith(SUMMARY_MARK):
            m = _SUMMARY_BODY.search(b.text)
            if m:
                return m[1]
    return ""


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


def drop_cleared(messages: list[Message]) -> list[Message]:
    """The view without the calls whose results an earlier compaction cleared: the tool_use and its
    stub go together; a message left empty goes too, and two messages of one role that end up next to
    each other are joined (the roles keep alternating)."""
    gone = {
        b.tool_use_id
        for m in messages
        for b in m.content
        if isinstance(b, ToolResultBlock) and b.text().startswith(CLEARED)
    }
    if not gone:
        return messages
    out: list[Message] = []
    for msg in messages:
        blocks = [
            b
            for b in msg.content
            if not (isinstance(b, ToolUseBlock) and b.id in gone)
            and not (isinstance(b, ToolResultBlock) and b.tool_use_id in gone)
        ]
        if not blocks:
            continue
        if out and out[-1].role == msg.role:
            out[-1] = Message(role=msg.role, content=[*out[-1].content, *blocks])
        else:
            out.append(msg if len(blocks) == len(msg.content) else Message(role=msg.role, content=blocks))
    return out


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
        summary = await asyncio.wait_for(summarise(text + budget_line(max_tokens), max_tokens), timeout_s)
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
    head: list[Message],
    plan: Plan,
    est: Estimator,
    summarise: Summariser,
    instructions: str = "",
    earlier: str = "",
    whole: Summariser | None = None,
) -> tuple[str, str, list[str]]:
    """(summary, stage, notes): stage ``summary``, else ``chunked``, else ``failed`` with no summary."""
    notes: list[str] = []
    text = transcript(head)
    if earlier:
        text = f"(the earlier note)\n{earlier}\n(the conversation since)\n{text}"
    extra = f"\n\nFocus the summary on: {instructions}" if instructions else ""
    max_chars = int(plan.summariser_input * est.chars_per_token)
    if whole is not None:
        # the conversation as the model last saw it, and the instruction after it: the provider's
        # prompt cache holds all but the instruction, so this request costs a fraction of one that
        # sends the conversation again as text
        try:
            limit = plan.whole_max or plan.summary_max
            return await _one(whole, WHOLE_REQUEST + extra, limit, est, plan.timeout_s), "summary", notes
        except SummaryFailed as e:
            notes.append(f"full summary failed: {e}")
    elif len(text) <= max_chars:
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
    return "", "failed", notes


def carryover(stage: str, removed: int, summary: str, extra: list[str], source: str = "") -> Message:
    pointer = (
        f"\nThe full transcript is in {source} (JSON lines, one event a line): Read or Grep it when you need an "
        "exact earlier output."
        if source
        else ""
    )
    if summary:
        head = (
            f'{SUMMARY_MARK} stage="{stage}">\nThis session continues a conversation compacted to fit the context '
            f"window ({removed} earlier messages replaced by this summary; the last turns follow as they were)."
            f"{pointer}\n<summary>\n{summary}\n</summary>"
        )
    elif stage == "clear-tool-results":
        head = (
            f'{SUMMARY_MARK} stage="{stage}">\nThis session continues a conversation compacted to fit the context '
            f"window: older tool results were cleared (a stub names each call) and no summary was written.{pointer}"
        )
    else:
        head = (
            f'{SUMMARY_MARK} stage="{stage}">\nThis session continues a conversation compacted to fit the context '
            f"window: {removed} earlier messages were removed without a summary.{pointer}"
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
    source: str = "",
    whole: Summariser | None = None,
    manual: bool = False,
) -> Outcome | None:
    """Compact ``messages`` to fit ``plan.target``; None when there is nothing to compact.
    ``source``: the session's transcript file, named in the carry-over. ``whole``: sends the
    conversation as it is with an instruction after it, (instruction, max tokens) -> summary; the
    first summary is asked that way when given (the caller knows the request fits). ``manual``: the
    user asked (``/compact``): the older part is summarised whatever the strategy, even when the
    conversation already fits."""
    earlier = earlier_summary(messages)
    stripped = strip_carryover(messages)
    view = drop_cleared(stripped)
    extra_tokens = est.tokens(sum(len(x) for x in extra) + len(earlier) + len(source) + 600)
    if manual:
        strategy = "summarize"
    if strategy in ("clear-tool-results", "hybrid"):
        cleared = clear_tool_results(view, keep_last=2)
        if strategy == "clear-tool-results" or est.messages_tokens(cleared) + extra_tokens <= plan.target:
            if cleared != stripped:
                first = carryover("clear-tool-results", 0, earlier, extra, source) if extra or earlier else None
                head = [first] if first is not None else []
                return Outcome(_join(head, cleared), "clear-tool-results", earlier, notes=("old tool results cleared",))
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
        summary, stage, notes = await summarise_head(head, plan, est, summarise, instructions, earlier, whole)
    if stage == "failed":
        # no summary could be written: the older turns stay with their results cleared when that
        # fits, else they go (truncate-oldest); the earlier summary, if any, is carried as it was
        kept = clear_tool_results(head, keep_last=0)
        room = plan.target - extra_tokens - est.tokens(len(earlier)) - est.messages_tokens(tail)
        if est.messages_tokens(kept) <= room:
            notes.append("fallback: clear-tool-results, no model call")
            first = carryover("clear-tool-results", 0, earlier, extra, source)
            return Outcome(_join([first], [*kept, *tail]), "clear-tool-results", earlier, tuple(notes))
        notes.append("fallback: truncate-oldest, no model call")
        stage, summary = "truncate", earlier
    return Outcome([carryover(stage, len(head), summary, extra, source), *tail], stage, summary, tuple(notes))


def _join(head: list[Message], rest: list[Message]) -> list[Message]:
    if head and rest and rest[0].role == "user":
        return [Message(role="user", content=[*head[0].content, *rest[0].content]), *rest[1:]]
    return [*head, *rest]
