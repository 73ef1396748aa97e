"""Execution safety around tool calls: the result guard, a circuit breaker for external
tools and loop ("doom loop") detection. Each is a loop extension; none is in the core.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import msgspec

from agentkeel.core.events import Checkpoint, Event, Notice
from agentkeel.core.extensions import Extension, PromptInfo, ToolCall, Verdict
from agentkeel.core.provider import ModelRequest
from agentkeel.core.run import RunStopped
from agentkeel.core.tools import ToolOutput
from agentkeel.core.types import TextBlock
from agentkeel.policy.redact import redact

log = logging.getLogger("agentkeel.policy.safety")

NO_RESULT = "[No result returned]"
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):\n(?:[ \t].*\n?)+")
_TAG = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>|<[^>]+>", re.S | re.I)


def clean_text(text: str) -> str:
    """Terminal escapes and control characters out (tab, newline and carriage return stay);
    also the invisible bidi and zero-width characters used to hide instructions."""
    return _CONTROL.sub("", _ANSI.sub("", text))


def looks_like_html(text: str) -> bool:
    head = text.lstrip()[:200].lower()
    return head.startswith(("<!doctype html", "<html")) or len(re.findall(r"</?[a-z][a-z0-9]*[^>]*>", text[:5000])) > 20


class ResultGuard(msgspec.Struct):
    """An ``after_tool`` extension every result passes before the model or a transcript sees it."""

    html_allowed: frozenset[str] = frozenset()  # external tools whose output keeps its HTML (none by default)

    async def __call__(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        guarded = await self._guard(call, output)
        external = call.tool is not None and call.tool.is_external
        guarded.notes = [self._text(n, call.name, external) for n in output.notes]  # a hook's context too
        return guarded

    async def _guard(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        content: Any = output.content
        external = call.tool is not None and call.tool.is_external
        if content is None or (isinstance(content, str) and not content.strip()) or content == []:
            return ToolOutput(NO_RESULT, output.is_error, self._public(output.metadata))
        if isinstance(content, list):
            blocks = [
                TextBlock(text=self._text(b.text, call.name, external)) if isinstance(b, TextBlock) else b
                for b in content
            ]
            return ToolOutput(blocks, output.is_error, self._public(output.metadata))
        if not isinstance(content, str):
            content = json.dumps(content, default=str, ensure_ascii=False)
        return ToolOutput(self._text(content, call.name, external), output.is_error, self._public(output.metadata))

    def _text(self, text: str, tool: str, external: bool) -> str:
        text = clean_text(text)
        if external:
            text = _TRACEBACK.sub("[internal traceback removed]\n", text)
            if tool not in self.html_allowed and looks_like_html(text):
                text = re.sub(r"\n{3,}", "\n\n", _TAG.sub("", text))
        return redact(text) or NO_RESULT

    @staticmethod
    def _public(metadata: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in metadata.items() if k != "details" and not k.startswith("_")}


State = Literal["closed", "open", "half-open"]


class _Circuit(msgspec.Struct):
    state: State = "closed"
    failures: int = 0
    opened_at: float = 0.0


class CircuitBreaker(msgspec.Struct):
    """Per external tool: ``threshold`` failures in a row open the circuit; calls are refused
    for ``cooldown_s``; then one trial call (half-open) closes or re-opens it."""

    emit: Callable[[Event], None]
    threshold: int = 3
    cooldown_s: float = 30.0
    clock: Callable[[], float] = time.monotonic
    circuits: dict[str, _Circuit] = msgspec.field(default_factory=dict)

    def _key(self, call: ToolCall) -> str | None:
        if call.tool is None or not call.tool.is_external:
            return None
        if call.name.startswith("mcp__"):
            return "mcp__" + call.name.split("__")[1]  # a server fails as a whole
        return call.name

    async def before(self, call: ToolCall) -> Verdict | None:
        key = self._key(call)
        if key is None:
            return None
        c = self.circuits.setdefault(key, _Circuit())
        if c.state == "open":
            waited = self.clock() - c.opened_at
            if waited < self.cooldown_s:
                return Verdict(
                    "deny",
                    f"{key} failed {c.failures} times in a row; keel paused it for "
                    f"{self.cooldown_s - waited:.0f}s more. Continue without it or try again later.",
                    "circuit-breaker",
                )
            self._set(key, c, "half-open")
        return None

    async def after(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        key = self._key(call)
        if key is None:
            return output
        c = self.circuits.setdefault(key, _Circuit())
        if not output.is_error:
            c.failures = 0
            if c.state != "closed":
                self._set(key, c, "closed")
            return output
        c.failures += 1
        if c.state == "half-open" or c.failures >= self.threshold:
            c.opened_at = self.clock()
            self._set(key, c, "open")
        return output

    def _set(self, key: str, c: _Circuit, state: State) -> None:
        c.state = state
        level: Literal["info", "warning"] = "warning" if state == "open" else "info"
        self.emit(Notice(level=level, message=f"circuit breaker for {key}: {state}"))


AskRepeat = Callable[[ToolCall, int], Awaitable[bool]]

LOOP_STOP_AFTER = 3  # refusals in one run the model ignored before the loop detector ends the run


class LoopDetector(msgspec.Struct):
    """The same tool with the same input ``limit`` times within the last ``window`` calls: ask the
    user whether to go on (interactive) or refuse the call with advice (headless, or the user said
    no). A model that keeps repeating after ``stop_after`` refusals in one run is not going to
    change course: the run ends before its next request (a model repeating one call made 843
    requests a minute, forever). The counts start over with each prompt.

    What counts as "the same call" is :meth:`key`. A change to the files between two identical
    calls is progress, not a loop: ``pytest`` run again after an Edit is how a fix is checked, so a
    call only counts the repeats made since another call last changed a file (an Edit, Write or
    NotebookEdit that succeeded, or any call a :class:`Checkpoint` says changed files, a Bash
    ``sed -i`` included). The repeated call's own changes do not count: ``echo x >> log`` run three
    times is still a loop."""

    ask: AskRepeat | None = None
    limit: int = 3
    window: int = 10
    stop_after: int = LOOP_STOP_AFTER
    recent: deque[tuple[int, str]] = msgspec.field(default_factory=lambda: deque(maxlen=10))  # (seq, key)
    refused: list[str] = msgspec.field(default_factory=list)  # this run's refused calls, by tool name
    seq: int = 0  # calls seen this prompt
    calls: dict[str, tuple[int, str]] = msgspec.field(default_factory=dict)  # tool_use_id -> (seq, key)
    changes: dict[str, int] = msgspec.field(default_factory=dict)  # key -> seq of its last call that changed files

    def __post_init__(self) -> None:
        self.recent = deque(maxlen=self.window)

    def extension(self) -> Extension:
        return Extension(
            "loop-detector",
            before_tool=self,
            after_tool=self.after_tool,
            before_request=self.before_request,
            on_prompt=self.on_prompt,
            subscribers=[self.on_event],
        )

    @staticmethod
    def key(call: ToolCall) -> str | None:
        try:
            return call.name + "\0" + json.dumps(call.input, sort_keys=True, default=str)
        except (TypeError, ValueError):
            return None

    async def on_prompt(self, info: PromptInfo) -> None:
        self.recent.clear()
        self.refused.clear()
        self.calls.clear()
        self.changes.clear()

    async def before_request(self, request: ModelRequest) -> ModelRequest:
        if len(self.refused) >= self.stop_after:
            names = ", ".join(dict.fromkeys(self.refused))
            raise RunStopped(
                f"loop detected: the model kept repeating the same call ({names}); keel refused it "
                f"{len(self.refused)} times and stopped the run"
            )
        return request

    def changed_files(self, call_id: str) -> None:
        """The call ``call_id`` changed files: calls after it start a new count."""
        seen = self.calls.get(call_id)
        if seen is not None:
            seq, key = seen
            self.changes[key] = max(self.changes.get(key, -1), seq)

    def on_event(self, event: Event) -> None:
        if isinstance(event, Checkpoint) and event.source == "tool" and event.files:
            self.changed_files(event.tool_use_id)

    async def after_tool(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        # without checkpoints (a session that keeps no log) a file tool's success is the evidence
        if call.tool is not None and call.tool.effects.writes and not output.is_error:
            self.changed_files(call.id)
        return output

    def repeats(self, key: str) -> int:
        """The calls with this key in the window made since another call last changed a file."""
        since = max((seq for k, seq in self.changes.items() if k != key), default=-1)
        return sum(1 for seq, k in self.recent if k == key and seq > since)

    async def __call__(self, call: ToolCall) -> Verdict | None:
        key = self.key(call)
        if key is None:
            return None
        self.seq += 1
        self.recent.append((self.seq, key))
        self.calls[call.id] = (self.seq, key)
        if len(self.calls) > 4 * self.window:  # only calls still in reach matter
            del self.calls[next(iter(self.calls))]
        count = self.repeats(key)
        if count < self.limit:
            return None
        if self.ask is not None:
            try:
                if await self.ask(call, count):
                    self.recent.clear()
                    return None
            except Exception:
                log.exception("loop-detection prompt failed")
        self.refused.append(call.name)
        return Verdict(
            "deny",
            f"{call.name} was called with the same input {count} times in the last {self.window} calls; the result "
            "will not change. Stop repeating it: try a different approach, or explain what is blocking you.",
            "loop-detection",
        )
