"""Prevention: the comment checker (AI-slop comments a call of a file-writing tool added)."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from agentkeel.core.events import EventBus
from agentkeel.core.extensions import Extension, ToolCall
from agentkeel.core.tools import Effects, ToolOutput
from agentkeel.reliability.state import ReliabilityState, notice
from agentkeel.tools import effects_of
from agentkeel.tools.views import changes

_HASH = frozenset({".py", ".sh", ".bash", ".zsh", ".rb", ".pl", ".r", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".tf"})
_SLASH = frozenset(
    {".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".go", ".rs", ".c", ".h", ".cc", ".cpp", ".hpp", ".java",
     ".kt", ".swift", ".cs", ".scala", ".dart", ".php", ".css", ".scss"}
)  # fmt: skip
_DASH = frozenset({".sql", ".lua", ".hs"})

# a comment that narrates the edit or restates the next line, not the code's why
SLOP = [
    re.compile(p, re.I)
    for p in (
        r"^(added|adding|updated|updating|changed|modified|removed|fixed|refactored|new|now)\b[^.]{0,60}"
        r"\b(to|for|here|below|above|this|the|handling|support|logic|function|code|line|version)\b",
        r"\b(as requested|per (your|the user'?s?) request|the user (wants|asked|requested))\b",
        r"^(this|the following|the below|below|here) (function|method|class|code|line|block|loop|section|we)\b",
        r"^(step \d+|first,? we|then,? we|now,? we|next,? we|finally,? we|let'?s|we (now|then|first))\b",
        r"^(import|imports|define|defines|initiali[sz]e|return|returns|increment|loop (over|through)|call|calls|"
        r"create|set|get|print|check if)( the| a| an)?( \w+){0,2}\.?$",
        r"^(todo|fixme):?\s*(implement|add|finish|fill in|complete)( this| the| it|\b)",
        r"\b(rest of (the )?code|existing code|unchanged|same as before)\b",
    )
]


def _marker(path: str) -> str | None:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in _HASH:
        return "#"
    if suffix in _SLASH:
        return "//"
    if suffix in _DASH:
        return "--"
    return None


def _comment(line: str, marker: str) -> str | None:
    stripped = line.strip()
    if marker == "#" and (stripped.startswith(("#!", "# -*-", "# type:", "# noqa", "# fmt:", "# pragma"))):
        return None
    if stripped.startswith(marker):
        return stripped[len(marker) :].strip()
    if marker == "//" and stripped.startswith(("/*", "*")) and not stripped.startswith("*/"):
        return stripped.lstrip("/*").strip()
    return None


def _effects(call: ToolCall) -> Effects:
    return call.tool.effects if call.tool is not None else effects_of(call.name)


def _path(call: ToolCall) -> str:
    """The file the call writes, as the model named it."""
    for field in _effects(call).path_fields:
        value = call.input.get(field)
        if isinstance(value, str) and value:
            return value
    return ""


def _added(call: ToolCall) -> tuple[str, list[str]]:
    """The file and the lines this call added (its tool's (old, new) pairs: tools/views.py)."""
    lines: list[str] = []
    for change in (changes(call.name, call.input) if _effects(call).writes else None) or []:
        old = set((change.old or "").splitlines())
        lines += [x for x in change.new.splitlines() if x not in old]
    return _path(call), lines


def slop_comments(call: ToolCall) -> list[str]:
    path, lines = _added(call)
    marker = _marker(path)
    if marker is None:
        return []
    found = []
    for line in lines:
        text = _comment(line, marker)
        if text and any(p.search(text) for p in SLOP):
            found.append(line.strip())
    return found


def comment_checker(bus: EventBus, state: ReliabilityState) -> Extension:
    """Failure: an agent's edits leave comments that narrate the change ("# Added error handling
    as requested", "// Step 2: now we call the API", "# Return the result") instead of explaining
    the code; they outlive the session as noise in the user's files. Prevention: after a successful
    Edit, MultiEdit or Write, the comments it added that match these patterns are listed in the
    result, and the model is told to remove them or say why they stay. Any tool whose effects say
    it writes, and whose (old, new) text tools/views.py knows, is checked."""

    async def after_tool(call: ToolCall, output: ToolOutput) -> ToolOutput:
        if not _effects(call).writes or output.is_error or not isinstance(output.content, str):
            return output
        found = slop_comments(call)
        if not found:
            return output
        shown = "\n".join(f"  {c}" for c in found[:10])
        notice(bus, "comment-checker", f"{len(found)} narrating comment(s) added to {_path(call)}")
        note = (
            f"\n\n[comment-checker] This edit added comments that narrate the change or restate the code:\n{shown}\n"
            "Remove them (comments should explain why, not what changed), or keep one only if it documents "
            "something the code cannot say."
        )
        return ToolOutput(output.content + note, is_error=False, metadata=output.metadata)

    return Extension("comment-checker", after_tool=after_tool)
