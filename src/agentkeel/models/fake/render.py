"""A script step as the bytes of a real response: Anthropic Messages or OpenAI Chat Completions,
whole (JSON) or streamed (one SSE event per list item). Sans-IO: the server only writes these."""

from __future__ import annotations

import json
import time
from typing import Any

from agentkeel.models.fake.cache import PromptFigures
from agentkeel.models.fake.script import Step, StreamFault, usage_for


def _pieces(text: str, n: int = 3) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


# --- Anthropic Messages -----------------------------------------------------------------


def anthropic_message(
    step: Step, model: str, msg_id: str, request_body: str, prompt: PromptFigures | None = None
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if step.thinking:
        content.append({"type": "thinking", "thinking": step.thinking, "signature": step.signature})
    content += [{"type": "redacted_thinking", "data": data} for data in step.redacted_thinking]
    if step.text:
        content.append({"type": "text", "text": step.text})
    for c in step.tool_calls:
        content.append({"type": "tool_use", "id": c.id, "name": c.name, "input": c.input})
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": step.final_stop_reason,
        "stop_sequence": None,
        "usage": usage_for(step, len(request_body), prompt),
    }


def anthropic_sse(
    step: Step, model: str, msg_id: str, request_body: str, prompt: PromptFigures | None = None
) -> list[bytes]:
    full = anthropic_message(step, model, msg_id, request_body, prompt)
    usage = full["usage"]
    start = dict(full, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
    events = [sse("message_start", {"type": "message_start", "message": start})]
    events.append(sse("ping", {"type": "ping"}))
    for index, block in enumerate(full["content"]):
        kind = block["type"]
        if kind == "thinking":
            events.append(_block_start(index, {"type": "thinking", "thinking": "", "signature": ""}))
            events += [_delta(index, {"type": "thinking_delta", "thinking": p}) for p in _pieces(block["thinking"])]
            events.append(_delta(index, {"type": "signature_delta", "signature": block["signature"]}))
        elif kind == "redacted_thinking":
            events.append(_block_start(index, block))
        elif kind == "text":
            events.append(_block_start(index, {"type": "text", "text": ""}))
            events += [_delta(index, {"type": "text_delta", "text": p}) for p in _pieces(block["text"])]
        else:
            events.append(
                _block_start(index, {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}})
            )
            raw = json.dumps(block["input"])
            events += [_delta(index, {"type": "input_json_delta", "partial_json": p}) for p in _pieces(raw, 2)]
        events.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": full["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(sse("message_stop", {"type": "message_stop"}))
    return events


def _block_start(index: int, block: dict[str, Any]) -> bytes:
    return sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})


def _delta(index: int, delta: dict[str, Any]) -> bytes:
    return sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def anthropic_error(step: Step) -> dict[str, Any]:
    return {"type": "error", "error": {"type": step.error_type, "message": step.error_message}}


# --- OpenAI Chat Completions ------------------------------------------------------------

_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "stop_sequence": "stop"}


def _openai_usage(step: Step, request_body: str, prompt: PromptFigures | None = None) -> dict[str, Any]:
    u = usage_for(step, len(request_body), prompt)
    total = u["input_tokens"] + u["cache_read_input_tokens"]
    return {
        "prompt_tokens": total,
        "completion_tokens": u["output_tokens"],
        "total_tokens": total + u["output_tokens"],
        "prompt_tokens_details": {"cached_tokens": u["cache_read_input_tokens"]},
    }


def openai_completion(
    step: Step, model: str, msg_id: str, request_body: str, prompt: PromptFigures | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
    if step.thinking:
        message[step.reasoning_key] = step.thinking
    if step.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.input)}}
            for c in step.tool_calls
        ]
    return {
        "id": msg_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _FINISH.get(step.final_stop_reason, "stop")}],
        "usage": _openai_usage(step, request_body, prompt),
    }


def openai_sse(
    step: Step, model: str, msg_id: str, request_body: str, prompt: PromptFigures | None = None
) -> list[bytes]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse(
            None,
            {
                "id": msg_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            },
        )

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({step.reasoning_key: p}) for p in _pieces(step.thinking)]
    events += [chunk({"content": p}) for p in _pieces(step.text)]
    heads: list[bytes] = []
    parts: list[list[bytes]] = []
    for n, c in enumerate(step.tool_calls):
        head = {"index": n, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}
        heads.append(chunk({"tool_calls": [head]}))
        parts.append(
            [
                chunk({"tool_calls": [{"index": n, "function": {"arguments": p}}]})
                for p in _pieces(json.dumps(c.input), 2)
            ]
        )
    if step.interleave_tool_calls:  # every call's head first, then their argument pieces in turn
        events += heads
        for round_ in range(max((len(p) for p in parts), default=0)):
            events += [p[round_] for p in parts if round_ < len(p)]
    else:
        for head_chunk, pieces in zip(heads, parts, strict=True):
            events += [head_chunk, *pieces]
    events.append(chunk({}, _FINISH.get(step.final_stop_reason, "stop")))
    events.append(
        sse(
            None,
            {
                "id": msg_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": _openai_usage(step, request_body, prompt),
            },
        )
    )
    events.append(sse(None, "[DONE]"))
    return events


def openai_error(step: Step) -> dict[str, Any]:
    return {"error": {"message": step.error_message, "type": step.error_type, "code": step.error_status}}


# --- faults -----------------------------------------------------------------------------


def stream_error_event(wire: str, fault: StreamFault) -> bytes:
    """The error a server sends in place of the rest of a stream (Anthropic's ``overloaded_error``...)."""
    if wire == "anthropic":
        return sse("error", {"type": "error", "error": {"type": fault.type, "message": fault.message}})
    return sse(None, {"error": {"message": fault.message, "type": fault.type, "code": None}})
