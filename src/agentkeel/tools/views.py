"""How a call of a built-in tool looks to the rest of keel, kept beside the tools so that no module
outside ``tools/`` names one: the text a call changes in a file (diffs in the TUI and the web
app, the comment checker, pruning), and the summary memory keeps of a call.

What a call *does* (reads, writes, runs a shell...) is the tool's ``Effects``; this module holds
only what depends on a tool's input shape. A tool without an entry here still works everywhere:
it has no diff and memory keeps a generic summary of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from agentkeel.tools import FETCH, READ, SHELL

SHELL_TOOL = SHELL  # what a command line keel runs for the user is checked as (skills' !`cmd`, merges)
READ_TOOL = READ  # what a file keel reads for the user is checked as (a skill's @file)
UNCAPTURED = frozenset({"TodoWrite"})  # calls memory does not keep (the todo list is state, not work)


# --- the text a call changes ------------------------------------------------------------------


class EditShape(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where a call's (old, new) text pairs are in its input: ``old``/``new`` name the fields of
    one pair, ``items`` a list field whose entries each hold one (MultiEdit). Without ``old``, the
    new text has no old counterpart in the input (a Write replaces the whole file). Sent as is to
    the web app, which reads pairs with the same rule (serve/web/app.js ``toolDiff``)."""

    new: str
    old: str | None = None
    items: str | None = None
    replace_all: str | None = None


EDIT_SHAPES: dict[str, EditShape] = {
    "Write": EditShape(new="content"),
    "Edit": EditShape(new="new_string", old="old_string", replace_all="replace_all"),
    "MultiEdit": EditShape(new="new_string", old="old_string", items="edits", replace_all="replace_all"),
    "NotebookEdit": EditShape(new="new_source"),
}


class Change(NamedTuple):
    """One text replacement a call makes: ``old`` None means ``new`` is the whole new text."""

    old: str | None
    new: str
    replace_all: bool = False


def changes(name: str, tool_input: dict[str, Any]) -> list[Change] | None:
    """The (old, new) pairs of a call, or None for a call that changes no file's text."""
    shape = EDIT_SHAPES.get(name)
    if shape is None:
        return None
    entries = tool_input.get(shape.items) if shape.items else [tool_input]
    out: list[Change] = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict):
            old = None if shape.old is None else str(entry.get(shape.old) or "")
            all_ = bool(entry.get(shape.replace_all)) if shape.replace_all else False
            out.append(Change(old, str(entry.get(shape.new) or ""), all_))
    return out


def whole_text_field(name: str) -> str | None:
    """The input field holding a file's whole new text (a Write's ``content``), if the call has one."""
    shape = EDIT_SHAPES.get(name)
    return shape.new if shape is not None and shape.old is None and shape.items is None else None


def _notebook_after(before: str, tool_input: dict[str, Any]) -> str:
    from agentkeel.tools.notebook import NotebookEditInput, edit_notebook

    return edit_notebook(before, msgspec.convert(tool_input, NotebookEditInput))[0]


# a tool whose new text is not its pairs applied to the file: how it makes the file's new text
_AFTER: dict[str, Callable[[str, dict[str, Any]], str]] = {"NotebookEdit": _notebook_after}


def after(name: str, tool_input: dict[str, Any], before: str) -> str | None:
    """The file's text once the call is made (None: the call changes no file's text, or cannot be
    made). Pure: the caller read ``before``; nothing is written."""
    special = _AFTER.get(name)
    if special is not None:
        try:
            return special(before, tool_input)
        except Exception:  # an invalid call: the tool says why when it runs
            return None
    pairs = changes(name, tool_input)
    if pairs is None:
        return None
    text = before
    for change in pairs:
        if change.old is None:
            text = change.new
        elif change.old:
            text = text.replace(change.old, change.new, -1 if change.replace_all else 1)
    return text


# --- what memory keeps of a call --------------------------------------------------------------


def _head_tail(text: str, limit: int = 1200) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… [{len(text) - limit} chars omitted] …\n{text[-half:]}"


def _path_of(tool_input: dict[str, Any]) -> Any:
    return tool_input.get("file_path") or tool_input.get("notebook_path") or tool_input.get("path")


def not_run(name: str, tool_input: dict[str, Any], reason: str) -> tuple[str, dict[str, Any]]:
    """A call that never ran (a permission rule or nobody to ask denied it; its input was
    invalid): recorded as such, so that no summary or lesson counts it as work done."""
    meta: dict[str, Any] = {"tool": name, "success": False, "denied": True}
    path = _path_of(tool_input)
    if isinstance(path, str):
        meta["file_path"] = path
    what = f"{name} {path}" if isinstance(path, str) else name
    if name == SHELL_TOOL and isinstance(tool_input.get("command"), str):
        what = f"{SHELL_TOOL} `{tool_input['command'][:200]}`"
    first = (reason.strip().splitlines() or ["denied"])[0][:200]
    return f"{what} was not run: {first}", meta


def observe(
    name: str, tool_input: dict[str, Any], output: str, is_error: bool, facts: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    """A tool run, compressed the way its tool needs: (one text to index, per-tool metadata).

    ``facts`` is the tool's own metadata (``ToolFinished.metadata``: exit code, path, line and
    match counts, status). The counts and codes recorded come from it; the output is only
    compressed (and, for Grep and Glob, read for the file list). Without facts (a tool that
    reports none), a Bash exit code is read from its output's ``Exit code N`` line.
    """
    facts = facts or {}
    meta: dict[str, Any] = {"tool": name, "success": not is_error}
    lines = output.count("\n") + 1 if output else 0
    path = facts.get("file_path") or _path_of(tool_input) or facts.get("path")
    if isinstance(path, str):
        meta["file_path"] = path
        meta["file_type"] = Path(path).suffix.lstrip(".") or "none"
    pairs = changes(name, tool_input)
    if name == "Read":
        meta["line_count"] = _count(facts.get("lines"), lines)
        text = f"Read {path} ({meta['line_count']} lines)\n{_head_tail(output, 600)}"
    elif pairs is not None:
        change = "\n".join(c.new for c in pairs)
        meta["line_count"] = change.count("\n") + 1 if change else 0
        text = f"{name} {path}: {output.splitlines()[0] if output else ''}\n{_head_tail(change, 600)}"
    elif name in ("Bash", "BashOutput"):
        command = str(facts.get("command") or tool_input.get("command", ""))
        meta["command"] = command[:500]
        code = facts.get("exit_code") if "exit_code" in facts else (None if facts else _exit_code(output))
        if isinstance(code, int) and not isinstance(code, bool):
            meta["exit_code"] = code
        if facts.get("timed_out"):
            meta["timed_out"] = True
        text = f"$ {command}\n{_head_tail(output)}"
    elif name in ("Grep", "Glob"):
        meta["pattern"] = tool_input.get("pattern")
        found = _listed_files(name, tool_input, output, facts)
        count = _count(facts.get("match_count"), None)
        if count is None:  # no facts: what the listing shows
            count = len(found)
        meta["match_count"] = count
        meta["files"] = found[:50]
        if not count:
            summary = "no matches" if name == "Grep" else "no files"
        elif name == "Grep" and tool_input.get("output_mode") == "content":
            summary = f"{count} matches in {len(found)} files"
        else:
            summary = f"{count} files"
        text = f"{name} {tool_input.get('pattern')!r}: {summary}\n" + "\n".join(found[:30])
    elif name == FETCH:
        meta["url"] = facts.get("url") or tool_input.get("url") or tool_input.get("query")
        if isinstance(facts.get("status"), int):
            meta["status"] = facts["status"]
        text = f"{name} {meta['url']}\n{_head_tail(output, 800)}"
    else:
        text = f"{name} {json.dumps(tool_input, default=str)[:300]}\n{_head_tail(output)}"
    return text, meta


def _count(value: Any, default: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


_NOTHING = ("No files found", "No matches found")


def _listed_files(name: str, tool_input: dict[str, Any], output: str, facts: dict[str, Any]) -> list[str]:
    """The files a Grep or Glob listed: none when it matched nothing, else the paths its output
    shows (one per line; ``path:line`` in Grep's content and count modes), without the
    ``Found N files`` header and the truncation note."""
    if _count(facts.get("match_count"), None) == 0:
        return []
    rows = [line for line in output.splitlines() if line.strip()]
    if rows and rows[0].startswith("Found ") and rows[0].split(" ")[1].isdigit():
        rows = rows[1:]
    rows = [r for r in rows if r not in _NOTHING and not r.startswith("(Results are truncated")]
    if name == "Grep" and tool_input.get("output_mode") in ("content", "count"):
        rows = [r.split(":", 1)[0] for r in rows if ":" in r]
    base = facts.get("relative_to")  # Grep shows the paths under the working directory relative to it
    if isinstance(base, str) and base:
        rows = [r if r.startswith("/") else str(Path(base) / r) for r in rows]
    return list(dict.fromkeys(rows))


def _exit_code(output: str) -> int | None:
    for line in output.splitlines()[-3:]:
        if "exit code" in line.lower():
            digits = "".join(ch for ch in line.rsplit(" ", 1)[-1] if ch.isdigit() or ch == "-")
            if digits.lstrip("-").isdigit():
                return int(digits)
    return None
