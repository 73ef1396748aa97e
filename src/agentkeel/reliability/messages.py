"""Prevention: the request is made valid before it leaves (thinking blocks, empty content, tool pairing).

Three ``before_request`` transforms of the *request*; the session log is never edited. Each one
exists for a 400 a provider answers to a malformed conversation, which would otherwise end the
run (or, resumed, end it again at every prompt).
"""

from __future__ import annotations

from operator import attrgetter

from msgspec.structs import replace as dc_replace

from agentkeel.core.events import EventBus
from agentkeel.core.extensions import Extension
from agentkeel.core.provider import ModelRequest
from agentkeel.core.types import (
    ContentBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentkeel.core.view import repair_messages
from agentkeel.reliability.state import ReliabilityState, notice

EMPTY_PLACEHOLDER = "[empty message]"
_THINKING = (ThinkingBlock, RedactedThinkingBlock)
_content = attrgetter("content")


class Seen:
    """The leading messages a request shares with what a check saw before, so that it walks only
    what is new: a request repeats the last one's messages and adds a few.

    Shared means equal, block for block, to a copy taken when they were checked (compared in C:
    the same objects answer at once), so a message whose content list was changed in place since
    is not shared and is checked again. A compaction or pruning that rewrote the front shares
    nothing: everything is checked, once.
    """

    __slots__ = ("_contents", "_messages")

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._contents: list[list[ContentBlock]] = []

    def shared(self, messages: list[Message]) -> int:
        """How many leading messages of ``messages`` are the ones remembered, unchanged."""
        k = len(self._messages)
        if not k or len(messages) < k:
            return 0
        head = messages[:k]
        return k if head == self._messages and list(map(_content, head)) == self._contents else 0

    def keep(self, messages: list[Message], shared: int, upto: int) -> None:
        """Remember ``messages[:upto]`` (the first ``shared`` of them already are)."""
        shared = min(shared, upto)
        if shared == len(self._messages):  # the usual case: what was remembered, and what came since
            self._messages += messages[shared:upto]
            self._contents += [list(m.content) for m in messages[shared:upto]]
            return
        self._messages = messages[:upto]
        self._contents = self._contents[:shared] + [list(m.content) for m in messages[shared:upto]]


def _has_thinking(msg: Message) -> bool:
    return msg.role == "assistant" and any(isinstance(b, _THINKING) for b in msg.content)


# --- thinking blocks ---------------------------------------------------------------------


def order_thinking(messages: list[Message]) -> tuple[list[Message], int]:
    """Thinking blocks first in every assistant message (Anthropic: "thinking must be the first
    block"); returns the messages and how many were reordered."""
    out, changed = [], 0
    for msg in messages:
        if msg.role == "assistant" and any(isinstance(b, _THINKING) for b in msg.content):
            thinking = [b for b in msg.content if isinstance(b, _THINKING)]
            rest = [b for b in msg.content if not isinstance(b, _THINKING)]
            if msg.content[: len(thinking)] != thinking:
                msg, changed = Message(role="assistant", content=[*thinking, *rest]), changed + 1
        out.append(msg)
    return out, changed


def strip_thinking(messages: list[Message]) -> tuple[list[Message], int]:
    """Every thinking block left out (a request without thinking, or a provider that refuses them)."""
    out, removed = [], 0
    for msg in messages:
        if msg.role == "assistant" and any(isinstance(b, _THINKING) for b in msg.content):
            kept: list[ContentBlock] = [b for b in msg.content if not isinstance(b, _THINKING)]
            removed += len(msg.content) - len(kept)
            msg = Message(role="assistant", content=kept or [TextBlock(text=EMPTY_PLACEHOLDER)])
        out.append(msg)
    return out, removed


def _tool_loop_without_thinking(messages: list[Message]) -> bool:
    """The request continues a tool loop whose assistant turn has no thinking block: with thinking
    on, Anthropic answers "Expected `thinking` or `redacted_thinking`, but found `tool_use`"."""
    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    if last is None or not last.tool_uses() or messages[-1].role != "user":
        return False
    if any(not isinstance(b, ToolResultBlock) for b in messages[-1].content):
        return False  # a new user turn starts: the rule applies to the tool loop only
    return not isinstance(last.content[0], _THINKING)


def thinking_validator(bus: EventBus, state: ReliabilityState) -> Extension:
    """Failure: "thinking must be the first block" / "Expected `thinking` ... found `tool_use`" /
    "thinking is disabled ... cannot contain" 400s, after a model switch, a resumed session from
    another model, or thinking toggled mid-session. Fix: thinking blocks go first; a request with
    thinking off (or after the provider refused them) carries none; a tool loop whose assistant
    turn has no thinking block continues with thinking off for that request."""

    seen = Seen()  # leading messages known to hold no thinking block

    async def before_request(request: ModelRequest) -> ModelRequest:
        known = seen.shared(request.messages)
        clean = known + next(
            (i for i, m in enumerate(request.messages[known:]) if _has_thinking(m)), len(request.messages) - known
        )
        seen.keep(request.messages, known, clean)
        if clean == len(request.messages):  # no thinking block anywhere: nothing to move or leave out
            messages, moved = request.messages, 0
        else:
            messages, moved = order_thinking(request.messages)
        if request.thinking_budget is None or state.strip_thinking:
            messages, removed = strip_thinking(messages) if clean < len(messages) else (messages, 0)
            if removed and state.strip_thinking:
                notice(bus, "thinking-block-validator", f"{removed} thinking block(s) left out of the request")
            return dc_replace(request, messages=messages) if (moved or removed) else request
        if _tool_loop_without_thinking(messages):
            notice(
                bus,
                "thinking-block-validator",
                "the assistant turn being continued has no thinking block; this request goes without thinking",
                "warning",
            )
            messages, _ = strip_thinking(messages)
            return dc_replace(request, messages=messages, thinking_budget=None)
        return dc_replace(request, messages=messages) if moved else request

    return Extension("thinking-block-validator", before_request=before_request)


# --- empty content -----------------------------------------------------------------------


def sanitize_empty(messages: list[Message]) -> tuple[list[Message], int]:
    """No empty or whitespace-only text block, no message without content, no trailing whitespace
    on the final assistant text; returns the messages and how many blocks were fixed."""
    out, fixed = [], 0
    for i, msg in enumerate(messages):
        blocks: list[ContentBlock] = []
        for b in msg.content:
            if isinstance(b, TextBlock) and not b.text.strip():
                fixed += 1
                continue
            blocks.append(b)
        if not blocks:
            blocks, fixed = [TextBlock(text=EMPTY_PLACEHOLDER)], fixed + (0 if msg.content else 1)
        last = blocks[-1]
        final = i == len(messages) - 1 and msg.role == "assistant"
        if final and isinstance(last, TextBlock) and last.text != last.text.rstrip():
            blocks[-1], fixed = TextBlock(text=last.text.rstrip()), fixed + 1
        out.append(Message(role=msg.role, content=blocks) if blocks != msg.content else msg)
    return out, fixed


def empty_sanitizer(bus: EventBus, state: ReliabilityState) -> Extension:
    """Failure: "text content blocks must be non-empty" / "all messages must have non-empty
    content" 400s, from an interrupted stream, a model that answered only whitespace next to a
    tool call, or a hand-edited transcript. Fix: empty text blocks are left out of the request; a
    message left with nothing says ``[empty message]``."""

    seen = Seen()  # leading messages known to need no fix (as any message but the last)

    async def before_request(request: ModelRequest) -> ModelRequest:
        known = min(seen.shared(request.messages), max(len(request.messages) - 1, 0))  # the last: its own rule
        tail, fixed = sanitize_empty(request.messages[known:])  # the tail's last is the request's last
        clean = known + next(
            (i for i, (a, b) in enumerate(zip(tail, request.messages[known:], strict=True)) if a is not b), len(tail)
        )
        seen.keep(request.messages, known, min(clean, max(len(request.messages) - 1, 0)))
        if not fixed:
            return request
        messages = request.messages[:known] + tail
        notice(bus, "empty-message-sanitizer", f"{fixed} empty content block(s) fixed in the request")
        return dc_replace(request, messages=messages)

    return Extension("empty-message-sanitizer", before_request=before_request)


# --- tool pairing ------------------------------------------------------------------------


def paired(messages: list[Message], start: int = 0) -> bool:
    """Roles alternate from a user message, no message is empty, and each assistant message's
    tool_uses are answered, each exactly once, by the results of the next message (and only there).

    ``start``: ``messages[:start]`` are known to be paired (every tool_use answered); only the
    rest is walked."""
    if not messages or messages[0].role != "user":
        return False
    wanted: list[str] = []
    for i in range(start, len(messages)):
        msg = messages[i]
        if not msg.content or (i and msg.role == messages[i - 1].role):
            return False
        if msg.role == "assistant":
            wanted = [b.id for b in msg.content if isinstance(b, ToolUseBlock)]
            if len(set(wanted)) != len(wanted):
                return False
        else:
            got = [b.tool_use_id for b in msg.content if isinstance(b, ToolResultBlock)]
            if sorted(got) != sorted(wanted):
                return False
            wanted = []
    return not wanted


def pairing_validator(bus: EventBus, state: ReliabilityState) -> Extension:
    """Failure: "tool_use ids were found without tool_result blocks immediately after" and
    "unexpected tool_use_id found in tool_result blocks" 400s. The session view is built valid,
    but a request transform after it (an SDK extension, a compactor, a pruner) can break the
    pairing again. Fix: it runs after them and re-pairs the request: a dangling tool_use gets a
    "result missing" error result, an orphan tool_result is dropped, roles alternate."""

    seen = Seen()  # leading messages known to be paired

    async def before_request(request: ModelRequest) -> ModelRequest:
        known = seen.shared(request.messages)
        if paired(request.messages, known):
            seen.keep(request.messages, known, len(request.messages))
            return request  # the usual case, checked in one pass over what is new, without building anything
        seen.keep(request.messages, 0, 0)
        view = repair_messages(list(request.messages))
        if not view.repairs and view.messages == request.messages:
            return request
        what = "; ".join(view.repairs[:5]) or "a tool_use without its tool_result answered as missing"
        notice(bus, "tool-pairing-validator", "request repaired: " + what, "warning")
        return dc_replace(request, messages=view.messages)

    return Extension("tool-pairing-validator", before_request=before_request)
