"""Slash-command bodies: ``/compact [instructions]``, ``/context``, ``/cost``, ``/memory [edit FILE]``.

Each is ``async def NAME(runtime, args) -> str`` (the text to show); the command registry wires
them in. They reach the session's :class:`ContextManager` through its services.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from agentkeel.context.manager import ContextManager
from agentkeel.core.handle import SessionHandle
from agentkeel.core.provider import ModelRequest


def _manager(runtime: SessionHandle) -> ContextManager:
    mgr = runtime.agent.services.find(ContextManager)
    if mgr is None:
        raise RuntimeError("this session has no context manager")
    return mgr


def current_request(runtime: SessionHandle) -> ModelRequest:
    """What the next request would carry now."""
    return runtime.agent.request()


async def compact(runtime: SessionHandle, args: str) -> str:
    mgr = _manager(runtime)
    request = current_request(runtime)
    if not request.messages:
        return "Nothing to compact yet."
    event = await mgr.compact_messages(request, "manual", args.strip())
    if event is None:
        return "Nothing was compacted (nothing old enough to compact, or a PreCompact hook refused)."
    runtime.agent.append(event)
    return f"Compacted ({event.stage}): {event.tokens_before:,} -> {event.tokens_after:,} tokens."


def _bar(share: float, width: int = 30) -> str:
    filled = min(width, round(share * width))
    return "█" * filled + "░" * (width - filled)


async def context(runtime: SessionHandle, args: str) -> str:
    mgr = _manager(runtime)
    request = current_request(runtime)
    tokens = mgr.tokens(request)
    window = mgr.window
    lines = [
        f"Context: {tokens:,} of {window.usable:,} usable tokens "
        f"({tokens / window.usable:.0%}, {window.state(tokens)}); "
        f"window {window.size:,}, {window.reserve:,} reserved for output; auto-compact at {window.threshold:.0%}",
        _bar(tokens / window.usable),
    ]
    for name, n in mgr.breakdown(request).parts.items():
        if n:
            lines.append(f"  {name:<14} {n:>9,}")
    lines.append(f"Compactions so far: {mgr.accounting.compactions}")
    return "\n".join(lines)


async def cost(runtime: SessionHandle, args: str) -> str:
    mgr = _manager(runtime)
    u = mgr.accounting.usage
    total_in = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
    cached = u.cache_read_tokens / total_in if total_in else 0.0
    return "\n".join(
        [
            f"Total cost:     ${runtime.agent.cost_usd:.4f}",
            f"Requests:       {mgr.accounting.requests}",
            f"Input tokens:   {total_in:,} ({u.cache_read_tokens:,} read from cache, {cached:.0%}; "
            f"{u.cache_write_tokens:,} written to cache)",
            f"Output tokens:  {u.output_tokens:,}",
            *_cache_floor(runtime, mgr),
        ]
    )


def _cache_floor(runtime: SessionHandle, mgr: ContextManager) -> list[str]:
    """The stable prefix (tools, system prompt) against the model's minimum cacheable length: a
    prefix below it is not cached on its own, which the provider reports nowhere."""
    import msgspec

    from agentkeel.models.caching import stable_prefix_chars
    from agentkeel.models.catalog import ModelInfo, min_cache_tokens

    info = runtime.agent.services.find(ModelInfo)
    if info is None:
        return []
    request = mgr.last_request or current_request(runtime)
    minimum = min_cache_tokens(info.provider, request.model)
    if not minimum:
        return []
    if not request.system:
        request = msgspec.structs.replace(request, system=mgr.system_prompt())
    prefix = mgr.estimator.tokens(stable_prefix_chars(request))
    if prefix >= minimum:
        return [
            f"Prompt cache:   stable prefix ~{prefix:,} tokens (tools, system prompt), cached: "
            f"{request.model} caches from {minimum:,}"
        ]
    return [
        f"Prompt cache:   stable prefix ~{prefix:,} tokens (tools, system prompt) is below {request.model}'s "
        f"minimum cacheable length of {minimum:,}: it is not cached on its own, only as part of a "
        f"conversation that reaches {minimum:,} tokens"
    ]


async def memory(runtime: SessionHandle, args: str) -> str:
    mgr = _manager(runtime)
    words = shlex.split(args)
    if words[:1] == ["edit"]:
        return await _edit(mgr, words[1:])
    lines = ["Instruction files loaded (lowest layer first):"]
    for f in mgr.instructions.files:
        why = f.reason.replace("_", " ")
        if f.imported_by is not None:
            why += f" from {f.imported_by}"
        if f.globs:
            why += f" ({', '.join(f.globs)})"
        lines.append(f"  [{f.scope}] {f.path}  ({f.chars:,} chars; {why})")
    pending = [r for r in mgr.instructions.rules if r.path not in mgr.instructions.injected_rules]
    if pending:
        lines.append("Path rules not loaded yet (loaded when a matching file is read or edited):")
        lines += [f"  {r.path}  paths: {', '.join(r.globs)}" for r in pending]
    notes = mgr.warnings()
    if notes:
        lines.append("Notes:")
        lines += [f"  {n}" for n in notes]
    lines.append("Edit one with /memory edit PATH (opens $EDITOR).")
    return "\n".join(lines)


async def _edit(mgr: ContextManager, words: list[str]) -> str:
    if not words:
        return "usage: /memory edit PATH (a file listed by /memory, or a new KEEL.md)"
    path = Path(words[0]).expanduser()
    if not path.is_absolute():
        path = mgr.instructions.cwd / path
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        return f"set $EDITOR to edit {path}"
    # the one spawn outside keel's runner (internal/procs.py): an interactive editor stays in keel's
    # process group, the terminal's foreground one, to read the keyboard and get Ctrl-C and resizes.
    # Without a terminal, keel's standard input and output are a protocol (stream-json, ACP): the
    # editor (a GUI one, `code --wait`) gets no input and writes to stderr, so it cannot eat the
    # host's next message or break a line of keel's output
    terminal = sys.stdin.isatty()
    stdin, stdout = (None, None) if terminal else (asyncio.subprocess.DEVNULL, sys.stderr.fileno())
    proc = await asyncio.create_subprocess_exec(*shlex.split(editor), str(path), stdin=stdin, stdout=stdout)
    code = await proc.wait()
    mgr.builder.invalidate()
    return f"{editor} exited with {code}; the instructions are re-read on the next request."


def result_fields(runtime: SessionHandle) -> dict[str, Any]:
    """The ``context`` key of ``--output-format json``: the window, the context now by source,
    the compactions and the cached share of input tokens."""
    mgr = runtime.agent.services.find(ContextManager)
    if mgr is None:
        return {}
    request = current_request(runtime)
    tokens = mgr.tokens(request)
    u = mgr.accounting.usage
    total_in = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
    return {
        "window": mgr.window.size,
        "usable": mgr.window.usable,
        "tokens": tokens,
        "state": mgr.window.state(tokens),
        "breakdown": mgr.breakdown(request).parts,
        "compactions": mgr.accounting.compactions,
        "cache_read_share": round(u.cache_read_tokens / total_in, 4) if total_in else 0.0,
    }
