"""The scripted model: a script file of steps, each one model reply (or an error).

Sans-IO: this module reads a script and hands out its steps; :mod:`agentkeel.models.fake.render`
turns a step into the bytes of an Anthropic Messages or OpenAI Chat Completions response
(streamed as SSE or whole). The HTTP server and the in-process provider both use them.

Script file (JSON)::

    {"steps": [
      "plain text reply",
      {"text": "Reading it.", "tool_calls": [{"name": "<tool>", "input": {"file_path": "a.txt"}}]},
      {"thinking": "hmm", "signature": "sig-1", "text": "answer", "usage": {"input_tokens": 10, "output_tokens": 3}},
      {"redacted_thinking": ["opaque-blob"], "text": "answer"},
      {"error": {"status": 429, "retry_after": 0.05}},
      {"error": {"status": 429, "retry_after_ms": 50}},
      {"text": "this stream breaks", "break_after": 3},
      {"text": "this connection is reset", "reset_after": 3},
      {"text": "an error event mid-stream", "stream_error": {"type": "overloaded_error", "after": 3}},
      {"text": "stalls after the headers", "stall_after": 0, "stall_s": 30},
      {"empty_body": true},
      {"text": "slow", "delay_s": 2}
    ],
     "loop": false}

Stream faults count SSE events: ``break_after`` sends that many and closes the connection,
``reset_after`` resets it (TCP RST), ``stream_error`` sends an ``error`` event after ``after``
events (Anthropic: ``event: error``; OpenAI: a ``data: {"error": ...}`` chunk), ``stall_after``
sends that many and then nothing for ``stall_s`` seconds. ``empty_body`` answers 200 with no body;
``ignore_stream`` answers with the whole JSON response, as servers that do not stream do.
``{"error": {"status": 200, "type": "overloaded_error"}}`` is a 200 whose JSON body is an error.
For OpenAI, ``"reasoning_key": "reasoning"`` streams thinking as OpenRouter and Ollama do (default
``reasoning_content``, as DeepSeek and vLLM) and ``"interleave_tool_calls": true`` interleaves
the argument deltas of parallel tool calls.

Top-level options: ``"context_window": 30000`` makes the server refuse a request of more input
tokens than that with the real APIs' error (Anthropic's 400 ``prompt is too long: N tokens > W
maximum``, OpenAI's ``context_length_exceeded``); ``"match": [{"contains": "TEXT", "steps": [...]}]``
answers every request whose body contains TEXT with that rule's steps, in turn (the last one
repeats), without advancing the main script: the side requests of a client (a summariser) can be
scripted apart from the conversation.

keel's own summariser requests (compaction: the body holds ``<keel-compact-request>``) that no
match rule answers get a short deterministic summary and use no step either, so a scripted
conversation plays the same whether or not keel compacts along the way.

Every request consumes one step. When the steps run out the model answers
``[fake-llm: script exhausted]`` (or starts over with ``"loop": true``).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentkeel.models.fake.cache import PromptFigures

from agentkeel.models.fake.conversations import RateLimit, pick

EXHAUSTED = "[fake-llm: script exhausted]"
# the mark keel's compaction puts in a summariser request (agentkeel.context.compaction.COMPACT_MARK)
SUMMARY_REQUEST_MARK = "<keel-compact-request>"


@dataclass(frozen=True)
class ScriptedToolCall:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class StreamFault:
    """An ``error`` event sent after ``after`` events of an otherwise normal stream."""

    type: str
    message: str
    after: int


@dataclass(frozen=True)
class Step:
    text: str = ""
    thinking: str = ""
    signature: str = "sig-fake"
    redacted_thinking: tuple[str, ...] = ()
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    stop_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    error_status: int | None = None
    error_type: str = ""
    error_message: str = ""
    retry_after: float | None = None
    retry_after_ms: float | None = None
    break_after: int | None = None  # close the connection after this many events
    reset_after: int | None = None  # reset the connection (RST) after this many events
    stall_after: int | None = None  # send this many events, then nothing for stall_s
    stall_s: float = 30.0
    stream_error: StreamFault | None = None
    empty_body: bool = False
    ignore_stream: bool = False  # answer with the whole JSON response even when asked to stream
    delay_s: float = 0.0
    reasoning_key: str = "reasoning_content"
    interleave_tool_calls: bool = False

    @property
    def final_stop_reason(self) -> str:
        if self.stop_reason:
            return self.stop_reason
        return "tool_use" if self.tool_calls else "end_turn"


class ScriptError(ValueError):
    pass


@dataclass(frozen=True)
class Conversation:
    """One session's script in a ``conversations`` script (see agentkeel.models.fake.conversations)."""

    match: str
    steps: list[Step]


ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}


def _opt_float(raw: dict[str, Any], key: str, index: int) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScriptError(f"step {index}: '{key}' must be a number")
    return float(value)


def _opt_int(raw: dict[str, Any], key: str, index: int) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScriptError(f"step {index}: '{key}' must be a whole number >= 0")
    return value


def _error_step(err: Any, index: int) -> Step:
    if not isinstance(err, dict) or not isinstance(err.get("status"), int):
        raise ScriptError(f"step {index}: 'error' needs an integer 'status'")
    status = int(err["status"])
    return Step(
        error_status=status,
        error_type=str(err.get("type") or ERROR_TYPES.get(status, "api_error")),
        error_message=str(err.get("message") or f"scripted error {status}"),
        retry_after=_opt_float(err, "retry_after", index),
        retry_after_ms=_opt_float(err, "retry_after_ms", index),
    )


def _stream_fault(raw: Any, index: int) -> StreamFault | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ScriptError(f"step {index}: 'stream_error' must be an object")
    kind = str(raw.get("type") or "overloaded_error")
    after = _opt_int(raw, "after", index)
    return StreamFault(kind, str(raw.get("message") or kind.replace("_", " ")), 1 if after is None else after)


def parse_step(raw: Any, index: int) -> Step:
    if isinstance(raw, str):
        return Step(text=raw)
    if not isinstance(raw, dict):
        raise ScriptError(f"step {index}: expected a string or an object, got {type(raw).__name__}")
    if "error" in raw:
        return _error_step(raw["error"], index)
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
    redacted = raw.get("redacted_thinking") or []
    if not isinstance(redacted, list) or not all(isinstance(x, str) for x in redacted):
        raise ScriptError(f"step {index}: redacted_thinking must be a list of strings")
    reasoning_key = str(raw.get("reasoning_key") or "reasoning_content")
    if reasoning_key not in ("reasoning_content", "reasoning"):
        raise ScriptError(f"step {index}: reasoning_key must be 'reasoning_content' or 'reasoning'")
    return Step(
        text=str(raw.get("text", "")),
        thinking=str(raw.get("thinking", "")),
        signature=str(raw.get("signature") or "sig-fake"),
        redacted_thinking=tuple(redacted),
        tool_calls=tuple(calls),
        stop_reason=raw.get("stop_reason"),
        usage={str(k): int(v) for k, v in usage.items()},
        break_after=_opt_int(raw, "break_after", index),
        reset_after=_opt_int(raw, "reset_after", index),
        stall_after=_opt_int(raw, "stall_after", index),
        stall_s=_opt_float(raw, "stall_s", index) or 30.0,
        stream_error=_stream_fault(raw.get("stream_error"), index),
        empty_body=bool(raw.get("empty_body", False)),
        ignore_stream=bool(raw.get("ignore_stream", False)),
        delay_s=float(raw.get("delay_s", 0.0)),
        reasoning_key=reasoning_key,
        interleave_tool_calls=bool(raw.get("interleave_tool_calls", False)),
    )


@dataclass(frozen=True)
class MatchRule:
    contains: str
    steps: tuple[Step, ...]


@dataclass
class Script:
    steps: list[Step]
    loop: bool = False
    context_window: int | None = None
    match: list[MatchRule] = field(default_factory=list)
    # stateless per-conversation scripts and a rate limit: see agentkeel.models.fake.conversations
    conversations: tuple[Conversation, ...] = ()
    rate_limit: RateLimit | None = None

    @classmethod
    def from_data(cls, data: Any) -> Script:
        if isinstance(data, list):
            data = {"steps": data}
        if isinstance(data, dict) and "conversations" in data:
            return cls._with_conversations(data)
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            raise ScriptError("a script is a JSON object with a 'steps' list (or a 'conversations' list)")
        window = _window(data)
        rules: list[MatchRule] = []
        for n, rule in enumerate(data.get("match") or []):
            if not isinstance(rule, dict) or not isinstance(rule.get("contains"), str) or not rule["contains"]:
                raise ScriptError(f"match[{n}] needs a non-empty 'contains' string")
            raw_steps = rule.get("steps")
            if not isinstance(raw_steps, list) or not raw_steps:
                raise ScriptError(f"match[{n}] needs a non-empty 'steps' list")
            rules.append(MatchRule(rule["contains"], tuple(parse_step(x, 1000 + i) for i, x in enumerate(raw_steps))))
        return cls(
            [parse_step(s, i) for i, s in enumerate(data["steps"])],
            loop=bool(data.get("loop", False)),
            context_window=window or None,
            match=rules,
            rate_limit=_rate_limit(data.get("rate_limit")),
        )

    @classmethod
    def _with_conversations(cls, data: dict[str, Any]) -> Script:
        raw = data["conversations"]
        if not isinstance(raw, list):
            raise ScriptError("'conversations' must be a list of {match, steps}")
        convs: list[Conversation] = []
        for i, c in enumerate(raw):
            if not isinstance(c, dict) or not isinstance(c.get("steps"), list):
                raise ScriptError(f"conversation {i}: needs a 'steps' list")
            steps = [parse_step(s, j) for j, s in enumerate(c["steps"])]
            convs.append(Conversation(str(c.get("match", "")), steps))
        limit = _rate_limit(data.get("rate_limit"))
        return cls([], context_window=_window(data), conversations=tuple(convs), rate_limit=limit)

    @classmethod
    def load(cls, path: str | Path) -> Script:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise ScriptError(f"cannot read script {path}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise ScriptError(f"script {path} is not valid JSON: {e}") from None
        return cls.from_data(data)


def _window(data: dict[str, Any]) -> int | None:
    window = data.get("context_window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ScriptError("'context_window' must be a whole number of tokens >= 1")
    return window or None


def _rate_limit(raw: Any) -> RateLimit | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("per_minute"), int) or raw["per_minute"] < 1:
        raise ScriptError("'rate_limit' needs a positive integer 'per_minute'")
    return RateLimit(int(raw["per_minute"]), float(raw.get("retry_after", 1.0)), float(raw.get("window_s", 60.0)))


class ScriptCursor:
    """Thread-safe position in a script; also records every request it answered."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self._index = 0
        self._lock = threading.Lock()
        self._matched: dict[int, int] = {}  # rule index -> steps of it played
        self.requests: list[dict[str, Any]] = []

    def reset(self, script: Script | None = None) -> None:
        """Start over, optionally with another script (requests already recorded are kept)."""
        with self._lock:
            if script is not None:
                self.script = script
            self._index = 0

    def record(self, request: dict[str, Any]) -> None:
        """A request answered outside the script (refused as over the window): logged, no step used."""
        with self._lock:
            self.requests.append(request)

    def next(self, request: dict[str, Any] | None = None, raw: str = "") -> Step:
        limit = self.script.rate_limit
        if limit is not None and not limit.admit():
            with self._lock:
                if request is not None:
                    self.requests.append({**request, "rate_limited": True})
            return _error_step({"status": 429, "retry_after": limit.retry_after}, -1)
        if self.script.conversations:
            return self._conversation_step(request)
        with self._lock:
            if request is not None:
                self.requests.append(request)
            raw = raw or _summary_request_text(request)
            for n, rule in enumerate(self.script.match):
                if raw and rule.contains in raw:
                    played = self._matched.get(n, 0)
                    self._matched[n] = played + 1
                    if request is not None:
                        request["matched"] = rule.contains
                    return rule.steps[min(played, len(rule.steps) - 1)]
            if SUMMARY_REQUEST_MARK in raw:
                if request is not None:
                    request["matched"] = SUMMARY_REQUEST_MARK
                return Step(text=f"[fake-llm summary] {len(raw)} characters of conversation were summarised.")
            steps = self.script.steps
            if self._index >= len(steps):
                if not (self.script.loop and steps):
                    return Step(text=EXHAUSTED)
                self._index = 0
            step = steps[self._index]
            self._index += 1
            return step

    def _conversation_step(self, request: dict[str, Any] | None) -> Step:
        body = (request or {}).get("body") or {}
        with self._lock:
            if request is not None:
                self.requests.append(request)
        convs = self.script.conversations
        i, k = pick([c.match for c in convs], body)
        if i is None or k >= len(convs[i].steps):
            return Step(text=EXHAUSTED)
        return convs[i].steps[k]


def _summary_request_text(request: dict[str, Any] | None) -> str:
    """The text of the last message of an in-process request (a ModelRequest, duck-typed): where a
    summariser request has its mark, whether it is the one message of a transcript or the
    instruction at the end of the conversation's last user message (cheap: the rest of a
    conversation is never inspected)."""
    model_request = (request or {}).get("request")
    messages = getattr(model_request, "messages", None)
    if not isinstance(messages, list) or not messages:
        return ""
    text = getattr(messages[-1], "text", None)
    found = str(text()) if callable(text) else ""
    return found if len(messages) == 1 or SUMMARY_REQUEST_MARK in found else ""


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


def usage_for(step: Step, request_chars: int, prompt: PromptFigures | None = None) -> dict[str, int]:
    """A step's usage: its own figures, else about four characters a token (the request's length in),
    split into uncached, cache-read and cache-written input as the server's prompt cache counted it."""
    out_text = step.text + step.thinking + "".join(json.dumps(c.input) for c in step.tool_calls)
    usage = {
        "input_tokens": max(1, request_chars // 4) if prompt is None else prompt.uncached,
        "output_tokens": estimate_tokens(out_text),
        "cache_read_input_tokens": 0 if prompt is None else prompt.cache_read,
        "cache_creation_input_tokens": 0 if prompt is None else prompt.cache_creation,
    }
    usage.update(step.usage)
    return usage
