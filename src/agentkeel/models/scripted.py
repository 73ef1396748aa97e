"""The in-process scripted model: the fake-llm script, without HTTP, for unit tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from agentkeel.core.provider import ModelRequest, ModelResponse, ProviderError, StreamChunk, TextChunk
from agentkeel.core.types import (
    ContentBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
    to_data,
)
from agentkeel.internal.env import KeelEnv
from agentkeel.models._errors import from_status, from_stream_error
from agentkeel.models.catalog import ModelConfigError, ModelInfo
from agentkeel.models.fake.script import Script, ScriptCursor, ScriptError, usage_for


def make(info: ModelInfo, env: Mapping[str, str], transport: str | None) -> ScriptedProvider:
    """``scripted:<path>`` (or ``KEEL_SCRIPT``): the script runs in-process; no transport to choose."""
    try:
        return ScriptedProvider(KeelEnv.of(env).text("KEEL_SCRIPT") or info.model)
    except ScriptError as e:
        raise ModelConfigError(str(e)) from None


class ScriptedProvider:
    name = "scripted"

    def __init__(self, script: Script | str | Path) -> None:
        self.cursor = ScriptCursor(script if isinstance(script, Script) else Script.load(script))
        self._sized: dict[int, tuple[Message, int]] = {}  # the last request's messages by id: JSON lengths

    @property
    def requests(self) -> list[ModelRequest]:
        return [r["request"] for r in self.cursor.requests]

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        step = self.cursor.next({"request": request})
        if step.delay_s:
            await asyncio.sleep(step.delay_s)
        if step.error_status is not None:
            headers: dict[str, str] = {}
            if step.retry_after is not None:
                headers["retry-after"] = str(step.retry_after)
            if step.retry_after_ms is not None:
                headers["retry-after-ms"] = str(step.retry_after_ms)
            raise from_status(step.error_status, step.error_message, headers, endpoint="scripted", model=request.model)
        if step.empty_body:
            raise ProviderError("stream_broken", "scripted: an empty body")
        if step.stall_after is not None:
            await asyncio.sleep(step.stall_s)
            raise ProviderError("timeout", "scripted: the stream stalled")
        if step.thinking:
            yield TextChunk(step.thinking, "thinking")
        if step.text:
            if step.break_after is not None or step.reset_after is not None:
                yield TextChunk(step.text[: len(step.text) // 2])
                raise ProviderError("stream_broken", "scripted stream break")
            yield TextChunk(step.text)
        if step.stream_error is not None:
            error = {"type": step.stream_error.type, "message": step.stream_error.message}
            raise from_stream_error(error, endpoint="scripted")
        blocks: list[ContentBlock] = []
        if step.thinking:
            blocks.append(ThinkingBlock(thinking=step.thinking, signature=step.signature))
        blocks += [RedactedThinkingBlock(data=data) for data in step.redacted_thinking]
        if step.text:
            blocks.append(TextBlock(text=step.text))
        blocks += [ToolUseBlock(id=c.id, name=c.name, input=c.input) for c in step.tool_calls]
        u = usage_for(step, self._request_chars(request.messages))
        usage = Usage(
            input_tokens=u["input_tokens"],
            output_tokens=u["output_tokens"],
            cache_read_tokens=u["cache_read_input_tokens"],
            cache_write_tokens=u["cache_creation_input_tokens"],
        )
        yield ModelResponse(Message(role="assistant", content=blocks), step.final_stop_reason, usage, request.model)

    def _request_chars(self, messages: list[Message]) -> int:
        """``len(json.dumps([to_data(m) for m in messages]))``, serialising only the messages the
        last request did not have (by identity: messages are immutable, and a session appends or,
        after a compaction, keeps some of the same objects), so that this fake model's bookkeeping
        is not a cost that grows with the session."""
        known = self._sized
        seen: dict[int, tuple[Message, int]] = {}
        chars = 0
        for m in messages:
            hit = known.get(id(m))
            n = hit[1] if hit is not None and hit[0] is m else len(json.dumps(to_data(m)))
            seen[id(m)] = (m, n)
            chars += n
        self._sized = seen
        return 2 + chars + 2 * max(0, len(messages) - 1)

    async def aclose(self) -> None:
        return None
