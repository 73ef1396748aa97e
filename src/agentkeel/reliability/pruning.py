"""Context: dynamic context pruning, the cheap per-request one (compaction is agentkeel.context's).

A ``before_request`` transform of the request; the log is never edited, so a pruned result is
still in the transcript and a resumed session prunes it the same way (the same bytes: the prompt
cache keeps its prefix until something new is pruned): a new process takes the conversation it
resumes as cached (nothing far back is pruned at its first request), and prunes again what the live
session pruned at the compaction the view starts at (:class:`~agentkeel.context.state.ResumedView`).

Pruning never costs more than it saves (:func:`pays_off`): pruning a block that sits in the part of
the conversation the provider has cached makes it write everything from there on again (1.25x the
input price, against 0.1x for a cache read), for a saving of 0.1x the pruned size on each later
request until the next compaction. So something new is pruned only when that saving exceeds the
rewrite it causes. In practice that is at a compaction (the whole conversation is written anew:
pruning is free) or early in a session (little to rewrite, many requests to come); a duplicate far
back in a long cached conversation stays until the next compaction. What was pruned once stays
pruned (the same bytes on every later request).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
from msgspec.structs import replace as dc_replace

from agentkeel.context.state import ResumedView
from agentkeel.core.events import EventBus
from agentkeel.core.extensions import Extension
from agentkeel.core.provider import ModelRequest
from agentkeel.core.tools import Effects, Services, ToolRegistry
from agentkeel.core.types import ContentBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock
from agentkeel.reliability.state import ReliabilityState, notice
from agentkeel.tools import effects_of
from agentkeel.tools.views import whole_text_field

EffectsOf = Callable[[str], Effects]  # a tool's declared effects, by name
# prompt caching prices, as a share of the input price (Anthropic's; OpenAI's cache writes cost
# nothing extra, which makes pruning only cheaper than this rule assumes)
CACHE_READ = 0.1
CACHE_WRITE = 1.25
MAX_HORIZON = 1000  # the most requests a saving is counted for
DUPLICATE = "[pruned: the same call ran again later; see its later result]"
SUPERSEDED_READ = "[pruned: {path} was changed after this read; read it again if needed]"
SUPERSEDED_WRITE = "[pruned: {n} characters written; {path} was written or read again later]"
OLD_ERROR = " [older error output pruned]"
SHRUNK = "[pruned to fit the context window: {n} characters]"


class PruneStats(msgspec.Struct):
    duplicates: int = 0
    superseded: int = 0
    errors: int = 0
    shrunk: int = 0

    def total(self) -> int:
        return self.duplicates + self.superseded + self.errors + self.shrunk

    def describe(self) -> str:
        parts = [
            f"{n} {what}"
            for n, what in (
                (self.duplicates, "duplicate call(s)"),
                (self.superseded, "superseded read/write(s)"),
                (self.errors, "old error(s)"),
                (self.shrunk, "block(s) shrunk"),
            )
            if n
        ]
        return ", ".join(parts)


class _Edits(msgspec.Struct):
    results: dict[str, str] = msgspec.field(default_factory=dict)  # tool_use_id -> new content
    inputs: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)  # tool_use_id -> new input


def pays_off(rewritten: int, saved: int, requests_left: int) -> bool:
    """Is pruning ``saved`` tokens worth rewriting ``rewritten`` cached tokens (the cached part from
    the first pruned block on; ``saved`` of them go), over the ``requests_left`` requests before the
    next compaction? Without pruning each of them reads the ``rewritten`` tokens from the cache;
    with it the first writes what is left and the others read it:
    ``WRITE (R - S) + (k - 1) READ (R - S) < k READ R``, i.e.
    ``(WRITE - READ) R < S (WRITE + (k - 1) READ)``. Nothing cached to rewrite: always (free)."""
    if rewritten <= 0:
        return True  # nothing cached from the pruned block on: it is written anew anyway
    if saved <= 0:
        return False
    k = max(1, min(requests_left, MAX_HORIZON))
    return (CACHE_WRITE - CACHE_READ) * rewritten < saved * (CACHE_WRITE + (k - 1) * CACHE_READ)


def cached_prefix(before: list[Message], now: list[Message]) -> int:
    """How many leading messages ``now`` shares with ``before`` (the last request's): the part the
    provider has cached. A compaction starts the view over: 0."""
    n = 0
    for a, b in zip(before, now, strict=False):
        if a is not b and a != b:
            break
        n += 1
    return n


def protected_from(messages: list[Message], turns: int) -> int:
    """Index of the first message of the last ``turns`` assistant turns (len(messages) for 0)."""
    if turns <= 0:
        return len(messages)
    seen = 0
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant":
            seen += 1
            if seen == turns:
                return i
    return 0


def _path(use: ToolUseBlock, effects: Effects) -> str:
    for field in effects.path_fields:
        value = use.input.get(field)
        if isinstance(value, str) and value:
            return value
    return ""


def _key(use: ToolUseBlock) -> bytes:
    try:
        return use.name.encode() + b"\0" + msgspec.json.encode(use.input, order="sorted")
    except (TypeError, msgspec.EncodeError):
        return use.name.encode() + b"\0" + repr(use.input).encode()


def prune(
    messages: list[Message], protect_turns: int, protect_tools: Iterable[str] = (), effects: EffectsOf = effects_of
) -> tuple[list[Message], PruneStats]:
    """Dedupe identical calls, supersede reads and writes of a file changed later, cut old error
    output; nothing in the last ``protect_turns`` turns, of a tool whose effects say its result is
    protected (todos, skills, subagents) or of a listed tool is touched. ``effects``: a tool's
    declared effects by name (the session's tools; the built-ins' by default)."""
    edits, stats = _plan(messages, protect_turns, protect_tools, effects)
    return _apply(messages, edits), stats


def _plan(
    messages: list[Message], protect_turns: int, protect_tools: Iterable[str] = (), effects: EffectsOf = effects_of
) -> tuple[_Edits, PruneStats]:
    stats = PruneStats()
    limit = protected_from(messages, protect_turns)
    listed = set(protect_tools)
    uses: list[tuple[int, ToolUseBlock]] = [(i, b) for i, m in enumerate(messages) for b in m.tool_uses()]
    declared = {use.name: effects(use.name) for _, use in uses}
    results = {b.tool_use_id: b for m in messages for b in m.tool_results()}
    edits = _Edits()
    keys = [_key(use) for _, use in uses]
    last_key: dict[bytes, int] = {}
    last_write: dict[str, int] = {}
    last_touch: dict[str, int] = {}
    for n, (_, use) in enumerate(uses):
        last_key[keys[n]] = n
        path = _path(use, declared[use.name])
        if path:
            last_touch[path] = n
            if declared[use.name].writes:
                last_write[path] = n
    for n, (i, use) in enumerate(uses):
        does = declared[use.name]
        if i >= limit or does.protected or use.name in listed:
            continue
        result = results.get(use.id)
        path = _path(use, does)
        if last_key[keys[n]] > n and result is not None and result.text() != DUPLICATE:
            edits.results[use.id] = DUPLICATE
            stats.duplicates += 1
        elif does.reads and path and last_write.get(path, -1) > n and result is not None:
            edits.results[use.id] = SUPERSEDED_READ.format(path=path)
            stats.superseded += 1
        elif result is not None and result.is_error and len(result.text()) > 300:
            first = result.text().splitlines()[0][:200] if result.text().strip() else ""
            edits.results[use.id] = first + OLD_ERROR
            stats.errors += 1
        field = whole_text_field(use.name) if does.writes else None
        if field is not None and path and last_touch.get(path, -1) > n:
            content = use.input.get(field)
            if isinstance(content, str) and len(content) > 200:
                edits.inputs[use.id] = {**use.input, field: SUPERSEDED_WRITE.format(n=len(content), path=path)}
                stats.superseded += 1
    return edits, stats


def shrink(messages: list[Message], keep_turns: int = 1) -> tuple[list[Message], PruneStats]:
    """After "prompt is too long": every tool result, long text and long tool input outside the last
    ``keep_turns`` turns is cut to a marker (the log keeps them; a Read brings a file back)."""
    stats = PruneStats()
    limit = protected_from(messages, keep_turns)
    edits = _Edits()
    out: list[Message] = []
    for i, msg in enumerate(messages):
        if i >= limit:
            out.append(msg)
            continue
        blocks: list[ContentBlock] = []
        for b in msg.content:
            if isinstance(b, ToolResultBlock) and len(b.text()) > 200:
                b = ToolResultBlock(
                    tool_use_id=b.tool_use_id, content=SHRUNK.format(n=len(b.text())), is_error=b.is_error
                )
                stats.shrunk += 1
            elif isinstance(b, TextBlock) and len(b.text) > 2000:
                b = TextBlock(text=b.text[:1000] + "\n" + SHRUNK.format(n=len(b.text) - 1000))
                stats.shrunk += 1
            elif isinstance(b, ToolUseBlock) and len(json.dumps(b.input, default=str)) > 1000:
                small = {
                    k: (SHRUNK.format(n=len(v)) if isinstance(v, str) and len(v) > 200 else v)
                    for k, v in b.input.items()
                }
                b = ToolUseBlock(id=b.id, name=b.name, input=small)
                stats.shrunk += 1
            blocks.append(b)
        out.append(Message(role=msg.role, content=blocks))
    return _apply(out, edits), stats


def _apply(messages: list[Message], edits: _Edits) -> list[Message]:
    if not edits.results and not edits.inputs:
        return messages
    out: list[Message] = []
    for msg in messages:
        blocks: list[ContentBlock] = []
        changed = False
        for b in msg.content:
            if isinstance(b, ToolResultBlock) and b.tool_use_id in edits.results:
                b, changed = (
                    ToolResultBlock(
                        tool_use_id=b.tool_use_id, content=edits.results[b.tool_use_id], is_error=b.is_error
                    ),
                    True,
                )
            elif isinstance(b, ToolUseBlock) and b.id in edits.inputs:
                b, changed = ToolUseBlock(id=b.id, name=b.name, input=edits.inputs[b.id]), True
            blocks.append(b)
        out.append(Message(role=msg.role, content=blocks) if changed else msg)
    return out


def context_pruning(bus: EventBus, state: ReliabilityState, services: Services | None = None) -> Extension:
    """Failure: a long session fills its context window with output the model no longer needs (the
    same file read five times, a file's old content after it was rewritten, yesterday's stack
    traces), costing tokens on every request and ending in "prompt is too long". Fix: before each
    request, identical earlier calls, reads and writes superseded by a later change and old error
    output are replaced by short markers; the last turns (``reliability.pruneProtectTurns``) and the
    listed tools (``reliability.pruneProtectTools``, and those whose effects say ``protected``:
    TodoWrite, Task, Skill) are never touched.
    Pruning rewrites old messages, so the provider's prompt cache loses its prefix each time
    something new is pruned: it starts only once the reported context is
    ``reliability.pruneAtPercent`` (50) full, and something new is pruned only when the saving
    exceeds the cache rewrite it causes (:func:`pays_off`; in practice at a compaction). After a
    "prompt is too long", session recovery turns on ``shrink`` and older results are cut too."""
    reported = [0]
    applied: set[str] = set()  # tool_use ids pruned once: pruned the same way from then on
    # the last request's messages, before pruning; None before this process's first request
    last: list[list[Message] | None] = [None]
    used: list[int] = []  # the reported context at the last requests (its growth per request)

    def effects(name: str) -> Effects:
        """The session's tool's effects (MCP, plugin, agent tools declare theirs), else a built-in's."""
        registry = services.find(ToolRegistry) if services is not None else None
        tool = registry.get(name) if registry is not None else None
        return tool.effects if tool is not None else effects_of(name)

    def requests_left() -> int:
        """Requests before the context reaches the compaction threshold, at its recent growth."""
        window = state.context_window
        if window <= 0:
            return 10
        growth = (used[-1] - used[0]) / (len(used) - 1) if len(used) > 1 else 0.0
        growth = max(growth, window * 0.01)  # unknown or flat: a cautious 1 % of the window a request
        return int(max(0, window * 0.8 - state.last_input_tokens) / growth) + 1

    def accepted(messages: list[Message], edits: _Edits) -> _Edits:
        """The edits made before, and the new ones when they pay for the cache rewrite they cause."""
        new = {k for k in [*edits.results, *edits.inputs] if k not in applied}
        if new:
            # this process's first request: a resumed conversation, cached as the last process sent
            # it (a new one is one message, nothing to prune)
            cached = cached_prefix(last[0], messages) if last[0] is not None else len(messages)
            first, saved = len(messages), 0
            for i, msg in enumerate(messages):
                for b in msg.content:
                    key = (
                        b.tool_use_id if isinstance(b, ToolResultBlock) else b.id if isinstance(b, ToolUseBlock) else ""
                    )
                    if key not in new:
                        continue
                    first = min(first, i)
                    if isinstance(b, ToolResultBlock) and key in edits.results:
                        saved += max(0, len(b.text()) - len(edits.results[key]))
                    elif isinstance(b, ToolUseBlock) and key in edits.inputs:
                        saved += max(0, len(json.dumps(b.input, default=str)) - len(json.dumps(edits.inputs[key])))
            rewritten = sum(len(msgspec.json.encode(m)) for m in messages[first:cached])
            if state.shrink or pays_off(rewritten, saved, requests_left()):
                applied.update(new)
        return _Edits(
            results={k: v for k, v in edits.results.items() if k in applied},
            inputs={k: v for k, v in edits.inputs.items() if k in applied},
        )

    def resumed(messages: list[Message]) -> None:
        """What the live session pruned at the compaction its view starts at, pruned again: the
        first request after a compaction rewrites everything, so it pruned all it could then (when
        the context was past ``pruneAtPercent``)."""
        view = services.find(ResumedView) if services is not None else None
        if view is None or not 0 < view.messages <= len(messages) or state.context_window <= 0:
            return
        if view.tokens_before * 100 < state.config.pruneAtPercent * state.context_window:
            return
        cfg = state.config
        edits, _ = _plan(messages[: view.messages], cfg.pruneProtectTurns, cfg.pruneProtectTools, effects)
        applied.update([*edits.results, *edits.inputs])

    async def before_request(request: ModelRequest) -> ModelRequest:
        cfg = state.config
        if last[0] is None:
            resumed(request.messages)
        used.append(state.last_input_tokens)
        del used[:-10]
        try:
            if not state.shrink and state.used_fraction() * 100 < cfg.pruneAtPercent and not applied:
                return request  # the context has room: keep the prompt cache's prefix intact
            edits, stats = _plan(request.messages, cfg.pruneProtectTurns, cfg.pruneProtectTools, effects)
            kept = accepted(request.messages, edits)
            messages = _apply(request.messages, kept)
            stats = _count(request.messages, kept, stats)
        finally:
            last[0] = request.messages
        if state.shrink:
            messages, more = shrink(messages, keep_turns=1)
            stats.shrunk = more.shrunk
        if not stats.total():
            return request
        if stats.total() != reported[0]:  # say so when something new was pruned, not at every request
            reported[0] = stats.total()
            notice(bus, "dynamic-context-pruning", f"pruned from the request: {stats.describe()}")
        return dc_replace(request, messages=messages)

    return Extension("dynamic-context-pruning", before_request=before_request)


def _count(messages: list[Message], edits: _Edits, planned: PruneStats) -> PruneStats:
    """The stats of the edits kept (all of them: the planned figures; else by kind of marker)."""
    total = len(edits.results) + len(edits.inputs)
    if total == planned.total():
        return planned
    stats = PruneStats()
    for text in edits.results.values():
        if text == DUPLICATE:
            stats.duplicates += 1
        elif text.endswith(OLD_ERROR):
            stats.errors += 1
        else:
            stats.superseded += 1
    stats.superseded += len(edits.inputs)
    return stats
