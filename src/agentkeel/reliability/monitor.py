"""Detection and context: the context-window monitor and the tool-output truncator.

Both read the context size the provider *reported* for the last response (input plus cached
tokens); keel's own token accounting and compaction belong to agentkeel.context.
"""

from __future__ import annotations

from agentkeel.core.events import EventBus
from agentkeel.core.extensions import Extension, ToolCall
from agentkeel.core.provider import ModelResponse
from agentkeel.core.tools import ToolOutput
from agentkeel.reliability.state import ReliabilityState, notice

CHARS_PER_TOKEN = 4


def record_usage(state: ReliabilityState, response: ModelResponse) -> bool:
    """The context the provider reported for this response (input, cache and output tokens)."""
    u = response.usage
    used = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
    if used <= 0:
        return False
    state.last_input_tokens = used + u.output_tokens
    return True


def context_monitor(bus: EventBus, state: ReliabilityState) -> Extension:
    """Failure: the context window fills silently until a request fails with "prompt is too long"
    (or the provider compacts on its own). Detection: after each response the reported usage is
    compared with the model's window; crossing a threshold (``reliability.contextWarnPercent``,
    70/85/95 by default) is a warning notice once, again after the context shrank below it."""
    warned: set[int] = set()

    async def after_response(response: ModelResponse) -> None:
        if not record_usage(state, response):
            return
        pct = state.used_fraction() * 100
        thresholds = state.config.contextWarnPercent
        warned.difference_update(t for t in thresholds if pct < t)  # the context shrank: warn again later
        crossed = [t for t in thresholds if pct >= t and t not in warned]
        if not crossed:
            return
        warned.update(crossed)  # one warning, however many thresholds one response crossed
        notice(
            bus,
            "context-window-monitor",
            f"context window {pct:.0f}% full ({state.last_input_tokens} of {state.context_window} tokens); "
            "/compact or a new session frees it",
            "warning",
        )

    return Extension("context-window-monitor", after_response=after_response)


def output_truncator(bus: EventBus, state: ReliabilityState) -> Extension:
    """Failure: one large tool result (a log, a minified file, a search of node_modules) takes the
    rest of the context window and the next request is "prompt is too long". Fix: a result is cut
    (head and tail kept, the cut said) to the smaller of ``reliability.truncateMaxTokens`` (50k) and
    half the window's reported headroom, so half of what is left stays free."""

    async def after_tool(call: ToolCall, output: ToolOutput) -> ToolOutput:
        if not isinstance(output.content, str):
            return output
        limit = state.config.truncateMaxTokens
        headroom = state.headroom_tokens()
        if headroom is not None:
            limit = min(limit, headroom // 2)
        budget = max(limit, 250) * CHARS_PER_TOKEN
        text = output.content
        if len(text) <= budget:
            return output
        head, tail = text[: budget * 3 // 4], text[-(budget // 5) :]
        cut = len(text) - len(head) - len(tail)
        note = (
            f"\n\n… [tool-output-truncator: {cut} characters cut; the context window has about {headroom} tokens "
            "left. Narrow the command or read a smaller range.] …\n\n"
            if headroom is not None
            else f"\n\n… [tool-output-truncator: {cut} characters cut. Narrow the command or read less.] …\n\n"
        )
        notice(
            bus,
            "tool-output-truncator",
            f"{call.name} output cut from {len(text)} to {len(head) + len(tail)} characters",
        )
        return ToolOutput(
            head + note + tail, is_error=output.is_error, metadata={**output.metadata, "truncated_chars": cut}
        )

    async def after_response(response: ModelResponse) -> None:
        record_usage(state, response)  # the headroom, whether or not the monitor is on

    return Extension("tool-output-truncator", after_tool=after_tool, after_response=after_response)
