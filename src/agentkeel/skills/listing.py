"""The skill listing the model reads, by Claude Code 2.1.328's rules.

One line per skill or command: ``- name: description``. A skill whose frontmatter ``name`` differs
from the name it is called by is listed as ``- name (frontmatter name)``. A description is cut at
``skillListingMaxDescChars`` characters (1,536) with an ellipsis. The whole listing has a budget of
characters: ``SLASH_COMMAND_TOOL_CHAR_BUDGET``, else the context window × 4 characters a token ×
``skillListingBudgetFraction`` (1 %) — 8,000 characters on a 200k-token model. Over the budget,
every entry keeps its name, and descriptions are kept in listing order while they still fit; the
others are listed by name only (Claude Code ranks by how often each skill was used; keel keeps
no usage counts, so the first come first, which is Claude Code's order for skills never used).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

DEFAULT_FRACTION = 0.01
CHARS_PER_TOKEN = 4
MAX_DESCRIPTION = 1536
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


class Entry(NamedTuple):
    name: str
    description: str
    shown_as: str = ""  # the frontmatter name when it differs from ``name``


def budget(context_window: int, env: Mapping[str, str], fraction: float | None = None) -> int:
    """The listing's size in characters."""
    raw = env.get("SLASH_COMMAND_TOOL_CHAR_BUDGET", "").strip()
    if raw.isascii() and raw.isdigit() and int(raw) > 0:
        return int(raw)
    share = fraction if fraction is not None else DEFAULT_FRACTION
    return max(1, int(context_window * CHARS_PER_TOKEN * share))


def label(entry: Entry, entries: Sequence[Entry]) -> str:
    """``name``, or ``name (shown as)`` when the frontmatter name is another valid name that calls
    only this entry."""
    shown = entry.shown_as
    if not shown or shown == entry.name or entry.name.endswith(f":{shown}") or not _NAME.fullmatch(shown):
        return entry.name
    callers = [e for e in entries if shown in (e.name, e.shown_as)]
    return f"{entry.name} ({shown})" if callers == [entry] else entry.name


def description(text: str, limit: int = MAX_DESCRIPTION) -> str:
    """One line, cut at ``limit``, its angle brackets escaped (Claude Code writes a skill's ``>5``
    as ``&gt;5``: the listing sits inside a tag)."""
    flat = " ".join(text.split())
    flat = flat if len(flat) <= limit else flat[: limit - 1] + "\u2026"
    return flat.replace("<", "&lt;").replace(">", "&gt;")


def lines(entries: Sequence[Entry], chars: int, limit: int = MAX_DESCRIPTION) -> list[str]:
    """The listing's lines within ``chars`` characters (see the module's docstring)."""
    short = [f"- {label(e, entries)}" for e in entries]
    full = [
        f"{s}: {description(e.description, limit)}" if e.description.strip() else s
        for s, e in zip(short, entries, strict=True)
    ]
    total = sum(map(len, full)) + max(0, len(full) - 1)
    if total <= chars:
        return full
    left = chars - (sum(map(len, short)) + max(0, len(short) - 1))
    out = []
    for s, f in zip(short, full, strict=True):
        extra = len(f) - len(s)
        if extra <= left:
            left -= extra
            out.append(f)
        else:
            out.append(s)
    return out
