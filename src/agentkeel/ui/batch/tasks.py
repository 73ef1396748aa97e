"""TASKS.jsonl: one JSON task per line.

    {"id": "fix-12", "prompt": "Fix issue 12", "repo": "path/or/dir",
     "git": "https://... or file://...", "ref": "main",
     "model": "sonnet", "permission_mode": "acceptEdits", "max_turns": 20, "max_budget_usd": 0.5,
     "allowed_tools": ["<Tool>(pytest *)", "<Tool>"], "settings": {...}, "timeout_s": 600, "worktree": false}

Only ``id`` and ``prompt`` are required. ``repo`` is relative to the TASKS file; without it the
task runs in the directory ``keel batch`` was started in. ``git`` clones a repository (at ``ref``)
into the batch's work directory. ``worktree`` runs the task in a fresh ``git worktree`` of the
repository, so parallel tasks on one repository never write over each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec


class Task(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    id: str
    prompt: str
    repo: str | None = None
    git: str | None = None
    ref: str | None = None
    model: str | None = None
    permission_mode: str | None = None
    max_turns: int | None = None
    max_budget_usd: float | None = None
    allowed_tools: list[str] | None = None
    settings: dict[str, Any] | None = None
    timeout_s: float | None = None
    worktree: bool = False


class TaskFileError(ValueError):
    """A TASKS file that cannot run: the message names the line and what to change."""


_MODES = {"default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"}
_decoder = msgspec.json.Decoder(Task)


def parse_task(line: str, where: str) -> Task:
    try:
        task = _decoder.decode(line)
    except msgspec.ValidationError as e:
        raise TaskFileError(f"{where}: {e}") from None
    except msgspec.DecodeError as e:
        raise TaskFileError(f"{where}: not a JSON object ({e})") from None
    if not task.id.strip() or "/" in task.id or task.id in (".", ".."):
        raise TaskFileError(f"{where}: 'id' must be a non-empty name without '/'")
    if not task.prompt.strip():
        raise TaskFileError(f"{where}: 'prompt' is empty")
    if task.repo is not None and task.git is not None:
        raise TaskFileError(f"{where}: give 'repo' or 'git', not both")
    if task.permission_mode is not None and task.permission_mode not in _MODES:
        raise TaskFileError(f"{where}: 'permission_mode' must be one of {', '.join(sorted(_MODES))}")
    for name in ("max_turns", "max_budget_usd", "timeout_s"):
        value = getattr(task, name)
        if value is not None and value <= 0:
            raise TaskFileError(f"{where}: '{name}' must be positive")
    return task


def load_tasks(path: Path) -> list[Task]:
    """Every task of the file, or one error naming the first bad line (ids must be unique)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise TaskFileError(f"{path}: cannot read the tasks file ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise TaskFileError(f"{path}: not UTF-8 text") from None
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        task = parse_task(line, f"{path}:{n}")
        if task.id in seen:
            raise TaskFileError(f"{path}:{n}: task id {task.id!r} is already used on line {seen[task.id]}")
        seen[task.id] = n
        tasks.append(task)
    if not tasks:
        raise TaskFileError(f"{path}: no tasks (one JSON object per line, each with 'id' and 'prompt')")
    return tasks
