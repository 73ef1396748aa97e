"""Claude Code's ``tool_response`` for the file tools (``Tool.respond``: what hooks are given): Read's
text in ``cat -n``'s padded form; Write's, Edit's and MultiEdit's file before and their diff."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from agentkeel.core.tools import ToolOutput, default_response

CAT_N_WIDTH = 6  # ``cat -n`` pads numbers to six columns; the model gets them bare (the same lines, fewer bytes)


_LINE_NUMBER = re.compile(r"^(\d+)\t", re.M)


def cat_n(text: str) -> str:
    """A numbered Read result in ``cat -n``'s padded form, as hooks' ``tool_response`` always had it."""
    return _LINE_NUMBER.sub(lambda m: f"{m[1]:>{CAT_N_WIDTH}}\t", text)


def read_response(tool_input: dict[str, Any], output: ToolOutput) -> Any:
    """Claude Code's ``tool_response`` for Read: the file and the text read."""
    path = tool_input.get("file_path")
    if not isinstance(path, str):
        return default_response(output)
    text = output.text()
    if "total_lines" in output.metadata:  # a text file's lines, numbered
        text = cat_n(text)
    return {"type": "text", "file": {"filePath": path, "content": text}}


ORIGINAL_FILE = "original_file"
"""The metadata key under which a caller that read the file before the call (the hooks, for
PostToolUse) hands its text to the ``respond`` functions below; it is never in the session log."""


def _structured_patch(old: str, new: str) -> list[dict[str, Any]]:
    """The hunks of a line diff, three lines of context, as Claude Code's ``structuredPatch``."""
    a, b = old.splitlines(), new.splitlines()
    hunks: list[dict[str, Any]] = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(3):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        lines: list[str] = []
        for tag, x1, x2, y1, y2 in group:
            if tag == "equal":
                lines += [f" {line}" for line in a[x1:x2]]
                continue
            lines += [f"-{line}" for line in a[x1:x2]]
            lines += [f"+{line}" for line in b[y1:y2]]
        hunks.append({"oldStart": i1 + 1, "oldLines": i2 - i1, "newStart": j1 + 1, "newLines": j2 - j1, "lines": lines})
    return hunks


def _original(output: ToolOutput) -> str | None:
    original = output.metadata.get(ORIGINAL_FILE)
    return original if isinstance(original, str) else None


def _current(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def write_response(tool_input: dict[str, Any], output: ToolOutput) -> Any:
    """Claude Code's ``tool_response`` for Write: created or updated, the content, the diff
    against the file it replaced."""
    path, content = tool_input.get("file_path"), tool_input.get("content")
    if not isinstance(path, str) or not isinstance(content, str):
        return default_response(output)
    original = None if output.metadata.get("created") else _original(output)
    return {
        "type": "create" if original is None else "update",
        "filePath": path,
        "content": content,
        "structuredPatch": [] if original is None else _structured_patch(original, content),
        "originalFile": original,
        "userModified": False,
    }


def edit_response(tool_input: dict[str, Any], output: ToolOutput) -> Any:
    """Claude Code's ``tool_response`` for Edit: the strings, the file before, the diff."""
    path = tool_input.get("file_path")
    if not isinstance(path, str):
        return default_response(output)
    updated = _current(path)
    original = _original(output)
    return {
        "filePath": path,
        "oldString": tool_input.get("old_string", ""),
        "newString": tool_input.get("new_string", ""),
        "originalFile": original if original is not None else updated,
        "structuredPatch": _structured_patch(original or "", updated) if original is not None else [],
        "userModified": False,
        "replaceAll": bool(tool_input.get("replace_all", False)),
    }


def multi_edit_response(tool_input: dict[str, Any], output: ToolOutput) -> Any:
    """Claude Code's ``tool_response`` for MultiEdit (the last Claude Code that had the tool): the
    edits, the file before, the diff."""
    path = tool_input.get("file_path")
    if not isinstance(path, str):
        return default_response(output)
    updated = _current(path)
    original = _original(output)
    return {
        "filePath": path,
        "edits": tool_input.get("edits", []),
        "originalFileContents": original if original is not None else updated,
        "structuredPatch": _structured_patch(original or "", updated) if original is not None else [],
        "userModified": False,
    }
