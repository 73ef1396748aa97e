"""Output budget: a tool result over budget spills to a file; the model gets head, tail and the path.

A tool whose result is kept whole (``Effects.protected``: a skill's text, a subagent's report, a
plan, the todo list) is never spilled: Claude Code gives the model a 73k-character skill whole.

A command's output (Bash, BashOutput) has Codex CLI's budget, 256 lines and 10,240 characters
(Codex counts bytes), half from the head and half from the tail, rather than Claude Code's 30,000
characters: what a build or a test run prints in between is rarely what the next step needs, the
whole of it is one Read or Grep away in the spilled file, and every character the model is shown
once is re-read from the cache on every later request of the session (#35: a long session's cost
is mostly that). ``BASH_MAX_OUTPUT_LENGTH`` (Claude Code's setting) replaces it with that many
characters and no line limit."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import msgspec

from agentkeel.core.extensions import ToolCall
from agentkeel.core.tools import ToolOutput

DEFAULT_BUDGET = 30_000  # characters, as Claude Code's limit on a tool's output
SHELL_TOOLS = ("Bash", "BashOutput")
SHELL_CHARS, SHELL_LINES = 10_240, 256  # Codex CLI's MODEL_FORMAT_MAX_BYTES / _LINES (here in characters)
MIN_BUDGET = 100  # characters: a smaller budget (BASH_MAX_OUTPUT_LENGTH=3) would show nothing
WORTH_CUTTING = 300  # characters: cutting fewer adds a note longer than what it saves


class OutputBudget(msgspec.Struct):
    """An ``after_tool`` extension. Budgets per tool name (characters, and lines where
    ``lines`` names the tool); ``default`` for the rest."""

    spill_dir: Path
    default: int = DEFAULT_BUDGET
    per_tool: dict[str, int] = msgspec.field(
        default_factory=lambda: {"Read": 120_000, **dict.fromkeys(SHELL_TOOLS, SHELL_CHARS)}
    )
    lines: dict[str, int] = msgspec.field(default_factory=lambda: dict.fromkeys(SHELL_TOOLS, SHELL_LINES))

    @classmethod
    def from_env(cls, spill_dir: Path, env: Mapping[str, str]) -> OutputBudget:
        """The budget of a session whose environment may set ``BASH_MAX_OUTPUT_LENGTH`` (characters;
        at least 100; anything but a positive number is ignored)."""
        budget = cls(spill_dir)
        raw = env.get("BASH_MAX_OUTPUT_LENGTH", "").strip()
        if raw.isascii() and raw.isdigit() and int(raw) > 0:
            budget.per_tool.update(dict.fromkeys(SHELL_TOOLS, max(MIN_BUDGET, int(raw))))
            for name in SHELL_TOOLS:
                budget.lines.pop(name, None)
        return budget

    async def __call__(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        if not isinstance(output.content, str) or (call.tool is not None and call.tool.effects.protected):
            return output
        budget = max(MIN_BUDGET, self.per_tool.get(call.name, self.default))
        text = output.content
        max_lines = self.lines.get(call.name)
        if max_lines is not None:  # a command's output: the first and the last lines, half and half
            rows = _rows(text)
            if len(rows) <= max_lines and len(text) <= budget:
                return output
            return self._spill(call, output, rows, _head_tail(text, rows, max_lines, budget))
        if len(text) <= budget:
            return output
        return self._spill(call, output, _rows(text), (text[: budget * 2 // 3], text[len(text) - budget // 4 :]))

    def _spill(self, call: ToolCall, output: ToolOutput, rows: list[str], kept: tuple[str, str]) -> ToolOutput:
        text = output.content
        assert isinstance(text, str)
        head, tail = kept
        omitted = len(text) - len(head) - len(tail)
        if omitted < WORTH_CUTTING:  # the note would be longer than what it leaves out: whole
            return output
        self.spill_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # private, as the transcript it belongs to
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", call.id) or "output"
        path = self.spill_dir / f"{safe}.txt"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with open(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        cut = len(rows) - len(_rows(head)) - len(_rows(tail))  # a line cut inside counts as shown
        what = f"{_count(cut, 'line')} ({omitted} characters)" if cut > 0 else f"{omitted} characters"
        preview = (
            f"{head}\n\n… [{what} omitted. The full output ({_count(len(rows), 'line')}, {len(text)} characters) is "
            f"saved at {path}; Read it with offset/limit or Grep it.] …\n\n{tail}"
        )
        meta = dict(output.metadata, spilled_to=str(path), full_chars=len(text))
        return ToolOutput(preview, is_error=output.is_error, metadata=meta)


def _rows(text: str) -> list[str]:
    """The lines of ``text`` as Read counts them: split at ``\\n`` only (a ``\\r`` of a progress bar
    is part of its line), each with its ``\\n``."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _head_tail(text: str, rows: list[str], max_lines: int, max_chars: int) -> tuple[str, str]:
    """The first and last ``max_lines // 2`` lines, each half within ``max_chars // 2`` characters
    (fewer lines than that, and too many characters: the first and the last characters)."""
    half, room = max_lines // 2, max_chars // 2
    if len(rows) > max_lines:
        head, tail = "".join(rows[:half]), "".join(rows[-half:])
    else:
        head = tail = text
    return head[:room], tail[len(tail) - room :] if len(tail) > room else tail


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
