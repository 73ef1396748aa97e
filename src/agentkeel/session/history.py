"""A session's user turns, and going back in it: rewind (code, conversation or both), fork, replay.

The #19 contract between the session layer and the UIs (the TUI and ``keel serve`` call
these; the CLI's ``/rewind``, ``/fork`` and ``keel sessions replay`` too). The log is never
edited: a rewind appends events, a fork writes a new session file.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agentkeel.core.events import Event

if TYPE_CHECKING:
    from agentkeel.runtime import Runtime

RewindMode = Literal["conversation", "code", "both"]


@dataclass(frozen=True)
class UserTurn:
    """One prompt the user gave (not a tool result, not a hook's continuation), oldest first.

    ``index`` counts the turns of the live conversation from 0; ``files_changed`` are the
    paths keel's checkpoints saw change during the turn."""

    index: int
    text: str
    timestamp: str
    event_uuid: str
    files_changed: tuple[str, ...]


@dataclass(frozen=True)
class RewindResult:
    restored_files: tuple[str, ...]  # written back to their content before the turn
    removed_files: tuple[str, ...]  # created during or after the turn: deleted
    conversation_turns: int  # the turns the conversation holds now (= turn_index when it was rewound)
    warning: str | None  # one line when something could not be restored (a missing checkpoint object)


def user_turns(session_file: Path) -> list[UserTurn]:
    """The session's user prompts, oldest first (after a rewind: the turns still in the conversation)."""
    raise NotImplementedError


async def rewind(runtime: Runtime, turn_index: int, mode: RewindMode) -> RewindResult:
    """Restore code from checkpoints and/or the conversation to just before user turn ``turn_index``,
    by APPENDING events (the log is never edited); the live Runtime continues from there."""
    raise NotImplementedError


def fork_session(home: Path, cwd: Path, session_ref: str, at_turn: int | None = None) -> str:
    """A new session that holds ``session_ref``'s conversation before user turn ``at_turn`` (all of it
    when None), with a parent link; returns the new session id. The original is untouched."""
    raise NotImplementedError


async def replay(session_file: Path, speed: float = 0.0) -> AsyncIterator[Event]:
    """Re-emit the session's events in order; ``speed`` > 0 keeps their pacing (2.0: twice as fast),
    0 is as fast as possible."""
    if session_file.name:
        raise NotImplementedError
    yield Event()  # pragma: no cover
