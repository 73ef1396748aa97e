"""The system prompt, for callers that want it without a session.

The sectioned, budgeted, memoised builder lives in :mod:`agentkeel.context.builder`; a session
gets its prompt from its :class:`~agentkeel.context.manager.ContextManager`. This function builds
the same prompt once, from the same sources.
"""

from __future__ import annotations

from pathlib import Path

from agentkeel.context.builder import PromptBuilder
from agentkeel.context.instructions import Instructions
from agentkeel.context.styles import find_style


def build_system_prompt(
    cwd: Path,
    *,
    home: Path,
    keel_home: Path,
    model: str,
    additional_dirs: tuple[Path, ...] = (),
    append: str | None = None,
    output_style: str | None = None,
    budget_tokens: int = 50_000,
) -> str:
    style, _ = find_style(output_style, cwd, home)
    instructions = Instructions.load(cwd, home, keel_home)
    return PromptBuilder(cwd, model, instructions, style, budget_tokens, additional_dirs, append).text()
