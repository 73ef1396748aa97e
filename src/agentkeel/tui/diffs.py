"""What a file-changing tool call would do to the file, as a unified diff (for the permission
dialog and the chat's tool blocks). Pure functions: they read the file, never write it."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _replace(text: str, old: str, new: str, replace_all: bool) -> str:
    if not old:
        return text
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)


def proposed_change(name: str, tool_input: dict[str, Any], cwd: Path) -> tuple[str, str, str] | None:
    """(path, before, after) for an Edit/Write/MultiEdit call, or None for any other call."""
    raw = tool_input.get("file_path")
    if name not in EDIT_TOOLS or not isinstance(raw, str) or not raw:
        return None
    path = Path(raw) if Path(raw).is_absolute() else cwd / raw
    before = _read(path) or ""
    if name == "Write":
        return raw, before, str(tool_input.get("content", ""))
    if name == "Edit":
        after = _replace(
            before,
            str(tool_input.get("old_string", "")),
            str(tool_input.get("new_string", "")),
            bool(tool_input.get("replace_all")),
        )
        return raw, before, after
    if name == "MultiEdit":
        after = before
        for edit in tool_input.get("edits") or []:
            if isinstance(edit, dict):
                after = _replace(
                    after,
                    str(edit.get("old_string", "")),
                    str(edit.get("new_string", "")),
                    bool(edit.get("replace_all")),
                )
        return raw, before, after
    return None


def unified(path: str, before: str, after: str, context: int = 3) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{path.lstrip('/')}",
        tofile=f"b/{path.lstrip('/')}",
        n=context,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def diff_for_call(name: str, tool_input: dict[str, Any], cwd: Path, max_lines: int = 400) -> str:
    """The call's diff ("" when it changes nothing or is not a file edit), cut to ``max_lines``."""
    change = proposed_change(name, tool_input, cwd)
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
