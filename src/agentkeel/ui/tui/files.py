"""Input helpers without a screen: ``@`` file mentions (a fuzzy ranking of the project's files)
and the prompt history shared with the line mode (``$KEEL_HOME/history``, prompt_toolkit's
file format, so both modes see the same entries)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from agentkeel.internal.git import run_git

SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}


def project_files(cwd: Path, limit: int = 20000) -> list[str]:
    """The project's files relative to ``cwd``: git's list when it is a repository (ignored files
    left out), else a walk that skips dependency and cache folders. At most ``limit``."""
    out = run_git(cwd, "ls-files", "--cached", "--others", "--exclude-standard", timeout=5)
    if out is not None and out.returncode == 0:
        return sorted(out.stdout.decode("utf-8", errors="replace").splitlines())[:limit]
    found: list[str] = []
    for root, dirs, files in os.walk(cwd):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        rel = os.path.relpath(root, cwd)
        for name in sorted(files):
            found.append(name if rel == "." else f"{rel}/{name}")
            if len(found) >= limit:
                return found
    return found


def fuzzy_score(query: str, path: str) -> float | None:
    """How well ``query`` matches ``path`` as a subsequence (higher is better); None: no match.
    Matches in the file name, at word starts and in a row count more; shorter paths win ties."""
    if not query:
        return 1.0 / (1 + len(path))
    q, p = query.lower(), path.lower()
    name_start = p.rfind("/") + 1
    score, pos, run = 0.0, 0, 0
    for ch in q:
        found = p.find(ch, pos)
        if found < 0:
            return None
        run = run + 1 if found == pos and pos > 0 else 1
        score += 1.0 + run
        if found >= name_start:
            score += 2.0
        if found == 0 or p[found - 1] in "/._-":
            score += 3.0
        pos = found + 1
    name = p[name_start:]
    if q in name:
        score += 10.0
    if name.split(".")[0] == q:
        score += 10.0  # "app" finds app.py before apple.md
    return score - len(p) * 0.01


def fuzzy_rank(query: str, paths: Iterable[str], limit: int = 12) -> list[str]:
    scored = [(s, path) for path in paths if (s := fuzzy_score(query, path)) is not None]
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [path for _, path in scored[:limit]]


def mention_at(text: str, cursor: int) -> tuple[int, str] | None:
    """The ``@word`` the cursor is in: (offset of the @, the word after it), or None."""
    start = cursor
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    word = text[start:cursor]
    if word.startswith("@"):
        return start, word[1:]
    return None


class History:
    """Prompt history in prompt_toolkit's FileHistory format: ``# time`` then ``+line`` per line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[str] = self._load()
        self._pos: int | None = None

    def _load(self) -> list[str]:
        try:
            raw = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        entries: list[str] = []
        current: list[str] = []
        for line in raw.splitlines():
            if line.startswith("+"):
                current.append(line[1:])
            elif current:
                entries.append("\n".join(current))
                current = []
        if current:
            entries.append("\n".join(current))
        return entries

    def add(self, text: str) -> None:
        self._pos = None
        if not text.strip() or (self.entries and self.entries[-1] == text):
            return
        self.entries.append(text)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        body = "".join(f"+{line}\n" for line in text.split("\n"))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(f"\n# {stamp}\n{body}")
        except OSError:
            pass  # history is a convenience: a read-only home loses it, not the prompt

    def previous(self) -> str | None:
        if not self.entries:
            return None
        self._pos = len(self.entries) - 1 if self._pos is None else max(0, self._pos - 1)
        return self.entries[self._pos]

    def next(self) -> str | None:
        if self._pos is None:
            return None
        self._pos += 1
        if self._pos >= len(self.entries):
            self._pos = None
            return ""
        return self.entries[self._pos]
