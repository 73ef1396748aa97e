"""A session's user turns, and going back in it: rewind (code, conversation or both), replay.

The #19 contract between the session layer and the UIs (the TUI and ``keel serve`` call
these; the CLI's ``/rewind``, ``/fork`` and ``keel sessions replay`` too; forking is in
``session/fork.py``, putting the files back in ``session/restore.py``). The log is never
edited: a rewind appends events, a fork writes a new session file.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentkeel.core.events import (
    AssistantMessage,
    Event,
    Notice,
    RunFinished,
    SessionStarted,
    UserMessage,
)
from agentkeel.core.types import Message, TextBlock
from agentkeel.core.view import ViewBuilder
from agentkeel.session.checkpoints import CheckpointRecorder, checkpoint_dir
from agentkeel.session.events import Checkpoint, RewindDone, RewindIntent, RewindMarker, SessionForked
from agentkeel.session.load import load_session
from agentkeel.session.objects import UNKNOWN, ObjectStore, StoreError, current
from agentkeel.session.openrewinds import close_marker, listed, open_marker
from agentkeel.session.restore import apply_all, files_before, last_left, plan_rewind, sweep_temp
from agentkeel.session.store import SessionLock, SessionLocked, SessionWriter

if TYPE_CHECKING:
    from agentkeel.core.handle import SessionHandle  # the live session a rewind works on


RewindMode = Literal["conversation", "code", "both"]
Publish = Callable[[Event], Event]  # logs an event in the session being recovered; returns it as logged


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


class RewindConflict(RewindError):
    """A code rewind that would overwrite files changed since keel last changed them (``files``);
    nothing was changed. Ask the user, then rewind again with ``force=True``."""

    def __init__(self, message: str, files: tuple[str, ...]) -> None:
        super().__init__(message)
        self.files = files


@dataclass
class _Turn:
    position: int  # index of the prompt event in the session's events
    event: UserMessage
    files: list[str] = field(default_factory=list)


def live_turns(events: list[Event]) -> list[_Turn]:
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
        for i, t in enumerate(live_turns(events))
    ]


def pick(turns: list[_Turn], turn_index: int, what: str) -> _Turn:
    if not turns:
        raise RewindError(f"cannot {what} turn {turn_index}: the session has no user turns yet")
    if not 0 <= turn_index < len(turns):
        raise RewindError(f"cannot {what} turn {turn_index}: the session has turns 0 to {len(turns) - 1}")
    return turns[turn_index]


def _warning(problems: list[str]) -> str | None:
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"could not restore {len(problems)} file(s): {problems[0]}{more}"


def _conflict_message(turn_index: int, files: list[str]) -> str:
    shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    return (
        f"not rewound: {len(files)} file(s) changed since keel last changed them ({shown}); rewinding "
        f"would overwrite those changes. Nothing was changed. To overwrite them: `/rewind {turn_index} code --force`"
    )


async def rewind(runtime: SessionHandle, turn_index: int, mode: RewindMode, *, force: bool = False) -> RewindResult:
    """Restore code from checkpoints and/or the conversation to just before user turn ``turn_index``,
    by APPENDING events (the log is never edited); the live Runtime continues from there.

    A file whose content is not what keel last left there (edited by hand since, or unknown) is
    never overwritten unless ``force``: :class:`RewindConflict` names them and nothing changes.
    The code part is journaled: a ``rewind_intent`` (each path's target and its content before,
    stored) is logged before any file is touched and a ``rewind_done`` after, so a rewind killed
    half-way is completed or rolled back at the next start of any session in the project
    (:func:`recover_open_rewinds`: the session's marker in the project's register of open
    rewinds is written durably before the intent and removed after the ``rewind_done``), or when
    the session itself is resumed (:func:`recover_rewind`)."""
    if mode not in ("conversation", "code", "both"):
        raise RewindError(f"unknown rewind mode {mode!r}: use conversation, code or both")
    recorder = runtime.agent.services.find(CheckpointRecorder)
    if recorder is not None:
        recorder.flush()
    events = load_session(runtime.session_path).events
    recovered = recover_rewind(runtime, events)
    if recovered:  # an earlier rewind was killed half-way: finished first
        runtime.bus.emit(Notice(level="warning", message=recovered))
        events = load_session(runtime.session_path).events
    turns = live_turns(events)
    turn = pick(turns, turn_index, "rewind to")
    restored: list[str] = []
    removed: list[str] = []
    problems: list[str] = []
    rewind_id: str | None = None
    if mode in ("code", "both"):
        store = _store(runtime)
        plan = await asyncio.to_thread(plan_rewind, store, files_before(events, turn.position), last_left(events))
        if plan.conflicts and not force:
            raise RewindConflict(_conflict_message(turn_index, plan.conflicts), tuple(plan.conflicts))
        problems = plan.problems
        if plan.targets:
            # the journal: what each file holds now is stored, then the intent is logged, then files change
            prior = await asyncio.to_thread(_priors, store, plan.targets)
            rewind_id = str(uuid.uuid4())
            await asyncio.to_thread(_register, runtime.session_path, rewind_id)
            runtime.bus.publish(
                RewindIntent(
                    rewind_id=rewind_id,
                    turn_index=turn_index,
                    target_uuid=turn.event.uuid,
                    mode=mode,
                    targets=plan.targets,
                    prior=prior,
                )
            )
            done, failed = await asyncio.to_thread(apply_all, store, plan.targets)
            if done:
                runtime.bus.publish(
                    Checkpoint(
                        tool_use_id=rewind_id,
                        tool="rewind",
                        source="rewind",
                        files={p: prior[p] for p in done},
                        after={p: plan.targets[p] for p in done},
                    )
                )
            problems += failed
            restored = [p for p in done if plan.targets[p] is not None]
            removed = [p for p in done if plan.targets[p] is None]
    conversation_turns = len(turns)
    if mode in ("conversation", "both"):
        runtime.agent.append(_marker(events, turn, turn_index, mode))
        conversation_turns = turn_index
    if rewind_id is not None:  # after the conversation's marker: a kill before this finishes both
        runtime.bus.publish(RewindDone(rewind_id=rewind_id, outcome="completed", problems=problems))
        close_marker(runtime.session_path)
    return RewindResult(tuple(restored), tuple(removed), conversation_turns, _warning(problems))


def _store(runtime: SessionHandle) -> ObjectStore:
    recorder = runtime.agent.services.find(CheckpointRecorder)
    return recorder.store if recorder is not None else ObjectStore(checkpoint_dir(runtime.session_path))


def _priors(store: ObjectStore, targets: dict[str, str | None]) -> dict[str, str | None]:
    """What each path holds now, stored (so the rewind can be rolled back); refused when it cannot be."""
    try:
        return {path_s: store.snapshot(Path(path_s)) for path_s in targets}
    except StoreError as e:
        raise RewindError(
            f"not rewound: the files' current content could not be saved first ({e}); nothing was changed"
        ) from None


def _register(session_file: Path, rewind_id: str) -> None:
    """The session's marker in the project's register of open rewinds, durable before the intent."""
    try:
        open_marker(session_file, rewind_id)
    except OSError as e:
        raise RewindError(
            f"not rewound: the rewind could not be recorded as begun ({e.strerror or e}); nothing was changed"
        ) from None


def _marker(events: list[Event], turn: _Turn, turn_index: int, mode: str) -> RewindMarker:
    builder = ViewBuilder()
    for event in events[: turn.position]:
        builder.add_event(event)
    return RewindMarker(
        messages=builder.messages(),
        trigger="rewind",
        stage="rewind",
        turn_index=turn_index,
        target_uuid=turn.event.uuid,
        mode=mode,
    )


def _mark(publish: Publish, events: list[Event], turn: _Turn, turn_index: int, mode: str) -> Event:
    return publish(_marker(events, turn, turn_index, mode))


def cleared() -> RewindMarker:
    """``/clear``: the conversation starts over empty. A marker in the log (as a rewind to before
    the first turn is), so a resumed session (-c, -r) goes on from the cleared conversation; the
    transcript keeps what came before."""
    return RewindMarker(messages=[], trigger="clear", stage="clear", turn_index=0, mode="clear")


def recover_rewind(runtime: SessionHandle, events: list[Event] | None = None) -> str | None:
    """Finish a code rewind the log shows begun and not ended (keel was killed half-way): roll it
    forward when every file is at its target or as it was just before (and each target object is
    there), else roll it back; a file changed since by someone else is left alone. Logs a
    ``rewind_done`` (``recovered``) saying which, removes the session's marker from the project's
    register of open rewinds, and returns one line for the user (None: nothing to do).
    ``events``: the session's, when the caller has them loaded already."""
    if events is None:
        events = load_session(runtime.session_path).events
    line = _recover_events(runtime.agent.append, _store(runtime), events)
    close_marker(runtime.session_path)  # every intent is closed now (a marker without one is stale)
    return line


def recover_open_rewinds(sessions: Path, current: str | None = None) -> list[str]:
    """Finish the rewinds a kill left open in any session of the project folder ``sessions`` (its
    register of open rewinds), as :func:`recover_rewind` does for a resumed session: each session
    is locked first and its own log gets the ``rewind_done``. A session live in another process
    (its lock held) is left to that process; a marker whose session has no open intent (its
    ``rewind_done`` is logged, or the kill came before the intent) is stale and removed.
    ``current``: the starting session's id, which its own start recovers. Returns one line per
    session for the user."""
    lines: list[str] = []
    for sid in listed(sessions):
        if sid == current:
            continue
        try:
            line = _recover_closed_session(sessions / f"{sid}.jsonl")
        except (OSError, StoreError) as e:  # the marker stays: the next start tries again
            line = f"an interrupted rewind in session {sid} could not be finished: {e}; the next start tries again"
        if line:
            lines.append(line)
    return lines


def _recover_closed_session(log: Path) -> str | None:
    sid = log.stem
    if not log.exists():  # the session is gone: nothing to finish
        close_marker(log)
        return None
    lock = SessionLock(log)
    try:
        lock.acquire()
    except SessionLocked as e:
        who = f" (pid {e.owner['pid']})" if e.owner.get("pid") else ""
        return f"session {sid} has a rewind in progress in another keel process{who}; left to it"
    try:
        loaded = load_session(log)
        if not _pending(loaded.events):
            close_marker(log)  # stale: its rewind_done is logged, or it was killed before the intent
            return None
        writer = SessionWriter(log, sid, parent_uuid=loaded.last_uuid)
        try:

            def publish(event: Event) -> Event:
                writer(event)
                return event

            line = _recover_events(publish, ObjectStore(checkpoint_dir(log)), loaded.events)
        finally:
            writer.close()  # fsynced: the rewind_done is durable before the marker goes
        close_marker(log)
        return f"session {sid}: {line}" if line else None
    finally:
        lock.release()


def _pending(events: list[Event]) -> list[tuple[int, RewindIntent]]:
    closed = {e.rewind_id for e in events if isinstance(e, RewindDone)}
    return [(i, e) for i, e in enumerate(events) if isinstance(e, RewindIntent) and e.rewind_id not in closed]


def _recover_events(publish: Publish, store: ObjectStore, events: list[Event]) -> str | None:
    """``publish``: the live session's ``Agent.append`` (its view follows), or a log's writer."""
    pending = _pending(events)
    if not pending:
        return None
    lines: list[str] = []
    for position, intent in pending:
        sweep_temp(intent.targets)
        lines.append(_recover_one(publish, store, events, position, intent))
    return "; ".join(lines)


def _recover_one(
    publish: Publish,
    store: ObjectStore,
    events: list[Event],
    position: int,
    intent: RewindIntent,
) -> str:
    at_target: list[str] = []
    at_prior: list[str] = []
    foreign: list[str] = []
    for path_s, want in intent.targets.items():
        now = current(Path(path_s))
        if now == want:
            at_target.append(path_s)
        elif now == intent.prior.get(path_s, UNKNOWN) and now != UNKNOWN:
            at_prior.append(path_s)
        else:
            foreign.append(path_s)
    problems = [f"{p}: changed since the interrupted rewind began; left as it is" for p in foreign]
    done, failed = apply_all(store, {p: intent.targets[p] for p in at_prior})
    what = f"before turn {intent.turn_index}"
    if not failed:
        moved = at_target + done
        if moved:
            publish(
                Checkpoint(
                    tool_use_id=intent.rewind_id,
                    tool="rewind",
                    source="rewind",
                    files={p: intent.prior.get(p, UNKNOWN) for p in moved},
                    after={p: intent.targets[p] for p in moved},
                )
            )
        if intent.mode in ("conversation", "both") and not any(
            isinstance(e, RewindMarker) and e.target_uuid == intent.target_uuid for e in events[position + 1 :]
        ):
            turn = next((t for t in live_turns(events[:position]) if t.event.uuid == intent.target_uuid), None)
            if turn is not None:
                _mark(publish, events[:position], turn, intent.turn_index, intent.mode)
        publish(RewindDone(rewind_id=intent.rewind_id, outcome="completed", recovered=True, problems=problems))
        left = f"; {len(foreign)} file(s) changed since were left as they are" if foreign else ""
        return f"a rewind to {what} was interrupted; it has now been completed ({len(moved)} file(s)){left}"
    # something cannot reach its target: put back what had moved
    back: dict[str, str | None] = {}
    for p in at_target + done:
        was = intent.prior.get(p, UNKNOWN)
        if was == UNKNOWN:
            problems.append(f"{p}: its content before the rewind was not recorded; left at the rewind's target")
        else:
            back[p] = was
    _, failed_back = apply_all(store, back)
    problems += failed + failed_back
    publish(RewindDone(rewind_id=intent.rewind_id, outcome="rolled_back", recovered=True, problems=problems))
    return f"a rewind to {what} was interrupted and could not be completed ({failed[0]}); it was rolled back"


async def rewind_files(
    runtime: SessionHandle, user_message_id: str, *, dry_run: bool = False, force: bool = False
) -> dict[str, Any]:
    """The stream-json ``rewind_files`` control request (the Agent SDK's ``rewindFiles``): restore the
    files to just before the user message ``user_message_id``; ``dry_run`` only says what would change.
    The answer has Claude Code's shape: ``canRewind``, ``error``, ``filesChanged``. A file changed since
    keel last changed it is not overwritten: ``canRewind`` is false, ``error`` names the files and
    ``conflicts`` lists them; ``force`` (keel's own field of the request) overwrites them."""
    events = load_session(runtime.session_path).events
    turns = live_turns(events)
    index = next((i for i, t in enumerate(turns) if t.event.uuid == user_message_id), None)
    if index is None:
        return {"canRewind": False, "error": f"no user message {user_message_id!r} in this session's conversation"}
    if dry_run:
        plan = plan_rewind(_store(runtime), files_before(events, turns[index].position), last_left(events))
        answer: dict[str, Any] = {"canRewind": True, "filesChanged": sorted(plan.targets)}
        if plan.problems:  # what the rewind itself would answer: the files it could not restore
            answer["error"] = _warning(plan.problems)
        if plan.conflicts and not force:
            answer.update(canRewind=False, error=_sdk_conflict(plan.conflicts), conflicts=plan.conflicts)
        return answer
    try:
        result = await rewind(runtime, index, "code", force=force)
    except RewindConflict as e:
        return {"canRewind": False, "error": _sdk_conflict(list(e.files)), "conflicts": list(e.files)}
    except RewindError as e:
        return {"canRewind": False, "error": str(e)}
    out: dict[str, Any] = {"canRewind": True, "filesChanged": sorted(result.restored_files + result.removed_files)}
    if result.warning:
        out["error"] = result.warning
    return out


def _sdk_conflict(files: list[str]) -> str:
    return (
        f"{len(files)} file(s) changed since keel last changed them: {', '.join(files)}; nothing was changed "
        '(send "force": true to overwrite them)'
    )


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
