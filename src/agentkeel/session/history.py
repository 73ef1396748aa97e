"""A session's user turns, and going back in it: rewind (code, conversation or both), fork, replay.

The #19 contract between the session layer and the UIs (the TUI and ``keel serve`` call
these; the CLI's ``/rewind``, ``/fork`` and ``keel sessions replay`` too). The log is never
edited: a rewind appends events, a fork writes a new session file.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentkeel.core.events import (
    AssistantMessage,
    Event,
    RunFinished,
    SessionStarted,
    UserMessage,
)
from agentkeel.core.types import Message, TextBlock
from agentkeel.core.view import ViewBuilder
from agentkeel.session.checkpoints import Checkpoint, CheckpointRecorder, RewindMarker, SessionForked, checkpoint_dir
from agentkeel.session.load import AmbiguousSession, find_session, load_session
from agentkeel.session.objects import UNKNOWN, CheckpointError, ObjectStore, file_sha
from agentkeel.session.store import SessionWriter, project_dir

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


class RewindError(ValueError):
    """A rewind or fork that cannot be done (no such turn, no such session); the message is one line."""


@dataclass
class _Turn:
    position: int  # index of the prompt event in the session's events
    event: UserMessage
    files: list[str] = field(default_factory=list)


def _turns(events: list[Event]) -> list[_Turn]:
    """The live conversation's user turns. A prompt is the first user message after a run ended
    (or the session started, or a rewind); later user messages of a run are tool results or a
    hook's continuation. A rewind marker drops the turns from its target on."""
    turns: list[_Turn] = []
    boundary = True
    for pos, event in enumerate(events):
        if isinstance(event, RewindMarker):
            kept = next((i for i, t in enumerate(turns) if t.event.uuid == event.target_uuid), None)
            del turns[kept if kept is not None else min(event.turn_index, len(turns)) :]
            boundary = True
        elif isinstance(event, RunFinished | SessionStarted | SessionForked):
            boundary = True
        elif isinstance(event, UserMessage):
            if boundary and _prompt_text(event.message) is not None:
                turns.append(_Turn(pos, event))
            boundary = False
        elif isinstance(event, AssistantMessage):
            boundary = False
        elif isinstance(event, Checkpoint) and event.source == "tool" and turns:
            turns[-1].files.extend(p for p in event.files if p not in turns[-1].files)
    return turns


def _prompt_text(message: Message) -> str | None:
    first = next((b for b in message.content if isinstance(b, TextBlock)), None)
    return first.text if first is not None else None


def user_turns(session_file: Path) -> list[UserTurn]:
    """The session's user prompts, oldest first (after a rewind: the turns still in the conversation)."""
    events = load_session(session_file).events
    return [
        UserTurn(
            index=i,
            text=_prompt_text(t.event.message) or "",
            timestamp=t.event.timestamp,
            event_uuid=t.event.uuid,
            files_changed=tuple(t.files),
        )
        for i, t in enumerate(_turns(events))
    ]


def _pick(turns: list[_Turn], turn_index: int, what: str) -> _Turn:
    if not turns:
        raise RewindError(f"cannot {what} turn {turn_index}: the session has no user turns yet")
    if not 0 <= turn_index < len(turns):
        raise RewindError(f"cannot {what} turn {turn_index}: the session has turns 0 to {len(turns) - 1}")
    return turns[turn_index]


def files_before(events: list[Event], position: int) -> dict[str, str | None]:
    """Each path a checkpoint after ``position`` names, with its content at ``position``."""
    before: dict[str, str | None] = {}
    for event in events[position + 1 :]:
        if isinstance(event, Checkpoint):
            for path, sha in event.files.items():
                before.setdefault(path, sha)
    return before


def restore_files(
    store: ObjectStore, targets: dict[str, str | None]
) -> tuple[list[str], list[str], dict[str, str | None], list[str]]:
    """Write each path back to its target content (None: delete it). Returns the restored and the
    removed paths, what they held just before (for the rewind's own checkpoint), and problems."""
    restored: list[str] = []
    removed: list[str] = []
    replaced: dict[str, str | None] = {}
    problems: list[str] = []
    for path_s, want in sorted(targets.items()):
        path = Path(path_s)
        now = file_sha(path)
        if want == now and want != UNKNOWN:
            continue
        if want == UNKNOWN:
            problems.append(f"{path_s}: its content before was not recorded (too large or unreadable)")
            continue
        try:
            if want is None:
                replaced[path_s] = store.snapshot(path)
                path.unlink()
                removed.append(path_s)
                continue
            data = store.get(want, path_s)
            replaced[path_s] = store.snapshot(path)
            _write_back(path, data)
            restored.append(path_s)
        except CheckpointError as e:
            problems.append(str(e))
        except OSError as e:
            problems.append(f"cannot restore {path_s}: {e.strerror or e}")
    return restored, removed, replaced, problems


def _write_back(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = path.stat().st_mode & 0o7777
    except OSError:
        mode = None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".keel-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is not None:
            Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _warning(problems: list[str]) -> str | None:
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"could not restore {len(problems)} file(s): {problems[0]}{more}"


async def rewind(runtime: Runtime, turn_index: int, mode: RewindMode) -> RewindResult:
    """Restore code from checkpoints and/or the conversation to just before user turn ``turn_index``,
    by APPENDING events (the log is never edited); the live Runtime continues from there."""
    if mode not in ("conversation", "code", "both"):
        raise RewindError(f"unknown rewind mode {mode!r}: use conversation, code or both")
    recorder = runtime.agent.services.find(CheckpointRecorder)
    if recorder is not None:
        recorder.flush()
    events = load_session(runtime.session_path).events
    turns = _turns(events)
    turn = _pick(turns, turn_index, "rewind to")
    restored: list[str] = []
    removed: list[str] = []
    problems: list[str] = []
    if mode in ("code", "both"):
        store = recorder.store if recorder is not None else ObjectStore(checkpoint_dir(runtime.session_path))
        targets = files_before(events, turn.position)
        restored, removed, replaced, problems = await asyncio.to_thread(restore_files, store, targets)
        if replaced:
            runtime.bus.emit(Checkpoint(tool="rewind", source="rewind", files=replaced))
    conversation_turns = len(turns)
    if mode in ("conversation", "both"):
        builder = ViewBuilder()
        for event in events[: turn.position]:
            builder.add_event(event)
        marker = RewindMarker(
            messages=builder.messages(),
            trigger="rewind",
            stage="rewind",
            turn_index=turn_index,
            target_uuid=turn.event.uuid,
            mode=mode,
        )
        logged = runtime.bus.publish(marker)
        runtime.agent.view.add_event(logged)
        conversation_turns = turn_index
    return RewindResult(tuple(restored), tuple(removed), conversation_turns, _warning(problems))


async def rewind_files(runtime: Runtime, user_message_id: str, *, dry_run: bool = False) -> dict[str, Any]:
    """The stream-json ``rewind_files`` control request (the Agent SDK's ``rewindFiles``): restore the
    files to just before the user message ``user_message_id``; ``dry_run`` only says what would change.
    The answer has Claude Code's shape: ``canRewind``, ``error``, ``filesChanged``."""
    events = load_session(runtime.session_path).events
    turns = _turns(events)
    index = next((i for i, t in enumerate(turns) if t.event.uuid == user_message_id), None)
    if index is None:
        return {"canRewind": False, "error": f"no user message {user_message_id!r} in this session's conversation"}
    if dry_run:
        targets = files_before(events, turns[index].position)
        changed = sorted(p for p, sha in targets.items() if file_sha(Path(p)) != sha or sha == UNKNOWN)
        return {"canRewind": True, "filesChanged": changed}
    result = await rewind(runtime, index, "code")
    out: dict[str, Any] = {"canRewind": True, "filesChanged": sorted(result.restored_files + result.removed_files)}
    if result.warning:
        out["error"] = result.warning
    return out


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


def fork_file(source: Path, at_turn: int | None = None) -> Path:
    """The fork of one session file (``--fork-session`` uses it too): the events before user turn
    ``at_turn`` (all when None) under a new id in the same folder, then a ``fork`` event naming the
    parent; the parent's checkpoint objects are shared (hard links), so the fork can rewind past
    the fork point."""
    import uuid

    events = load_session(source).events
    if at_turn is not None:
        events = events[: _pick(_turns(events), at_turn, "fork at").position]
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


def _seconds(timestamp: str) -> float | None:
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


MAX_REPLAY_GAP_S = 2.0  # a long pause in the session (the user was away) replays as at most this


async def replay(session_file: Path, speed: float = 0.0) -> AsyncIterator[Event]:
    """Re-emit the session's events in order; ``speed`` > 0 keeps their pacing (2.0: twice as fast,
    a pause longer than MAX_REPLAY_GAP_S is shortened to it), 0 is as fast as possible."""
    events = (await asyncio.to_thread(load_session, session_file)).events
    last: float | None = None
    for event in events:
        now = _seconds(event.timestamp)
        if speed > 0 and now is not None and last is not None and now > last:
            await asyncio.sleep(min((now - last) / speed, MAX_REPLAY_GAP_S))
        last = now if now is not None else last
        yield event
