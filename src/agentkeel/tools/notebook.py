"""NotebookEdit, with Claude Code's name and input shape: replace, insert or delete one cell of a
Jupyter notebook (``.ipynb``). The rest of the notebook (metadata, other cells and their
outputs) is kept as it was; the file is written atomically, and only after it was Read (as Edit).

What a call does is declared in its ``Effects`` (an ``Edit`` rule governs it, it writes the
notebook): permissions, checkpoints, context, diffs and memory know it from that alone."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from agentkeel.core.tools import Effects, Tool, ToolContext, ToolError, ToolOutput
from agentkeel.tools import EDIT
from agentkeel.tools.files import FileState, read_text, resolve
from agentkeel.tools.writing import atomic_write

_INDEX_ID = re.compile(r"\Acell-(\d+)\Z")  # Claude Code's name for a cell without an id: its index


class NotebookEditInput(Struct, forbid_unknown_fields=True, kw_only=True):
    notebook_path: Annotated[
        str, Meta(description="The absolute path to the Jupyter notebook file to edit (must be absolute, not relative)")
    ]
    new_source: Annotated[str, Meta(description="The new source for the cell")]
    cell_id: Annotated[
        str | None,
        Meta(
            description="The ID of the cell to edit. When inserting a new cell, the new cell will be inserted "
            "after the cell with this ID, or at the beginning if not specified."
        ),
    ] = None
    cell_type: Annotated[
        Literal["code", "markdown"] | None,
        Meta(
            description="The type of the cell (code or markdown). If not specified, it defaults to the current "
            "cell type. If using edit_mode=insert, this is required."
        ),
    ] = None
    edit_mode: Annotated[
        Literal["replace", "insert", "delete"] | None,
        Meta(description="The type of edit to make (replace, insert, delete). Defaults to replace."),
    ] = None


def _find(cells: list[Any], cell_id: str) -> int:
    for i, cell in enumerate(cells):
        if isinstance(cell, dict) and cell.get("id") == cell_id:
            return i
    m = _INDEX_ID.match(cell_id)
    if m is not None and int(m[1]) < len(cells):
        return int(m[1])
    raise ToolError(f'Cell with ID "{cell_id}" not found in notebook.')


def _indent(text: str) -> int:
    """The indentation the notebook's JSON is written with (nbformat's is 1), kept on write."""
    second = text.split("\n", 2)[1] if text.count("\n") >= 1 else ""
    return len(second) - len(second.lstrip(" ")) or 1


def edit_notebook(text: str, args: NotebookEditInput, label: str = "notebook") -> tuple[str, str]:
    """The notebook's new JSON text after the call, and the call's result line. Pure: nothing is
    read or written. ToolError when the notebook or the call is not valid."""
    try:
        nb = json.loads(text)
        cells = nb["cells"]
        if not isinstance(cells, list):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise ToolError(f"{label} is not a valid Jupyter notebook (no list of cells in its JSON)") from None
    mode = args.edit_mode or "replace"
    if mode == "insert":
        if args.cell_type is None:
            raise ToolError("cell_type is required when using edit_mode=insert.")
        at = _find(cells, args.cell_id) + 1 if args.cell_id else 0
        cell: dict[str, Any] = {"cell_type": args.cell_type, "metadata": {}, "source": args.new_source}
        if any(isinstance(c, dict) and "id" in c for c in cells) or (
            nb.get("nbformat", 0) >= 4 and nb.get("nbformat_minor", 0) >= 5
        ):
            cell = {"id": os.urandom(4).hex(), **cell}
        if args.cell_type == "code":
            cell |= {"execution_count": None, "outputs": []}
        cells.insert(at, cell)
        message = f"Inserted cell {cell.get('id', f'cell-{at}')} with {args.new_source}"
    else:
        if not args.cell_id:
            raise ToolError(f"cell_id is required when using edit_mode={mode}.")
        at = _find(cells, args.cell_id)
        if mode == "delete":
            del cells[at]
            message = f"Deleted cell {args.cell_id}"
        else:
            old = cells[at] if isinstance(cells[at], dict) else {}
            kind = args.cell_type or old.get("cell_type") or "code"
            cell = {**old, "cell_type": kind, "source": args.new_source}
            if kind == "code":  # its old outputs no longer belong to its source
                cell |= {"execution_count": None, "outputs": []}
            else:
                cell.pop("execution_count", None)
                cell.pop("outputs", None)
            cells[at] = cell
            message = f"Updated cell {args.cell_id} with {args.new_source}"
    out = json.dumps(nb, indent=_indent(text), ensure_ascii=False)
    return out + "\n" if text.endswith("\n") else out, message


def _target(args: NotebookEditInput, ctx: ToolContext) -> Path:
    if not Path(args.notebook_path).expanduser().is_absolute():
        raise ToolError(f"notebook_path must be an absolute path, not {args.notebook_path!r}")
    path = resolve(ctx, args.notebook_path)
    if path.suffix != ".ipynb":
        raise ToolError("File must be a Jupyter notebook (.ipynb file). For editing other file types, use Edit.")
    if not path.exists():
        raise ToolError(f"Notebook file does not exist: {path}")
    ctx.services.get(FileState).check_fresh(path)
    return path


def _load(path: Path) -> str:
    return read_text(path, "too large for NotebookEdit, which loads the whole notebook")


async def _check(args: NotebookEditInput, ctx: ToolContext) -> None:
    path = _target(args, ctx)
    edit_notebook(_load(path), args, str(path))


async def _run(args: NotebookEditInput, ctx: ToolContext) -> ToolOutput:
    path = _target(args, ctx)
    text, message = edit_notebook(_load(path), args, str(path))
    atomic_write(path, text.encode("utf-8"))
    ctx.services.get(FileState).mark(path)
    return ToolOutput(message, metadata={"file_path": str(path), "edit_mode": args.edit_mode or "replace"})


def notebook_tools() -> list[Tool]:
    return [
        Tool(
            "NotebookEdit",
            "Replace a cell of a Jupyter notebook (.ipynb) that has been Read; edit_mode=insert adds a cell "
            "after cell_id (first without one), edit_mode=delete removes it. For other files use Edit.",
            NotebookEditInput,
            _run,
            group="fs",
            destructive=True,
            timeout_s=60,
            validate=_check,
            effects=Effects(rule=EDIT, path_fields=("notebook_path",), writes=True),
        )
    ]
