"""File tools with Claude Code's names and input shapes: Read, Write, Edit, MultiEdit, LS."""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from msgspec import Meta, Struct

from agentkeel.core.tools import Effects, OpenFiles, Tool, ToolContext, ToolError, ToolOutput
from agentkeel.core.types import ImageBlock
from agentkeel.internal import globs
from agentkeel.tools import EDIT, READ
from agentkeel.tools.fileresponses import edit_response, multi_edit_response, read_response, write_response
from agentkeel.tools.reading import MAX_LINE_CHARS, human_size, read_capped, read_window
from agentkeel.tools.textfile import UTF8, TextFormat, decode_file, encode_text, to_crlf
from agentkeel.tools.writing import atomic_write

MAX_LINES = 2000
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_TEXT_BYTES = 50 * 1024 * 1024
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


class _Input(Struct, forbid_unknown_fields=True, kw_only=True):
    """A tool input: validated by msgspec (core/inputs.py), unknown fields refused."""


@dataclass
class FileState:
    """What the model has read this session (path -> mtime_ns when read)."""

    read: dict[str, int] = field(default_factory=dict)

    def mark(self, path: Path) -> None:
        try:
            self.read[str(path)] = path.stat().st_mtime_ns
        except OSError:
            self.read.pop(str(path), None)

    def check_fresh(self, path: Path) -> None:
        """Edits need a prior Read, and the file unchanged since."""
        seen = self.read.get(str(path))
        if seen is None:
            raise ToolError(f"File has not been read yet: {path}. Read it first before writing to it.")
        if path.stat().st_mtime_ns != seen:
            raise ToolError(
                f"File has been modified since it was read (by the user or a formatter): {path}. "
                "Read it again before editing."
            )


def resolve(ctx: ToolContext, file_path: str) -> Path:
    if not file_path.strip():
        raise ToolError("file_path is empty")
    if "\x00" in file_path:
        raise ToolError("file_path contains a NUL byte")
    p = Path(file_path).expanduser()
    if not p.is_absolute():
        p = ctx.workdir / p  # the session's working directory, as the permission gate resolves it
    return Path(os.path.normpath(p))


_NUMBERS: tuple[str, ...] = ()  # "1\t", "2\t"...: the first lines' numbers, made once (replaced whole)


def numbered(lines: list[str], start: int) -> str:
    """Lines numbered from ``start``, ``N<tab>line`` (the number unpadded: Claude Code's format,
    and ~5 bytes a line fewer than ``cat -n``'s); over-long lines are cut, the cut said."""
    global _NUMBERS
    end = start + len(lines)
    if start >= 1 and end <= 1 << 16 and (not lines or max(map(len, lines)) <= MAX_LINE_CHARS):  # none to cut
        numbers = _NUMBERS
        if len(numbers) < end - 1:
            numbers = _NUMBERS = tuple(f"{i}\t" for i in range(1, max(end, 2048)))
        return "\n".join(map(str.__add__, numbers[start - 1 : end - 1], lines))
    out = []
    for i, line in enumerate(lines, start):
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + "… [line truncated]"
        out.append(f"{i}\t{line}")
    return "\n".join(out)


def load_text(path: Path, what: str = "too large to load whole; use Bash (e.g. sed) on it") -> tuple[str, TextFormat]:
    """A regular text file's content, at most MAX_TEXT_BYTES (``what``: the advice when larger), and its
    encoding and line endings (see tools/textfile.py: a file keel cannot write back exactly is refused)."""
    return decode_file(path, read_capped(path, MAX_TEXT_BYTES, what))


def read_text(path: Path, what: str = "too large to load whole; use Bash (e.g. sed) on it") -> str:
    return load_text(path, what)[0]


async def read_opened(ctx: ToolContext, path: Path, line: int | None = None, limit: int | None = None) -> str | None:
    """The file's text as the user sees it, when the session has a front end's view of the files
    (an editor's unsaved buffer: ``OpenFiles``), from ``line`` for ``limit`` lines when given; None:
    read the disk."""
    files = ctx.services.find(OpenFiles)
    return None if files is None else await files.read_text(path, line, limit)


async def store(ctx: ToolContext, path: Path, text: str, data: bytes) -> None:
    """Write ``text`` through the front end's view of the files when it takes it, else ``data`` to disk."""
    files = ctx.services.find(OpenFiles)
    if files is None or not await files.write_text(path, text):
        atomic_write(path, data)


# --- Read ------------------------------------------------------------------------------


class ReadInput(_Input):
    file_path: Annotated[str, Meta(description="The absolute path to the file to read")]
    offset: Annotated[
        Annotated[int, Meta(ge=0)] | None, Meta(description="The line number to start reading from (1-based)")
    ] = None
    limit: Annotated[Annotated[int, Meta(ge=1)] | None, Meta(description="The number of lines to read")] = None


async def _read(args: ReadInput, ctx: ToolContext) -> ToolOutput:
    path = resolve(ctx, args.file_path)
    suffix = path.suffix.lower()
    state = ctx.services.get(FileState)
    if suffix in IMAGE_TYPES:
        raw = read_capped(path, MAX_IMAGE_BYTES, "too large to show as an image")
        state.mark(path)
        return ToolOutput(
            [ImageBlock(media_type=IMAGE_TYPES[suffix], data=base64.b64encode(raw).decode())],
            metadata={"file_path": str(path), "file_type": "image", "bytes": len(raw)},
        )
    if suffix == ".ipynb":
        text = read_text(path, "too large to show as a notebook; read it as text with Bash (e.g. jq)")
        state.mark(path)
        return ToolOutput(render_notebook(text, path), metadata={"file_path": str(path), "file_type": "notebook"})
    start = max(args.offset or 1, 1)
    limit = args.limit or MAX_LINES
    opened = await read_opened(ctx, path, start, limit + 1)  # one line more: is there more after?
    total: int | None
    if opened is not None:  # the user's view of it (an editor's buffer), the lines asked for
        every = opened.splitlines()
        lines, seen = every[:limit], start - 1 + len(every)
        total = seen if len(every) <= limit else None
        size = len(opened.encode("utf-8", "replace"))
        empty = not opened and start == 1
    else:
        window, st = await read_window(path, start, limit)
        lines, total, seen, size = window.lines, window.total, window.newlines, max(st.st_size, window.size)
        empty = window.size == 0
    state.mark(path)
    if empty:
        return ToolOutput(
            "<system-reminder>The file exists but is empty.</system-reminder>",
            metadata={"file_path": str(path), "lines": 0},
        )
    if not lines:
        if opened is not None:
            counted = f"fewer than {start} lines"
        else:
            counted = f"only {total} lines" if total is not None else f"more than {seen} lines"
        return ToolOutput(
            f"<system-reminder>The file has {counted}; offset {start} is past the end.</system-reminder>",
            metadata={"file_path": str(path), "lines": total},
        )
    body = numbered(lines, start)
    end = start + len(lines) - 1
    if total is None and opened is not None:
        body += f"\n\n[Showing lines {start}-{end} of the open file; there is more. Use offset and limit to read more.]"
    elif total is None:
        body += (
            f"\n\n[Showing lines {start}-{end} of a {human_size(size)} file; keel stopped "
            "reading there and did not count the lines after. Use offset and limit to read more.]"
        )
    elif end < total:
        body += f"\n\n[Showing lines {start}-{end} of {total}. Use offset and limit to read more.]"
    return ToolOutput(
        body,
        metadata={
            "file_path": str(path),
            "file_type": path.suffix.lstrip("."),
            "lines": len(lines),
            "total_lines": total,
        },
    )


def render_notebook(text: str, path: Path) -> str:
    try:
        nb = json.loads(text)
        cells = nb["cells"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ToolError(f"{path} is not a valid Jupyter notebook") from None
    parts = []
    for i, cell in enumerate(cells):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        kind = cell.get("cell_type", "code")
        parts.append(f'<cell id="{cell.get("id", i)}" type="{kind}">\n{source}\n</cell>')
        for out in cell.get("outputs", []) or []:
            data = out.get("text") or (out.get("data") or {}).get("text/plain") or ""
            data = "".join(data) if isinstance(data, list) else str(data)
            if data:
                parts.append(f"<output>\n{data}\n</output>")
    return "\n".join(parts)


# --- Write -----------------------------------------------------------------------------


class WriteInput(_Input):
    file_path: Annotated[
        str, Meta(description="The absolute path to the file to write (must be absolute, not relative)")
    ]
    content: Annotated[str, Meta(description="The content to write to the file")]


async def _write(args: WriteInput, ctx: ToolContext) -> ToolOutput:
    path = resolve(ctx, args.file_path)
    state = ctx.services.get(FileState)
    existed = path.exists()
    if path.is_dir():
        raise ToolError(f"{path} is a directory")
    fmt = UTF8
    content = args.content
    if existed:
        state.check_fresh(path)
        fmt = _format_of(path)
        if fmt.crlf and "\r\n" not in content:
            content = to_crlf(content)  # a CRLF file stays CRLF
    await store(ctx, path, args.content, encode_text(path, content, fmt))
    state.mark(path)
    lines = args.content.count("\n") + (1 if args.content and not args.content.endswith("\n") else 0)
    verb = "updated" if existed else "created"
    return ToolOutput(
        f"File {verb} successfully at: {path}",
        metadata={"file_path": str(path), "lines": lines, "created": not existed},
    )


# --- Edit / MultiEdit --------------------------------------------------------------------


class EditInput(_Input):
    file_path: Annotated[str, Meta(description="The absolute path to the file to modify")]
    old_string: Annotated[str, Meta(description="The text to replace")]
    new_string: Annotated[str, Meta(description="The text to replace it with (must be different from old_string)")]
    replace_all: Annotated[bool, Meta(description="Replace all occurrences of old_string (default false)")] = False


class EditOp(_Input):
    old_string: str
    new_string: str
    replace_all: bool = False


class MultiEditInput(_Input):
    file_path: Annotated[str, Meta(description="The absolute path to the file to modify")]
    edits: Annotated[
        list[EditOp], Meta(min_length=1, description="Edits applied in order; all succeed or none is applied")
    ]


def apply_edit(text: str, op: EditOp, label: str = "", where: list[int] | None = None) -> str:
    """``text`` with the edit made; ``where`` (when given) gets the line numbers, in the new text,
    of each replacement, and the lines it holds already are moved by the lines this edit adds
    or takes away above them."""
    if op.old_string == op.new_string:
        raise ToolError(f"{label}old_string and new_string are identical: nothing to change")
    old, new = op.old_string, op.new_string
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old:
        old, new = old.replace("\r\n", "\n").replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise ToolError(f"{label}String to replace not found in file (it must match exactly, including whitespace)")
    if count > 1 and not op.replace_all:
        raise ToolError(
            f"{label}Found {count} matches of old_string; add surrounding context to make it unique, "
            "or set replace_all to true"
        )
    if where is not None:
        _moved_lines(text, old, new, 1 if count == 1 else count, where)
    return text.replace(old, new) if op.replace_all else text.replace(old, new, 1)


def _moved_lines(text: str, old: str, new: str, count: int, where: list[int]) -> None:
    delta = new.count("\n") - old.count("\n")
    starts: list[int] = []  # each occurrence's line in ``text``
    at, line, pos = 0, 1, 0
    for _ in range(count):
        at = text.find(old, at)
        line += text.count("\n", pos, at)
        starts.append(line)
        pos, at = at, at + len(old)
    for i, earlier in enumerate(where):
        where[i] = earlier + delta * sum(1 for s in starts if s < earlier)
    where.extend(s + n * delta for n, s in enumerate(starts))


def _edited(path: Path, where: list[int]) -> str:
    """What the model is told of a successful edit: that it happened and where (it holds the new
    text already; the file is not echoed back)."""
    lines = sorted(set(where))
    shown = ", ".join(map(str, lines[:10])) + (f" and {len(lines) - 10} more" if len(lines) > 10 else "")
    at = f"line {shown}" if len(lines) == 1 else f"{len(where)} replacements: lines {shown}"
    return f"The file {path} has been updated ({at})."


def _format_of(path: Path) -> TextFormat:
    """The encoding and line endings an existing file is written back in (UTF-8 when it is no text)."""
    try:
        return load_text(path, "too large")[1]
    except ToolError:
        return UTF8  # binary, mixed or huge: Write replaces it whole, as UTF-8


async def _edit_file(ctx: ToolContext, file_path: str, ops: list[EditOp]) -> ToolOutput:
    path = resolve(ctx, file_path)
    state = ctx.services.get(FileState)
    if not path.exists():
        if len(ops) == 1 and ops[0].old_string == "":
            await store(ctx, path, ops[0].new_string, ops[0].new_string.encode("utf-8"))
            state.mark(path)
            return ToolOutput(f"File created successfully at: {path}", metadata={"file_path": str(path)})
        raise ToolError(f"File does not exist: {path}")
    state.check_fresh(path)
    opened = await read_opened(ctx, path)
    if opened is not None:  # the editor's buffer, written back through the editor (its line endings)
        text, fmt = opened, UTF8
    else:
        text, fmt = load_text(path, "too large for Edit, which loads the whole file; edit it with Bash (e.g. sed -i)")
    new_text = text
    where: list[int] = []
    for i, op in enumerate(ops):
        if op.old_string == "":
            raise ToolError(f"edit {i + 1}: old_string is empty; only a new file can be created that way")
        if fmt.crlf:  # Read shows a CRLF file's lines without the CR: text put in gets CRLF
            op = EditOp(
                old_string=to_crlf(op.old_string), new_string=to_crlf(op.new_string), replace_all=op.replace_all
            )
        new_text = apply_edit(new_text, op, f"edit {i + 1}: " if len(ops) > 1 else "", where)
    await store(ctx, path, new_text, encode_text(path, new_text, fmt))
    state.mark(path)
    return ToolOutput(_edited(path, where), metadata={"file_path": str(path), "edits": len(ops)})


async def _edit(args: EditInput, ctx: ToolContext) -> ToolOutput:
    op = EditOp(old_string=args.old_string, new_string=args.new_string, replace_all=args.replace_all)
    return await _edit_file(ctx, args.file_path, [op])


async def _multi_edit(args: MultiEditInput, ctx: ToolContext) -> ToolOutput:
    return await _edit_file(ctx, args.file_path, list(args.edits))


# --- the checks before anyone is asked (``Tool.validate``) -------------------------------


async def _check_ops(ctx: ToolContext, file_path: str, ops: list[EditOp]) -> None:
    """What would make an edit fail, found without writing: the file is missing, unread or changed
    since read (checked before its content is looked at: nothing unread is probed), or an
    old_string is not there exactly once."""
    path = resolve(ctx, file_path)
    if not path.exists():
        if len(ops) == 1 and ops[0].old_string == "":
            return
        raise ToolError(f"File does not exist: {path}")
    ctx.services.get(FileState).check_fresh(path)
    text = await read_opened(ctx, path)
    if text is None:
        text = read_text(path, "too large for Edit, which loads the whole file; edit it with Bash (e.g. sed -i)")
    for i, op in enumerate(ops):
        if op.old_string == "":
            raise ToolError(f"edit {i + 1}: old_string is empty; only a new file can be created that way")
        text = apply_edit(text, op, f"edit {i + 1}: " if len(ops) > 1 else "")


async def _check_edit(args: EditInput, ctx: ToolContext) -> None:
    await _check_ops(
        ctx,
        args.file_path,
        [EditOp(old_string=args.old_string, new_string=args.new_string, replace_all=args.replace_all)],
    )


async def _check_multi_edit(args: MultiEditInput, ctx: ToolContext) -> None:
    await _check_ops(ctx, args.file_path, list(args.edits))


async def _check_write(args: WriteInput, ctx: ToolContext) -> None:
    path = resolve(ctx, args.file_path)
    if path.is_dir():
        raise ToolError(f"{path} is a directory")
    if path.exists():
        ctx.services.get(FileState).check_fresh(path)


# --- LS ----------------------------------------------------------------------------------

LS_LIMIT = 1000
LS_SKIP = {".git", "__pycache__", "node_modules", ".venv", ".mypy_cache", ".pytest_cache"}


class LSInput(_Input):
    path: Annotated[str, Meta(description="The absolute path to the directory to list")]
    ignore: Annotated[list[str] | None, Meta(description="List of glob patterns to ignore")] = None


async def _ls(args: LSInput, ctx: ToolContext) -> ToolOutput:
    root = resolve(ctx, args.path)
    if not root.is_dir():
        raise ToolError(f"{root} is not a directory" if root.exists() else f"Directory does not exist: {root}")
    ignore = args.ignore or []
    lines = [f"- {root}/"]
    count = 0

    def walk(d: Path, depth: int) -> bool:
        nonlocal count
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return True
        for e in entries:
            if e.name.startswith(".") or e.name in LS_SKIP or any(globs.name_matches(e.name, g) for g in ignore):
                continue
            count += 1
            if count > LS_LIMIT:
                return False
            is_dir = e.is_dir(follow_symlinks=False)
            lines.append(f"{'  ' * depth}- {e.name}{'/' if is_dir else ''}")
            if is_dir and not walk(Path(e.path), depth + 1):
                return False
        return True

    complete = walk(root, 1)
    if not complete:
        lines.append(f"\n[Listing truncated at {LS_LIMIT} entries: list a subdirectory, or use Glob]")
    return ToolOutput("\n".join(lines), metadata={"path": str(root), "entries": min(count, LS_LIMIT)})


WRITES = Effects(rule=EDIT, path_fields=("file_path",), writes=True)


def file_tools() -> list[Tool]:
    return [
        Tool(
            "Read",
            READ_DESC,
            ReadInput,
            _read,
            group="fs",
            read_only=True,
            timeout_s=60,
            effects=Effects(rule=READ, path_fields=("file_path",), reads=True),
            respond=read_response,
        ),
        Tool(
            "Write",
            "Create a file, or replace one whole (an existing file must have been Read first). To change "
            "part of a file use Edit; don't create files the task does not need.",
            WriteInput,
            _write,
            group="fs",
            destructive=True,
            timeout_s=60,
            validate=_check_write,
            effects=WRITES,
            respond=write_response,
        ),
        Tool(
            "Edit",
            "Replace exact text in a file that has been Read. old_string must occur once (include enough "
            "surrounding lines) unless replace_all is set (for renames); keep the file's indentation, without "
            "Read's line-number prefix.",
            EditInput,
            _edit,
            group="fs",
            destructive=True,
            timeout_s=60,
            validate=_check_edit,
            effects=WRITES,
            respond=edit_response,
        ),
        Tool(
            "MultiEdit",
            "Several Edit replacements in one file, applied in order, all or none: one call instead of "
            "several Edits to the same file.",
            MultiEditInput,
            _multi_edit,
            group="fs",
            destructive=True,
            timeout_s=60,
            validate=_check_multi_edit,
            effects=WRITES,
            respond=multi_edit_response,
        ),
        Tool(
            "LS",
            "List a directory's files and folders, recursively (hidden entries skipped). To find files by "
            "name pattern, Glob is faster.",
            LSInput,
            _ls,
            group="fs",
            read_only=True,
            timeout_s=60,
            effects=Effects(rule=READ, path_fields=("path",), lists=True),
        ),
    ]


READ_DESC = (
    "Read a file: up to 2000 lines numbered like `cat -n` (offset and limit for the rest of a long file); "
    "images come back as images, notebooks with their cells. Use it, not cat/head/tail, and before you Edit "
    "or Write a file that exists."
)
