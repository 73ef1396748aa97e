"""File checkpoints: what a tool call is about to change, recorded before it changes it.

Before a call of a tool that writes files (its ``Effects.writes``: Write, Edit, MultiEdit,
NotebookEdit) the content of each path it names (``Tool.paths``, resolved against the session's
working directory) is stored content-addressed under the session
(``<session>/checkpoints/objects/<sha256>``); for a tool that runs a shell (``Effects.shell``:
Bash), the project's files (tracked and untracked, not ignored) are compared by stat signature
before and after the call, and only the files whose size or mtime moved are hashed. When a call
changed something, a :class:`Checkpoint` event in the transcript names each changed path, its
state before the call (a hash, ``None``: the file did not exist, ``link:<target>``: a symbolic
link) and its state after (what keel left there: a rewind refuses to overwrite a file that no
longer holds it). The log is chronological, so the state of any file at any point of the
session is the "before" of the first checkpoint after that point that names it.

A call's changes are measured when it ends: at ``after_tool``, or, for a call that never gets
there (interrupted, cancelled), the moment the task that ran it is done; never later, so what
the user does by hand after an interrupt is never charged to keel. A Write or Edit whose
"before" cannot be stored (the store is full or unwritable) is not made: it is refused with a
line saying why, so there is never a change a rewind cannot undo without saying so.

This attaches through ``before_tool``/``after_tool``; the loop knows nothing of it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from agentkeel.core.events import Event, Notice, RequestStarted, RunFinished, SessionEnded
from agentkeel.core.extensions import Extension, ToolCall, Verdict
from agentkeel.core.tools import NO_EFFECTS, Effects, ToolOutput
from agentkeel.session.events import Checkpoint
from agentkeel.session.objects import UNKNOWN, ObjectStore, StoreError, current
from agentkeel.session.tree import MAX_TREE_BYTES, MAX_TREE_FILES, TreeState

if TYPE_CHECKING:
    from agentkeel.session.index import SessionIndex

log = logging.getLogger(__name__)


def checkpoint_dir(session_file: Path) -> Path:
    return session_file.parent / session_file.stem / "checkpoints"


class _Pending(msgspec.Struct):
    tool: str
    tree: bool  # the call runs a shell: what changed is the tree's difference
    paths: dict[str, str | None]  # path -> content before (sha / None / UNKNOWN / link:...)
    task: asyncio.Task[Any] | None = None  # the task that gated the call: done means the call is over


class CheckpointRecorder:
    """The session's checkpoint recorder: the extension's state, and a service rewind uses."""

    def __init__(self, session_file: Path, cwd: Path, emit: Callable[[Event], None]) -> None:
        self.session_file = session_file
        self.dir = checkpoint_dir(session_file)
        self.store = ObjectStore(self.dir)
        self.cwd = cwd
        self.emit = emit
        self.tree = TreeState(cwd, self.store)
        self._pending: dict[str, _Pending] = {}
        self._noticed = False
        self._priming = False
        self._tree_lock = threading.Lock()  # subagents share these handlers: Bash calls may overlap
        self._index: SessionIndex | None = None  # the session index, its connection kept between runs
        self._index_lock = threading.Lock()
        self._watched: set[asyncio.Task[Any]] = set()  # gating tasks with a done callback (see _watch)

    def extension(self) -> Extension:
        return Extension(
            "checkpoints",
            before_tool=self._before,
            after_tool=self._after,
            subscribers=[self._index_on_end, self._prime_on_first_request],
        )

    def _prime_on_first_request(self, event: Event) -> None:
        """While the first request waits for the model, a thread asks git what the first Bash
        call's checkpoint needs (``TreeState.prime``); nothing waits for it but that call."""
        if isinstance(event, RequestStarted) and not self._priming:
            self._priming = True
            threading.Thread(target=self._prime, name="keel-checkpoint-prime", daemon=True).start()

    def _prime(self) -> None:
        try:
            with self._tree_lock:
                self.tree.prime()
        except Exception:  # fail open: the first sync asks git itself
            log.debug("checkpoint look-ahead failed", exc_info=True)

    def _index_on_end(self, event: Event) -> None:
        """Keep the session index in step: a run's end updates this session's row (fail open). One
        connection serves the session's updates, closed at its end."""
        if not isinstance(event, RunFinished | SessionEnded):
            return
        from agentkeel.session.index import SessionIndex, home_of

        with self._index_lock:
            if self._index is None:
                self._index = SessionIndex(home_of(self.session_file))
            try:
                self._index.update(self.session_file, keep=isinstance(event, RunFinished))
            except Exception:
                log.debug("session index not updated", exc_info=True)

    async def _before(self, call: ToolCall) -> Verdict | None:
        self.flush(stale_only=True)  # a call interrupted before its after_tool: record what it did
        effects = _effects(call)
        task = asyncio.current_task()
        if effects.writes:
            paths = _targets(call, self.cwd)
            if paths:
                try:
                    before = await asyncio.to_thread(self._file_states, paths)
                except StoreError as e:
                    return Verdict(
                        "deny",
                        f"{call.name} not made: keel could not save the file's current content first, so "
                        f"/rewind could not undo it ({e}). Free some space there, then try again.",
                        "checkpoints",
                    )
                self._pending[call.id] = _Pending(call.name, False, before, task)
                self._watch(task)
        elif effects.shell and not self.tree.too_big:
            await asyncio.to_thread(self._sync)
            self._pending[call.id] = _Pending(call.name, True, {}, task)
            self._watch(task)
            self._notice_if_too_big()
        return None

    def _file_states(self, paths: list[Path]) -> dict[str, str | None]:
        """Each path's state, and, when it is a symbolic link, its target file's too: an Edit may
        write through the link (the target changes, the link stays)."""
        states: dict[str, str | None] = {}
        for path in paths:
            states[str(path)] = self.store.snapshot(path)
            if path.is_symlink():
                real = Path(os.path.realpath(path))
                if real != path:
                    states[str(real)] = self.store.snapshot(real)
        return states

    def _watch(self, task: asyncio.Task[Any] | None) -> None:
        """When the task that ran a call is done, record the calls it left without after_tool (an
        interrupt or a cancel ends them there): measured then, not at the next call."""
        if task is None or task in self._watched:
            return
        self._watched.add(task)
        task.add_done_callback(self._gate_done)

    def _gate_done(self, task: asyncio.Task[Any]) -> None:
        self._watched.discard(task)
        try:
            self.flush(stale_only=True)
        except Exception:  # fail open: the call's changes are not recorded (never charged to later ones)
            log.warning("checkpoint of an interrupted call failed", exc_info=True)

    async def _after(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        pending = self._pending.pop(call.id, None)
        if pending is not None:
            before, after = await asyncio.to_thread(self._changes, pending)
            if before:
                self.emit(Checkpoint(tool_use_id=call.id, tool=pending.tool, files=before, after=after))
            self._notice_store_error()
        return output

    def _sync(self) -> None:
        with self._tree_lock:
            self.tree.sync()

    def _changes(self, pending: _Pending) -> tuple[dict[str, str | None], dict[str, str | None]]:
        """The paths the call changed: their state before, and after (what keel left there)."""
        if pending.tree:
            with self._tree_lock:
                before = self.tree.diff()
                return before, dict(self.tree.after)
        changed: dict[str, str | None] = {}
        after: dict[str, str | None] = {}
        for p, was in pending.paths.items():
            now = current(Path(p))
            if now != was or was == UNKNOWN:
                changed[p], after[p] = was, now
        return changed, after

    def flush(self, *, stale_only: bool = False) -> None:
        """Record the changes of calls that never reached after_tool (interrupted mid-call). With
        ``stale_only``, only calls whose gating task is over: another agent's call (a subagent
        shares these handlers) may still be running."""
        for call_id, pending in list(self._pending.items()):
            if stale_only and (pending.task is None or not pending.task.done()):
                continue
            del self._pending[call_id]
            before, after = self._changes(pending)
            if before:
                self.emit(Checkpoint(tool_use_id=call_id, tool=pending.tool, files=before, after=after))
            self._notice_store_error()

    def _notice_store_error(self) -> None:
        error, self.tree.store_error = self.tree.store_error, None
        if error is not None:
            self.emit(
                Notice(
                    level="warning",
                    message=f"a Bash call's changes cannot all be undone by /rewind: {error} "
                    "(a rewind says which files were not recorded)",
                )
            )

    def _notice_if_too_big(self) -> None:
        if self.tree.too_big and not self._noticed:
            self._noticed = True
            self.emit(
                Notice(
                    level="warning",
                    message=f"{self.cwd} has more than {MAX_TREE_FILES:,} files or {MAX_TREE_BYTES // 2**20} MiB: "
                    "changes made by Bash are not checkpointed in this session (Write and Edit still are)",
                )
            )


def _effects(call: ToolCall) -> Effects:
    """What the call does, as its tool declares (a built-in's declaration when the call has no tool)."""
    return call.tool.effects if call.tool is not None else NO_EFFECTS  # a call with no tool never runs


def _targets(call: ToolCall, cwd: Path) -> list[Path]:
    """The paths the call writes, resolved against the session's working directory (``Tool.paths``)."""
    raw: dict[str, Any] = {k: v for k, v in call.input.items() if isinstance(v, str) and v.strip() and "\x00" not in v}
    paths = call.tool.paths(raw, call.cwd or cwd) if call.tool is not None else []  # no tool: it never runs
    return [Path(os.path.normpath(p)) for p in paths]
