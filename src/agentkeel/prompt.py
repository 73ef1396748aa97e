"""The system prompt: identity, environment, project instructions, and what the user appends.

The full sectioned, budgeted builder (SPEC section 6) belongs to the context issue; this
module gives keel a correct prompt now: it reads the instruction files a Claude Code
project already has (AGENTS.md, CLAUDE.md, KEEL.md and their .local variants).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from datetime import date
from pathlib import Path

INSTRUCTION_NAMES = ("AGENTS.md", "CLAUDE.md", "KEEL.md", ".claude/CLAUDE.md", "CLAUDE.local.md", "KEEL.local.md")
MAX_INSTRUCTION_CHARS = 40_000

IDENTITY = """You are keel, an AI coding agent working in the user's repository through tools.
Read before you edit; make the smallest change that does the job; run the project's tests when you change code.
Use Read, Grep, Glob and LS to explore; Edit and Write to change files (Read a file before editing it); Bash for
commands. Be concise: say what you did and what is left."""


@dataclass(frozen=True)
class InstructionFile:
    path: Path
    text: str


def _git_root(cwd: Path) -> Path | None:
    for d in (cwd, *cwd.parents):
        if (d / ".git").exists():
            return d
    return None


def instruction_files(cwd: Path, home: Path, keel_home: Path) -> list[InstructionFile]:
    """User files, then project files from the repository root down to cwd."""
    candidates = [keel_home / "KEEL.md", home / ".claude" / "CLAUDE.md"]
    root = _git_root(cwd) or cwd
    chain = [cwd, *cwd.parents]
    dirs = list(reversed(chain[: chain.index(root) + 1])) if root in chain else [cwd]
    for d in dirs:
        candidates += [d / name for name in INSTRUCTION_NAMES]
    out: list[InstructionFile] = []
    seen: set[Path] = set()
    for p in candidates:
        try:
            real = p.resolve()
            if real in seen or not p.is_file():
                continue
            seen.add(real)
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if len(text) > MAX_INSTRUCTION_CHARS:
            text = text[:MAX_INSTRUCTION_CHARS] + "\n[truncated: instruction file over 40,000 characters]"
        out.append(InstructionFile(p, text))
    return out


def build_system_prompt(
    cwd: Path,
    *,
    home: Path,
    keel_home: Path,
    model: str,
    additional_dirs: tuple[Path, ...] = (),
    append: str | None = None,
) -> str:
    env = [
        f"Working directory: {cwd}",
        f"Is a git repository: {'yes' if _git_root(cwd) else 'no'}",
        f"Platform: {platform.system().lower()}",
        f"Today's date: {date.today().isoformat()}",
        f"Model: {model}",
    ]
    if additional_dirs:
        env.append("Additional working directories: " + ", ".join(str(d) for d in additional_dirs))
    sections = [IDENTITY, "<env>\n" + "\n".join(env) + "\n</env>"]
    for f in instruction_files(cwd, home, keel_home):
        sections.append(f'<instructions source="{f.path}">\n{f.text.strip()}\n</instructions>')
    if append:
        sections.append(append)
    return "\n\n".join(sections)
