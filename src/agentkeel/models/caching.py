"""What prompt caching needs from a request, for every wire format: the same stable prefix in
every session of a project, then what changes.

Text that changes between sessions of a project (today's date, the skills listing) is written as
a *session part*, ``session_part(text)``, at the end of the system prompt or of a tool's
description. The wire formats send the stable text first (the tools with their stable
descriptions, the system prompt without its session part), then every session part, in one block
of their own after the stable prefix: two sessions of a project, on two dates or either side of
a skill edit, send byte-identical tools and system prompt, and the provider's cache of that prefix
serves both. A wire that did not move them would still send readable text (a tagged block).

Anthropic caches a prefix only up to a ``cache_control`` breakpoint and only from a minimum length
per model (the catalog's ``min_cache_tokens``): :func:`stable_breakpoints` says which of the
stable breakpoints can be written at all; one below the minimum is left out (its slot goes to the
conversation) and ``/cost`` says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from agentkeel.core.provider import ModelRequest
from agentkeel.core.types import ToolSpec

SESSION_OPEN = "<session-context>"
SESSION_CLOSE = "</session-context>"
_CUT = f"\n\n{SESSION_OPEN}\n"
CHARS_PER_TOKEN = 3  # a generous estimate (real text runs 3.5-4): a breakpoint is kept when in doubt


def session_part(text: str) -> str:
    """``text`` as a session part, to end a system prompt or a tool description with."""
    return f"{_CUT}{text.strip()}\n{SESSION_CLOSE}"


def split_session(text: str) -> tuple[str, str]:
    """The stable text and its session part (without the blank line before it; "" when none). The
    last mark is the cut: an instruction file that happens to hold the tag stays stable text."""
    at = text.rfind(_CUT)
    if at < 0:
        return text, ""
    return text[:at], text[at + 2 :]


class Layout:
    """A request as it is cached: the stable tools and system prompt, then the session parts."""

    def __init__(self, request: ModelRequest) -> None:
        self.system, tail = split_session(request.system)
        parts = [tail] if tail else []
        self.tools: list[ToolSpec] = []
        # no system prompt at all (the SDK's default ``--system-prompt ""``): none is made up for the
        # tools' listings, which stay in their descriptions
        move = bool(request.system)
        for t in request.tools:
            description, part = split_session(t.description) if move else (t.description, "")
            if part:
                parts.append(part)
                t = ToolSpec(name=t.name, description=description, input_schema=t.input_schema)
            self.tools.append(t)
        self.session = "\n\n".join(parts)

    def tool_chars(self) -> int:
        return sum(len(t.name) + len(t.description) + len(json.dumps(t.input_schema)) + 40 for t in self.tools)


def stable_breakpoints(layout: Layout, min_tokens: int) -> tuple[bool, bool, bool]:
    """Whether the end of the tools, of the stable system prompt and of the session block are
    worth a breakpoint: the prefix up to each reaches the model's minimum cacheable length."""
    tools = layout.tool_chars()
    after_system = tools + len(layout.system)
    after_session = after_system + len(layout.session)
    return (
        bool(layout.tools) and tools // CHARS_PER_TOKEN >= min_tokens,
        bool(layout.system) and after_system // CHARS_PER_TOKEN >= min_tokens,
        bool(layout.session) and after_session // CHARS_PER_TOKEN >= min_tokens,
    )


def stable_prefix_chars(request: ModelRequest) -> int:
    """Characters of the prefix every session of the project shares (tools, stable system prompt)."""
    layout = Layout(request)
    return layout.tool_chars() + len(layout.system)


def previous_tail(roles: Sequence[str]) -> int | None:
    """The message that ended the previous request of a tool loop (the last user message before
    the last one): a breakpoint there reads the previous turn's cache however many blocks the
    newest turn added (a lookup walks back only 20 blocks from a breakpoint)."""
    for i in range(len(roles) - 2, -1, -1):
        if roles[i] == "user":
            return i
    return None
