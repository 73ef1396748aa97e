"""What a file-changing tool call would do to the file, as a unified diff (for the permission
dialog and the chat's tool blocks). Pure functions: they read the file, never write it.

Which calls change a file is the tool's ``Effects.writes``; what the file becomes is
``tools.views.after`` (the one place that knows each tool's input shape)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from agentkeel.core.tools import Effects
from agentkeel.tools import effects_of
from agentkeel.tools.views import after as after_call


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def proposed_change(
    name: str, tool_input: dict[str, Any], cwd: Path, effects: Effects | None = None
) -> tuple[str, str, str] | None:
    """(path, before, after) for a call of a tool that writes a file (``effects``, the built-in's
    declaration by default), or None for any other call."""
    effects = effects if effects is not None else effects_of(name)
    raw = next((v for f in effects.path_fields if isinstance(v := tool_input.get(f), str) and v), None)
    if not effects.writes or raw is None:
        return None
    path = Path(raw) if Path(raw).is_absolute() else cwd / raw
    before = _read(path) or ""
    after = after_call(name, tool_input, before)
    return None if after is None else (raw, before, after)


def unified(path: str, before: str, after: str, context: int = 3) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{path.lstrip('/')}",
        tofile=f"b/{path.lstrip('/')}",
        n=context,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def diff_for_call(
    name: str, tool_input: dict[str, Any], cwd: Path, max_lines: int = 400, effects: Effects | None = None
) -> str:
    """The call's diff ("" when it changes nothing or is not a file edit), cut to ``max_lines``."""
    change = proposed_change(name, tool_input, cwd, effects)
    if change is None:
        return ""
    shown, before, after = change
    try:
        shown = str(Path(shown).relative_to(cwd))
    except ValueError:
        pass  # outside the working directory: the full path says so
    text = unified(shown, before, after)
    lines = text.splitlines()
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"… {len(lines) - max_lines} more lines"]
    return "\n".join(lines)


def diff_stats(diff: str) -> tuple[int, int]:
    added = sum(1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in diff.splitlines() if line.startswith("-") and not line.startswith("---"))
    return added, removed
