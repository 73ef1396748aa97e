"""Detection: what kind of broken conversation a provider error points at.

String matching on the provider's message, as oh-my-opencode's session recovery does, plus the
classified ``prompt_too_long`` kind keel's providers already give.
"""

from __future__ import annotations

from typing import Literal

from agentkeel.core.events import EventBus
from agentkeel.core.extensions import Extension
from agentkeel.core.provider import ModelRequest, ProviderError
from agentkeel.reliability.state import ReliabilityState, notice

Pattern = Literal[
    "tool_result_missing", "thinking_block_order", "thinking_disabled_violation", "empty_content", "prompt_too_long"
]

ADVICE: dict[str, str] = {
    "tool_result_missing": "a tool_use without its tool_result in the request",
    "thinking_block_order": "thinking blocks out of place in an assistant turn",
    "thinking_disabled_violation": "thinking blocks sent while thinking is off",
    "empty_content": "an empty message or text block in the request",
    "prompt_too_long": "the conversation no longer fits the model's context window",
}


def classify(err: ProviderError) -> Pattern | None:
    """The recoverable pattern behind a provider error, or None."""
    if err.kind == "prompt_too_long":
        return "prompt_too_long"
    m = str(err).lower()
    if "prompt is too long" in m or "context_length_exceeded" in m or "maximum context length" in m:
        return "prompt_too_long"
    if err.kind not in ("bad_request", "other"):
        return None
    if "tool_use" in m and "tool_result" in m:
        return "tool_result_missing"
    if "thinking" in m and (
        "first block" in m
        or "must start with" in m
        or "preceed" in m
        or "preced" in m
        or ("expected" in m and "found" in m)
    ):
        return "thinking_block_order"
    if "thinking is disabled" in m and "cannot contain" in m:
        return "thinking_disabled_violation"
    if "non-empty" in m or "empty content" in m or "must have non-empty" in m:
        return "empty_content"
    return None


def error_detector(bus: EventBus, state: ReliabilityState) -> Extension:
    """Failure: a run that ends on a provider 400 whose cause the user cannot read ("messages.3:
    `tool_use` ids were found without..."). Detection: the error is named (tool_result_missing,
    thinking_block_order, thinking_disabled_violation, empty_content, prompt_too_long) in a notice
    that says what is wrong, whether or not session recovery then repairs it (an info notice: the
    run's own error line, or session recovery's warning, is what the user reads first)."""

    async def recover(err: ProviderError, request: ModelRequest, attempt: int) -> ModelRequest | None:
        state.error_seen()  # every failed request, recovered or not (the todo enforcer waits on it)
        pattern = classify(err)
        if pattern is not None and attempt == 1:
            notice(bus, "error-pattern-detector", f"{pattern}: {ADVICE[pattern]}")
        return None

    return Extension("error-pattern-detector", recover=recover)
