"""``--include-partial-messages``: the model's stream as Claude Code's ``stream_event`` lines, sans-IO.

keel's loop reports a request's start, its text and thinking deltas, and the final message;
this rebuilds the Anthropic event sequence a client expects from them (``message_start``,
``content_block_start/delta/stop``, ``message_delta``, ``message_stop``), each wrapped as
``{"type": "stream_event", "event": ..., "session_id", "parent_tool_use_id", "uuid"}``.
Tool-use blocks are sent whole (start with their input, then stop) when the message ends.
"""

from __future__ import annotations

import json
from typing import Any

from agentkeel.core.events import AssistantMessage, Event, RequestStarted, TextDelta, ThinkingDelta, new_id
from agentkeel.core.types import TextBlock, ThinkingBlock, ToolUseBlock


class PartialMessages:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._index = -1
        self._open: str | None = None  # the kind of the block being streamed: text | thinking
        self._streamed: dict[str, int] = {}  # kind -> blocks of it already streamed this message
        self._message_id = ""

    def encode(self, event: Event) -> list[dict[str, Any]]:
        if isinstance(event, RequestStarted):
            self._index, self._open, self._streamed = -1, None, {}
            self._message_id = "msg_" + new_id().replace("-", "")[:24]
            message: dict[str, Any] = {
                "id": self._message_id,
                "type": "message",
                "role": "assistant",
                "model": event.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
            return [self._wrap({"type": "message_start", "message": message})]
        if isinstance(event, TextDelta | ThinkingDelta):
            kind = "text" if isinstance(event, TextDelta) else "thinking"
            out = []
            if self._open != kind:
                out += self._close()
                self._index += 1
                self._open = kind
                self._streamed[kind] = self._streamed.get(kind, 0) + 1
                start = {"type": "text", "text": ""} if kind == "text" else {"type": "thinking", "thinking": ""}
                out.append(self._wrap({"type": "content_block_start", "index": self._index, "content_block": start}))
            delta = (
                {"type": "text_delta", "text": event.text}
                if kind == "text"
                else {"type": "thinking_delta", "thinking": event.text}
            )
            out.append(self._wrap({"type": "content_block_delta", "index": self._index, "delta": delta}))
            return out
        if isinstance(event, AssistantMessage):
            out = self._close()
            for block in event.message.content:
                if isinstance(block, ToolUseBlock):
                    self._index += 1
                    use: dict[str, Any] = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
                    out.append(self._wrap({"type": "content_block_start", "index": self._index, "content_block": use}))
                    delta = {"type": "input_json_delta", "partial_json": json.dumps(block.input, ensure_ascii=False)}
                    out.append(self._wrap({"type": "content_block_delta", "index": self._index, "delta": delta}))
                    out.append(self._wrap({"type": "content_block_stop", "index": self._index}))
                elif isinstance(block, TextBlock | ThinkingBlock) and not self._streamed:
                    out += self._whole(block)  # a provider that did not stream: one delta per block
            usage = {"output_tokens": event.usage.output_tokens}
            out.append(
                self._wrap(
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": event.stop_reason, "stop_sequence": None},
                        "usage": usage,
                    }
                )
            )
            out.append(self._wrap({"type": "message_stop"}))
            return out
        return []

    def _whole(self, block: TextBlock | ThinkingBlock) -> list[dict[str, Any]]:
        self._index += 1
        if isinstance(block, TextBlock):
            start: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": block.text}
        else:
            start = {"type": "thinking", "thinking": ""}
            delta = {"type": "thinking_delta", "thinking": block.thinking}
        return [
            self._wrap({"type": "content_block_start", "index": self._index, "content_block": start}),
            self._wrap({"type": "content_block_delta", "index": self._index, "delta": delta}),
            self._wrap({"type": "content_block_stop", "index": self._index}),
        ]

    def _close(self) -> list[dict[str, Any]]:
        if self._open is None:
            return []
        self._open = None
        return [self._wrap({"type": "content_block_stop", "index": self._index})]

    def _wrap(self, event: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "stream_event",
            "event": event,
            "session_id": self.session_id,
            "parent_tool_use_id": None,
            "uuid": new_id(),
        }
