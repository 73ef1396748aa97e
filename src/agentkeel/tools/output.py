"""Output budget: a tool result over budget spills to a file; the model gets head, tail and the path.

A tool whose result is kept whole (``Effects.protected``: a skill's text, a subagent's report, a
plan, the todo list) is never spilled: Claude Code gives the model a 73k-character skill whole."""

from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec

from agentkeel.core.extensions import ToolCall
from agentkeel.core.tools import ToolOutput

DEFAULT_BUDGET = 30_000  # characters, as Claude Code's Bash output limit


class OutputBudget(msgspec.Struct):
    """An ``after_tool`` extension. Budgets per tool name; ``default`` for the rest."""

    spill_dir: Path
    default: int = DEFAULT_BUDGET
    per_tool: dict[str, int] = msgspec.field(default_factory=lambda: {"Read": 120_000})

    async def __call__(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        if not isinstance(output.content, str) or (call.tool is not None and call.tool.effects.protected):
            return output
        budget = self.per_tool.get(call.name, self.default)
        text = output.content
        if len(text) <= budget:
            return output
        self.spill_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # private, as the transcript it belongs to
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", call.id) or "output"
        path = self.spill_dir / f"{safe}.txt"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with open(fd, "w", encoding="utf-8") as f:
            f.write(text)
        head, tail = text[: budget * 2 // 3], text[-(budget // 4) :]
        omitted = len(text) - len(head) - len(tail)
        preview = (
            f"{head}\n\n… [{omitted} characters omitted. The full output ({len(text)} characters) is saved at "
            f"{path}; Read it with offset/limit or Grep it.] …\n\n{tail}"
        )
        meta = dict(output.metadata, spilled_to=str(path), full_chars=len(text))
        return ToolOutput(preview, is_error=output.is_error, metadata=meta)
