"""The scripted model: a script file of steps, each one model reply (or an error).

Sans-IO: this module turns a script step into the bytes of an Anthropic Messages or
OpenAI Chat Completions response (streamed as SSE or whole), and into a neutral reply for
the in-process provider. The HTTP server and the in-process provider both use it.

Script file (JSON)::

    {"steps": [
      "plain text reply",
      {"text": "Reading it.", "tool_calls": [{"name": "Read", "input": {"file_path": "a.txt"}}]},
      {"thinking": "hmm", "text": "answer", "usage": {"input_tokens": 10, "output_tokens": 3}},
      {"error": {"status": 429, "retry_after": 0.05}},
      {"text": "this stream breaks", "break_after": 3},
      {"text": "slow", "delay_s": 2}
    ],
     "loop": false}

Every request consumes one step. When the steps run out the model answers
``[fake-llm: script exhausted]`` (or starts over with ``"loop": true``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXHAUSTED = "[fake-llm: script exhausted]"


@dataclass(frozen=True)
class ScriptedToolCall:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Step:
    text: str = ""
    thinking: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    stop_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    error_status: int | None = None
    error_type: str = ""
    error_message: str = ""
    retry_after: float | None = None
    break_after: int | None = None  # cut the stream after this many events
    delay_s: float = 0.0

    @property
    def final_stop_reason(self) -> str:
        if self.stop_reason:
            return self.stop_reason
        return "tool_use" if self.tool_calls else "end_turn"


class ScriptError(ValueError):
    pass


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}


def parse_step(raw: Any, index: int) -> Step:
    if isinstance(raw, str):
        return Step(text=raw)
    if not isinstance(raw, dict):
        raise ScriptError(f"step {index}: expected a string or an object, got {type(raw).__name__}")
    if "error" in raw:
        err = raw["error"]
        if not isinstance(err, dict) or not isinstance(err.get("status"), int):
            raise ScriptError(f"step {index}: 'error' needs an integer 'status'")
        status = int(err["status"])
        return Step(
            error_status=status,
            error_type=str(err.get("type") or _ERROR_TYPES.get(status, "api_error")),
            error_message=str(err.get("message") or f"scripted error {status}"),
            retry_after=float(err["retry_after"]) if err.get("retry_after") is not None else None,
        )
    calls = []
    for n, call in enumerate(raw.get("tool_calls") or []):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ScriptError(f"step {index}: tool_calls[{n}] needs a 'name'")
        tool_input = call.get("input", {})
        if not isinstance(tool_input, dict):
            raise ScriptError(f"step {index}: tool_calls[{n}].input must be an object")
        calls.append(
            ScriptedToolCall(id=str(call.get("id") or f"toolu_{index:03d}_{n}"), name=call["name"], input=tool_input)
        )
    usage = raw.get("usage") or {}
    if not isinstance(usage, dict):
        raise ScriptError(f"step {index}: usage must be an object")
    return Step(
        text=str(raw.get("text", "")),
        thinking=str(raw.get("thinking", "")),
        tool_calls=tuple(calls),
        stop_reason=raw.get("stop_reason"),
        usage={str(k): int(v) for k, v in usage.items()},
        break_after=int(raw["break_after"]) if raw.get("break_after") is not None else None,
        delay_s=float(raw.get("delay_s", 0.0)),
    )


@dataclass
class Script:
    steps: list[Step]
    loop: bool = False

    @classmethod
    def from_data(cls, data: Any) -> Script:
        if isinstance(data, list):
            data = {"steps": data}
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            raise ScriptError("a script is a JSON object with a 'steps' list")
        return cls([parse_step(s, i) for i, s in enumerate(data["steps"])], loop=bool(data.get("loop", False)))

    @classmethod
    def load(cls, path: str | Path) -> Script:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise ScriptError(f"cannot read script {path}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise ScriptError(f"script {path} is not valid JSON: {e}") from None
        return cls.from_data(data)


class ScriptCursor:
    """Thread-safe position in a script; also records every request it answered."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self._index = 0
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []

    def reset(self, script: Script | None = None) -> None:
        """Start over, optionally with another script (requests already recorded are kept)."""
        with self._lock:
            if script is not None:
                self.script = script
            self._index = 0

    def next(self, request: dict[str, Any] | None = None) -> Step:
        with self._lock:
            if request is not None:
                self.requests.append(request)
            steps = self.script.steps
            if self._index >= len(steps):
                if not (self.script.loop and steps):
                    return Step(text=EXHAUSTED)
                self._index = 0
            step = steps[self._index]
            self._index += 1
            return step


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def fake_embedding(text: str, dim: int = 64) -> list[float]:
    """A deterministic bag-of-words vector (hashed words, unit length): texts sharing words
    point the same way, which is all a test of the vector path needs."""
    import hashlib
    import math
    import re

    vector = [0.0] * dim
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        vector[int.from_bytes(digest[:4], "little") % dim] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def openai_embeddings(body: dict[str, Any]) -> dict[str, Any]:
    """``POST /v1/embeddings``: float lists or, as the official SDK asks by default, base64 float32."""
    import base64
    import struct

    raw = body.get("input", [])
    inputs = [raw] if isinstance(raw, str) else [str(x) for x in raw]
    dim = int(body.get("dimensions") or 64)
    data = []
    for index, text in enumerate(inputs):
        vector = fake_embedding(text, dim)
        encoded: Any = vector
        if body.get("encoding_format") == "base64":
            encoded = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(estimate_tokens(t) for t in inputs)
    return {
        "object": "list",
        "data": data,
        "model": str(body.get("model", "fake-embedding")),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def usage_for(step: Step, request_chars: int) -> dict[str, int]:
    """A step's usage: its own figures, else about four characters a token (the request's length in)."""
    out_text = step.text + step.thinking + "".join(json.dumps(c.input) for c in step.tool_calls)
    usage = {
        "input_tokens": max(1, request_chars // 4),
        "output_tokens": estimate_tokens(out_text),
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    usage.update(step.usage)
    return usage


def _pieces(text: str, n: int = 3) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


# --- Anthropic Messages -----------------------------------------------------------------


def anthropic_message(step: Step, model: str, msg_id: str, request_body: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if step.thinking:
        content.append({"type": "thinking", "thinking": step.thinking, "signature": "sig-fake"})
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
        "usage": usage_for(step, len(request_body)),
    }


def anthropic_sse(step: Step, model: str, msg_id: str, request_body: str) -> list[bytes]:
    full = anthropic_message(step, model, msg_id, request_body)
    usage = full["usage"]
    start = dict(full, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
    events = [_sse("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(full["content"]):
        kind = block["type"]
        if kind == "thinking":
            events.append(_block_start(index, {"type": "thinking", "thinking": "", "signature": ""}))
            events += [_delta(index, {"type": "thinking_delta", "thinking": p}) for p in _pieces(block["thinking"])]
            events.append(_delta(index, {"type": "signature_delta", "signature": block["signature"]}))
        elif kind == "text":
            events.append(_block_start(index, {"type": "text", "text": ""}))
            events += [_delta(index, {"type": "text_delta", "text": p}) for p in _pieces(block["text"])]
        else:
            events.append(
                _block_start(index, {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}})
            )
            raw = json.dumps(block["input"])
            events += [_delta(index, {"type": "input_json_delta", "partial_json": p}) for p in _pieces(raw, 2)]
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": full["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


def _block_start(index: int, block: dict[str, Any]) -> bytes:
    return _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})


def _delta(index: int, delta: dict[str, Any]) -> bytes:
    return _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def anthropic_error(step: Step) -> dict[str, Any]:
    return {"type": "error", "error": {"type": step.error_type, "message": step.error_message}}


# --- OpenAI Chat Completions ------------------------------------------------------------

_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "stop_sequence": "stop"}


def _openai_usage(step: Step, request_body: str) -> dict[str, Any]:
    u = usage_for(step, len(request_body))
    prompt = u["input_tokens"] + u["cache_read_input_tokens"]
    return {
        "prompt_tokens": prompt,
        "completion_tokens": u["output_tokens"],
        "total_tokens": prompt + u["output_tokens"],
        "prompt_tokens_details": {"cached_tokens": u["cache_read_input_tokens"]},
    }


def openai_completion(step: Step, model: str, msg_id: str, request_body: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
    if step.thinking:
        message["reasoning_content"] = step.thinking
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
        "usage": _openai_usage(step, request_body),
    }


def openai_sse(step: Step, model: str, msg_id: str, request_body: str) -> list[bytes]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(
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
    events += [chunk({"reasoning_content": p}) for p in _pieces(step.thinking)]
    events += [chunk({"content": p}) for p in _pieces(step.text)]
    for n, c in enumerate(step.tool_calls):
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": n, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}
                    ]
                }
            )
        )
        events += [
            chunk({"tool_calls": [{"index": n, "function": {"arguments": p}}]}) for p in _pieces(json.dumps(c.input), 2)
        ]
    events.append(chunk({}, _FINISH.get(step.final_stop_reason, "stop")))
    events.append(
        _sse(
            None,
            {
                "id": msg_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": _openai_usage(step, request_body),
            },
        )
    )
    events.append(_sse(None, "[DONE]"))
    return events


def openai_error(step: Step) -> dict[str, Any]:
    return {"error": {"message": step.error_message, "type": step.error_type, "code": step.error_status}}
