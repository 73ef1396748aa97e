"""Token accounting: reported usage is the truth, an estimator covers what has not been sent.

The estimator counts characters of the request as the providers receive it (system text, tool
specs, message blocks as JSON) and turns them into tokens with a ratio per model family, calibrated
against the usage each response reports (no tokenizer download). The context size now is the last
reported figure plus the estimate of what was appended since.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from agentkeel.core.provider import ModelRequest
from agentkeel.core.types import Message, TextBlock, ToolResultBlock, ToolSpec, Usage

WindowState = Literal["safe", "warning", "critical", "exceeded"]

# characters per token before any calibration; on the low side, so a first estimate errs large
_FAMILY_CHARS: dict[str, float] = {"claude": 3.3, "gpt": 3.6, "o": 3.6, "gemini": 3.6, "qwen": 3.3, "llama": 3.3}
_DEFAULT_CHARS = 3.3
SUMMARY_MARK = "<keel-context-carryover"
_ENCODER = msgspec.json.Encoder()


def family(model: str) -> str:
    name = model.split(":", 1)[-1].lower()
    for key in sorted(_FAMILY_CHARS, key=len, reverse=True):
        if name.startswith(key):
            return key
    return ""


class Estimator:
    """Characters -> tokens, calibrated per model family against reported usage."""

    def __init__(self, model: str) -> None:
        self.family = family(model)
        self.chars_per_token = _FAMILY_CHARS.get(self.family, _DEFAULT_CHARS)
        self.samples = 0
        self._memo: dict[int, tuple[Message, int]] = {}
        self._tools_memo: dict[tuple[str, str], tuple[object, int]] = {}

    def calibrate(self, chars: int, reported_tokens: int) -> None:
        """One measured pair. The ratio moves towards it (an average that favours recent figures)
        and is kept a little under the measured one, so estimates stay on the safe side."""
        if chars < 200 or reported_tokens < 50:
            return
        measured = chars / reported_tokens * 0.95
        weight = 0.5 if self.samples < 4 else 0.2
        self.chars_per_token += (measured - self.chars_per_token) * weight
        self.samples += 1

    def tokens(self, chars: int) -> int:
        return int(chars / self.chars_per_token) + (1 if chars else 0)

    def message_chars(self, msg: Message) -> int:
        hit = self._memo.get(id(msg))
        if hit is not None and hit[0] is msg:
            return hit[1]
        n = len(_ENCODER.encode(msg))
        if len(self._memo) > 4096:
            self._memo.clear()
        self._memo[id(msg)] = (msg, n)
        return n

    def messages_chars(self, messages: list[Message]) -> int:
        """``message_chars`` summed; the memo is read here, one lookup a message (the view's
        messages are mostly the ones measured at the last request)."""
        memo, total = self._memo, 0
        for m in messages:
            hit = memo.get(id(m))
            total += hit[1] if hit is not None and hit[0] is m else self.message_chars(m)
        return total

    def messages_tokens(self, messages: list[Message]) -> int:
        return self.tokens(self.messages_chars(messages))

    def tools_chars(self, tools: list[ToolSpec]) -> int:
        """The tools' encoded size. A tool's spec is made anew for each request, of the same name,
        description and schema objects: measured once per (name, description, schema)."""
        total = 0
        for t in tools:
            hit = self._tools_memo.get((t.name, t.description))
            if hit is None or hit[0] is not t.input_schema:
                if len(self._tools_memo) > 1024:
                    self._tools_memo.clear()
                hit = self._tools_memo[(t.name, t.description)] = (t.input_schema, len(_ENCODER.encode(t)))
            total += hit[1]
        return total

    def request_chars(self, request: ModelRequest) -> int:
        return len(request.system) + self.tools_chars(request.tools) + self.messages_chars(request.messages)


class Breakdown(msgspec.Struct):
    """Estimated tokens by source."""

    parts: dict[str, int] = msgspec.field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.parts.values())


def breakdown(
    request: ModelRequest, est: Estimator, system_parts: dict[str, int] | None = None, tools_chars: int | None = None
) -> Breakdown:
    """By source: the system prompt's sections, tools, summaries, tool results, conversation."""
    parts: dict[str, int] = {}
    if system_parts:
        for name, chars in system_parts.items():
            parts[name] = parts.get(name, 0) + est.tokens(chars)
    else:
        parts["system"] = est.tokens(len(request.system))
    parts["tools"] = est.tokens(est.tools_chars(request.tools) if tools_chars is None else tools_chars)
    summary = results = memory = conversation = 0
    for msg in request.messages:
        for block in msg.content:
            n = len(_ENCODER.encode(block))
            if isinstance(block, ToolResultBlock):
                results += n
            elif isinstance(block, TextBlock) and block.text.startswith(SUMMARY_MARK):
                summary += n
            elif isinstance(block, TextBlock) and block.text.lstrip().startswith(("<memory", "<relevant-memories")):
                memory += n
            else:
                conversation += n
    parts["summaries"] = est.tokens(summary)
    parts["memory"] = est.tokens(memory)
    parts["tool results"] = est.tokens(results)
    parts["conversation"] = est.tokens(conversation)
    return Breakdown(parts)


class Window(msgspec.Struct):
    """The model's window, the reserve kept for its answer, and the thresholds."""

    size: int
    reserve: int
    threshold: float = 0.8  # auto-compaction, a share of the usable window
    warning: float = 0.6

    @property
    def usable(self) -> int:
        return max(1, self.size - self.reserve)

    def state(self, tokens: int) -> WindowState:
        share = tokens / self.usable
        if share >= 1.0:
            return "exceeded"
        if share >= self.threshold:
            return "critical"
        if share >= self.warning:
            return "warning"
        return "safe"


class Accounting(msgspec.Struct):
    """What the session has used (reported), and how big the context is now."""

    estimator: Estimator
    window: Window
    usage: Usage = msgspec.field(default_factory=Usage)
    requests: int = 0
    requests_at_compaction: int = 0  # ``requests`` when the context was last compacted
    last_reported: int = 0  # input tokens of the last request, as reported
    _sent_chars: int = 0  # characters of the request being answered
    _reported_chars: int = 0
    _epoch: int = 0  # bumped by each compaction: a report from before it no longer describes the view
    _sent_epoch: int = 0
    _reported_epoch: int = -1
    compactions: int = 0
    cache_history: list[tuple[int, int]] = msgspec.field(default_factory=list)  # (cache_read, total input) per request

    def sent(self, request: ModelRequest) -> None:
        self._sent_chars = self.estimator.request_chars(request)
        self._sent_epoch = self._epoch

    def reported(self, usage: Usage) -> None:
        total = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        self.usage = self.usage + usage
        self.requests += 1
        self.cache_history.append((usage.cache_read_tokens, total))
        if total <= 0:
            return
        self.estimator.calibrate(self._sent_chars, total)
        self.last_reported, self._reported_chars, self._reported_epoch = total, self._sent_chars, self._sent_epoch

    def compacted(self) -> None:
        self._epoch += 1
        self.compactions += 1
        self.requests_at_compaction = self.requests

    def current(self, request: ModelRequest) -> int:
        """Tokens of this request: the last reported figure plus the estimate of what was added
        since, or the estimate alone when the view was rebuilt (a compaction) since the report."""
        chars = self.estimator.request_chars(request)
        if self._reported_epoch == self._epoch and chars >= self._reported_chars:
            return self.last_reported + self.estimator.tokens(chars - self._reported_chars)
        return self.estimator.tokens(chars)
