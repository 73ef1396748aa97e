"""The SQLite index of sessions (``$KEEL_HOME/sessions.db``), kept in step with the JSONL files.

The JSONL files are the truth; the index is a cache of what listing needs (title, first prompt,
cwd, cost, last activity, turns, parent), rebuilt from the files when missing or stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    path: Path
    cwd: str
    title: str
    first_prompt: str
    cost_usd: float
    last_activity: str  # ISO 8601, UTC
    turns: int
    parent_id: str | None  # the session this one was forked from


class SessionIndex:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / "sessions.db"

    def list(self, cwd: Path | None = None, limit: int = 100) -> list[SessionRow]:
        """Sessions newest first (of one project when ``cwd`` is given), kept in step with the
        JSONL files, rebuilt when missing."""
        raise NotImplementedError
