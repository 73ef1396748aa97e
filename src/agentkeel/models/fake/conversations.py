"""Stateless scripts for many conversations at once, and a scripted rate limit.

A step-list script hands out steps in arrival order, which is right for one session and wrong
for several sharing a server (a batch, parallel subagents): their requests interleave. A
``conversations`` script instead picks the conversation whose ``match`` text occurs in the
request's first user message (the earliest match in the prompt,
before injected ``<context>``; ``""`` matches any), and answers with its step number *k = assistant messages so far*,
so any number of sessions can run concurrently and each gets its own script::

    {"conversations": [
      {"match": "TASK-1", "steps": [{"tool_calls": [{"name": "<tool>", "input": {"command": "true"}}]}, "done"]},
      {"match": "", "steps": ["the default answer"]}
    ],
     "rate_limit": {"per_minute": 60, "retry_after": 0.5}}

``rate_limit`` answers 429 (with ``retry-after``) to any request beyond ``per_minute`` in the
last 60 seconds (``window_s`` shortens the window for tests), as a provider's rate limiter does;
rejected requests do not count.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Sequence
from typing import Any


class RateLimit:
    """A sliding window (one minute unless ``window_s`` says otherwise) of accepted requests."""

    def __init__(self, per_minute: int, retry_after: float, window_s: float = 60.0) -> None:
        self.per_minute = per_minute
        self.retry_after = retry_after
        self.window_s = window_s
        self._accepted: collections.deque[float] = collections.deque()
        self._lock = threading.Lock()
        self.rejected = 0

    def admit(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        with self._lock:
            while self._accepted and now - self._accepted[0] >= self.window_s:
                self._accepted.popleft()
            if len(self._accepted) >= self.per_minute:
                self.rejected += 1
                return False
            self._accepted.append(now)
            return True


def _texts_of(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return []


def first_user_texts(body: dict[str, Any]) -> list[str]:
    """The text blocks of the first user message."""
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "user":
            texts = [t for t in _texts_of(m.get("content")) if t]
            if texts:
                return texts
    return []


def assistant_turns(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant")


def pick(matches: Sequence[str], body: dict[str, Any]) -> tuple[int | None, int]:
    """Which conversation (by its ``match`` text) this request belongs to, and the step it is at."""
    texts = first_user_texts(body)
    # the prompt before injected context (<memory-context>, <system-reminder>...): blocks that are not
    # a tag first, and within a block the match that occurs earliest (a wire that joins the blocks)
    texts.sort(key=lambda t: t.lstrip().startswith("<"))
    for text in texts:
        found = [(text.find(m), i) for i, m in enumerate(matches) if m and m in text]
        if found:
            return min(found)[1], assistant_turns(body)
    for i, m in enumerate(matches):
        if not m:
            return i, assistant_turns(body)
    return None, 0
