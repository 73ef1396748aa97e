"""Prompt-cache accounting and the context window of the scripted server.

Sans-IO. A request is cut into *segments* in the order the real APIs cache them (tools, then the
system prompt, then each message's content blocks), each costing about four characters a token of
its canonical JSON (``cache_control`` left out: marking a block does not change its bytes).

Anthropic: a request writes the cache at each of its ``cache_control`` breakpoints; a later request
reads the longest prefix, at any segment boundary up to its last breakpoint, that an earlier request
wrote. ``cache_read_input_tokens`` is that prefix, ``cache_creation_input_tokens`` what lies between it
and the last breakpoint, ``input_tokens`` the rest. OpenAI caches automatically: every message
boundary of every request is written, and ``prompt_tokens_details.cached_tokens`` is the longest
prefix seen before.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Any

from agentkeel.internal import jsonc

FRAMING_TOKENS = 3  # the request's framing, never cached: the real APIs report a few uncached tokens too


def _canon(value: Any) -> str:
    return jsonc.dumps(value, sort_keys=True)


def _strip(block: Any) -> Any:
    if isinstance(block, dict) and "cache_control" in block:
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


@dataclass(frozen=True)
class Segment:
    tokens: int
    breakpoint: bool
    boundary: bool  # a place a cached prefix may end (a message boundary, or any block for Anthropic)
    digest: bytes  # hash of the prefix up to and including this segment


@dataclass(frozen=True)
class PromptFigures:
    total: int  # every input token of the request
    cache_read: int
    cache_creation: int

    @property
    def uncached(self) -> int:
        return max(0, self.total - self.cache_read - self.cache_creation)


def _anthropic_parts(body: dict[str, Any]) -> list[tuple[str, bool, bool]]:
    parts: list[tuple[str, bool, bool]] = []
    for tool in body.get("tools") or []:
        parts.append((_canon(_strip(tool)), isinstance(tool, dict) and "cache_control" in tool, True))
    system = body.get("system")
    if isinstance(system, str) and system:
        parts.append((_canon(system), False, True))
    elif isinstance(system, list):
        for block in system:
            parts.append((_canon(_strip(block)), isinstance(block, dict) and "cache_control" in block, True))
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        parts.append((_canon(msg.get("role")), False, False))
        for block in blocks:
            parts.append((_canon(_strip(block)), isinstance(block, dict) and "cache_control" in block, True))
    return parts


def _openai_parts(body: dict[str, Any]) -> list[tuple[str, bool, bool]]:
    parts = [(_canon(t), False, False) for t in body.get("tools") or []]
    # every message boundary is a write and a place to read from: OpenAI caches prefixes by itself
    parts += [(_canon(m), True, True) for m in body.get("messages") or []]
    return parts


def segments(wire: str, body: dict[str, Any]) -> list[Segment]:
    parts = _anthropic_parts(body) if wire == "anthropic" else _openai_parts(body)
    out: list[Segment] = []
    h = hashlib.blake2b(digest_size=16)
    h.update(_canon(body.get("model", "")).encode())
    for text, breakpoint, boundary in parts:
        h.update(text.encode())
        h.update(b"\x00")
        out.append(Segment(_tokens(text), breakpoint, boundary, h.copy().digest()))
    return out


class PromptCache:
    """What the server has cached so far, shared by all requests (thread-safe)."""

    def __init__(self) -> None:
        self._written: set[bytes] = set()
        self._lock = threading.Lock()

    def account(self, wire: str, body: dict[str, Any]) -> PromptFigures:
        segs = segments(wire, body)
        total = sum(s.tokens for s in segs) + FRAMING_TOKENS
        last_bp = max((i for i, s in enumerate(segs) if s.breakpoint), default=-1)
        with self._lock:
            read_end = -1
            for i in range(last_bp, -1, -1):
                if segs[i].boundary and segs[i].digest in self._written:
                    read_end = i
                    break
            for s in segs[: last_bp + 1]:
                if s.breakpoint:
                    self._written.add(s.digest)
        read = sum(s.tokens for s in segs[: read_end + 1])
        upto_bp = sum(s.tokens for s in segs[: last_bp + 1])
        creation = max(0, upto_bp - read) if wire == "anthropic" else 0
        return PromptFigures(total=total, cache_read=read, cache_creation=creation)


def too_long_error(wire: str, tokens: int, window: int) -> tuple[int, dict[str, Any]]:
    """The real APIs' refusal of a request larger than the context window."""
    if wire == "anthropic":
        message = f"prompt is too long: {tokens} tokens > {window} maximum"
        return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages resulted in "
        f"{tokens} tokens. Please reduce the length of the messages."
    )
    return 400, {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
