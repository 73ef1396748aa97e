"""The in-process scripted model: the fake-llm script, without HTTP, for unit tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
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
from agentkeel.fakellm.script import Script, ScriptCursor, usage_for
from agentkeel.providers._errors import from_status, from_stream_error


class ScriptedProvider:
    name = "scripted"

    def __init__(self, script: Script | str | Path) -> None:
        self.cursor = ScriptCursor(script if isinstance(script, Script) else Script.load(script))
        self._sized: list[tuple[Message, int]] = []  # the last request's messages and their JSON lengths
        self._chars = 0  # their sum

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
        last request did not have: a session appends, so a long one would otherwise make this fake
        model's bookkeeping, not the harness, the cost that grows. The last request's messages are
        taken as kept when its first and last still stand where they stood (constant time: a view
        that changed in the middle keeps both ends only by a coincidence a fake model can afford)."""
        sized, kept = self._sized, 0
        if sized and len(sized) <= len(messages) and messages[0] is sized[0][0]:
            kept = len(sized) if messages[len(sized) - 1] is sized[-1][0] else 0
        if kept == 0:
            self._sized, self._chars = [], 0
        for m in messages[kept:]:
            n = len(json.dumps(to_data(m)))
            self._sized.append((m, n))
            self._chars += n
        return 2 + self._chars + 2 * max(0, len(messages) - 1)

    async def aclose(self) -> None:
        return None
