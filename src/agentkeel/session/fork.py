"""Forking a session: a new session file holding another's conversation (before a given user
turn, or up to a given message), with a parent link and the parent's checkpoint objects shared.
The parent's log is never touched.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from agentkeel.core.events import AssistantMessage, Event, ToolResults, UserMessage
from agentkeel.session.checkpoints import checkpoint_dir
from agentkeel.session.events import SessionForked
from agentkeel.session.history import RewindError, live_turns, pick
from agentkeel.session.load import AmbiguousSession, find_session, load_session
from agentkeel.session.store import SessionWriter, project_dir


def resolve_session(home: Path, cwd: Path, session_ref: str) -> Path:
    """The session file ``session_ref`` (an id or a unique prefix) names in ``cwd``'s project."""
    try:
        found = find_session(project_dir(home, cwd.resolve()), session_ref.strip())
    except AmbiguousSession as e:
        raise RewindError(str(e)) from None
    if found is None:
        raise RewindError(f"no session '{session_ref}' for {cwd}: see `keel sessions list`")
    return found


def fork_session(home: Path, cwd: Path, session_ref: str, at_turn: int | None = None) -> str:
    """A new session that holds ``session_ref``'s conversation before user turn ``at_turn`` (all of it
    when None), with a parent link; returns the new session id. The original is untouched."""
    return fork_file(resolve_session(home, cwd, session_ref), at_turn).stem


class TruncationRefused(ValueError):
    """``--resume-session-at``/``--resume-drops-turn`` that do not fit the session (Claude Code's words)."""


def fork_file(
    source: Path, at_turn: int | None = None, *, at_uuid: str | None = None, drops_turn: str | None = None
) -> Path:
    """The fork of one session file (``--fork-session`` uses it too): the events before user turn
    ``at_turn`` (all when None) under a new id in the same folder, then a ``fork`` event naming the
    parent; the parent's checkpoint objects are shared (hard links), so the fork can rewind past
    the fork point. ``at_uuid`` (``--resume-session-at``) keeps the events up to that message."""
    events = load_session(source).events
    if at_turn is not None:
        events = events[: pick(live_turns(events), at_turn, "fork at").position]
    if at_uuid is not None:
        events = _truncated(events, at_uuid, drops_turn)
    new_id = str(uuid.uuid4())
    target = source.with_name(f"{new_id}.jsonl")
    writer = SessionWriter(target, new_id)
    try:
        for event in events:
            writer(event)
        writer(SessionForked(parent_id=source.stem, parent_path=str(source), at_turn=at_turn))
    finally:
        writer.close()
    _link_objects(checkpoint_dir(source) / "objects", checkpoint_dir(target) / "objects")
    return target


def _truncated(events: list[Event], at_uuid: str, drops_turn: str | None) -> list[Event]:
    """The events up to and including message ``at_uuid``. With ``drops_turn`` (the Agent SDK's
    ``resume_drops_turn``), everything cut must be that one turn, starting with its prompt, else the
    resume is refused as Claude Code 2.1.328 refuses it."""
    at = next((i for i, e in enumerate(events) if e.uuid == at_uuid), None)
    if at is None:
        raise TruncationRefused(f"--resume-session-at {at_uuid}: no such message in this session")
    cut = [e for e in events[at + 1 :] if isinstance(e, UserMessage | AssistantMessage | ToolResults)]
    if drops_turn is not None:
        prompts = [i for i, e in enumerate(cut) if isinstance(e, UserMessage)]
        first: Event | None = None
        why = ""
        if not cut or prompts[:1] != [0] or cut[0].uuid != drops_turn:
            why, first = "range does not start with the declared turn prompt", (cut[0] if cut else None)
        elif len(prompts) > 1:
            why, first = "range holds another turn", cut[prompts[1]]
        if why:
            where = f"; first discarded entry 1 [type=user, uuid={first.uuid}]" if first is not None else ""
            raise TruncationRefused(
                f"Resume rejected by --resume-drops-turn: resuming at {at_uuid} would discard entries not "
                f"attributable to turn {drops_turn}: {why}{where}"
            )
    return events[: at + 1]


def _link_objects(src: Path, dst: Path) -> None:
    """The fork can rewind past the fork point: it shares the parent's (immutable) checkpoint objects."""
    if not src.is_dir():
        return
    dst.mkdir(parents=True, exist_ok=True)
    for obj in src.iterdir():
        if obj.name.startswith("."):
            continue
        try:
            os.link(obj, dst / obj.name)
        except FileExistsError:
            continue
        except OSError:
            shutil.copyfile(obj, dst / obj.name)
