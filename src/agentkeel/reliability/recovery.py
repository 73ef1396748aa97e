"""Recovery: session recovery (abort -> repair the message list -> optional auto-resume)."""

from __future__ import annotations

from msgspec.structs import replace as dc_replace

from agentkeel.core.events import EventBus
from agentkeel.core.extensions import Extension
from agentkeel.core.provider import ModelRequest, ModelResponse, ProviderError
from agentkeel.core.view import repair_messages
from agentkeel.reliability.errors import classify
from agentkeel.reliability.messages import order_thinking, sanitize_empty, strip_thinking
from agentkeel.reliability.pruning import shrink
from agentkeel.reliability.state import ReliabilityState, notice

NAME = "session-recovery"


def _repair(pattern: str, request: ModelRequest, state: ReliabilityState) -> tuple[ModelRequest | None, str]:
    """The repaired request for a recognised failure, and what was done (None: nothing to repair)."""
    messages = list(request.messages)
    if pattern == "tool_result_missing":
        view = repair_messages(messages)
        # the provider saw a pairing keel's view did not: re-send the re-paired list once
        return dc_replace(request, messages=view.messages), "tool results re-paired" + (
            f" ({'; '.join(view.repairs[:3])})" if view.repairs else ""
        )
    if pattern == "thinking_block_order":
        ordered, moved = order_thinking(messages)
        if moved:
            return dc_replace(request, messages=ordered), f"thinking blocks moved first in {moved} message(s)"
        stripped, _ = strip_thinking(messages)
        return dc_replace(request, messages=stripped, thinking_budget=None), "request re-sent without thinking"
    if pattern == "thinking_disabled_violation":
        state.strip_thinking = True
        stripped, removed = strip_thinking(messages)
        return dc_replace(request, messages=stripped), f"{removed} thinking block(s) left out from now on"
    if pattern == "empty_content":
        fixed, n = sanitize_empty(messages)
        return (dc_replace(request, messages=fixed), f"{n} empty block(s) filled") if n else (None, "")
    if pattern == "prompt_too_long":
        state.shrink = True
        for keep in (2, 1):
            shrunk, stats = shrink(messages, keep_turns=keep)
            if stats.shrunk:
                return dc_replace(request, messages=shrunk), (
                    f"{stats.shrunk} older result(s) and input(s) cut to markers (the transcript keeps them; "
                    "/compact summarises)"
                )
        return None, ""
    return None, ""


def session_recovery(bus: EventBus, state: ReliabilityState) -> Extension:
    """Failure: a provider 400 caused by the conversation itself (a tool_use without its result
    after a crash or an interrupt, thinking blocks out of order or refused, empty content, a prompt
    too long for the window) ends the run, and the same request fails again at every later prompt.
    Recovery: the failed request is abandoned (abort), the error is recognised
    (error-pattern-detector's patterns), the message list of the request is repaired, and with
    ``reliability.autoResume`` (the default) the repaired request is sent again, once per pattern.
    Repairs that must last (leaving thinking out, shrinking old results) stay on for the session,
    so with autoResume off the next prompt goes out repaired. The todo-continuation enforcer waits
    while a recovery is under way."""
    tried: set[str] = set()

    async def recover(err: ProviderError, request: ModelRequest, attempt: int) -> ModelRequest | None:
        pattern = classify(err)
        if pattern is None or pattern in tried:
            return None
        tried.add(pattern)
        state.recovering = True
        state.cancel_countdown()
        repaired, what = _repair(pattern, request, state)
        if repaired is None:
            notice(bus, NAME, f"{pattern}: nothing left to repair; the error stands")
            state.recovering = False
            return None
        if not state.config.autoResume:
            notice(bus, NAME, f"{pattern}: {what}; send a prompt to resume (reliability.autoResume is off)", "warning")
            state.recovering = False
            return None
        notice(bus, NAME, f"{pattern}: {what}; request sent again", "warning")
        return repaired

    async def after_response(response: ModelResponse) -> None:
        tried.clear()  # a request went through: the next failure may be repaired again
        state.recovering = False

    return Extension(NAME, recover=recover, after_response=after_response)
