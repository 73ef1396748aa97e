"""File checkpoints: what a tool call is about to change, recorded before it changes it.

Before a file-changing tool call (Write, Edit, MultiEdit, NotebookEdit) the file's content is
stored content-addressed under the session (``<session>/checkpoints/objects/<sha256>``); for
Bash, the project's files (tracked and untracked, not ignored) are compared by stat signature
before and after the call, and only the files whose size or mtime moved are hashed. When a call
changed something, a :class:`Checkpoint` event in the transcript names each changed path and
its content before the call (a hash, or ``None``: the file did not exist). The log is
chronological, so the state of any file at any point of the session is the "before" of the
first checkpoint after that point that names it.

This attaches through ``before_tool``/``after_tool``; the loop knows nothing of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import stat
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from agentkeel.core.events import Event, Notice, RunFinished, SessionEnded, register_event_type
from agentkeel.core.extensions import Extension, ToolCall, Verdict
from agentkeel.core.tools import ToolOutput
from agentkeel.core.view import Compaction

log = logging.getLogger(__name__)

FILE_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
TREE_TOOLS = frozenset({"Bash"})
MAX_OBJECT = 32 * 1024 * 1024  # a file larger than this is not snapshotted (its checkpoint says so)
MAX_TREE_FILES = 20_000  # a bigger tree is not diffed around Bash calls (a notice says so, once)
UNKNOWN = ""  # a checkpoint's "before" that was not recorded (too large, unreadable)
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".tox"})


class Checkpoint(Event, frozen=True, kw_only=True, tag="checkpoint"):
    """Paths a tool call (or a rewind, ``source="rewind"``) changed, with their content before it:
    the sha256 of a stored object, ``None`` when the file did not exist, ``""`` when not recorded."""

    tool_use_id: str = ""
    tool: str = ""
    source: str = "tool"  # tool | rewind
    files: dict[str, str | None] = msgspec.field(default_factory=dict)


class RewindMarker(Compaction, frozen=True, kw_only=True, tag="rewind"):
    """The conversation was rewound to just before user turn ``turn_index`` (the prompt event
    ``target_uuid``): the view starts over from ``messages``, the conversation before that turn."""

    turn_index: int = 0
    target_uuid: str = ""
    mode: str = "both"


class SessionForked(Event, frozen=True, kw_only=True, tag="fork"):
    """This session was forked from ``parent_id`` before its user turn ``at_turn`` (None: at its end)."""

    parent_id: str
    parent_path: str = ""
    at_turn: int | None = None


for _cls in (Checkpoint, RewindMarker, SessionForked):
    register_event_type(_cls)


class CheckpointError(Exception):
    """A checkpoint object is missing or does not hold what its name says; the message is one line."""


def checkpoint_dir(session_file: Path) -> Path:
    return session_file.parent / session_file.stem / "checkpoints"


class ObjectStore:
    """Content-addressed blobs: ``objects/<sha256>``, written once (temp file + rename), never changed."""

    def __init__(self, root: Path) -> None:
        self.root = root / "objects"

    def path(self, sha: str) -> Path:
        return self.root / sha

    def put(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        target = self.root / sha
        if target.exists():
            return sha
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".obj-", dir=self.root)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            Path(tmp).replace(target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return sha

    def snapshot(self, path: Path) -> str | None:
        """Store ``path``'s content: its sha, None when it does not exist, UNKNOWN when it cannot be stored."""
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        except OSError:
            return UNKNOWN
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_OBJECT:
            return UNKNOWN
        try:
            return self.put(path.read_bytes())
        except OSError:
            return UNKNOWN

    def get(self, sha: str, for_path: str = "") -> bytes:
        where = f" for {for_path}" if for_path else ""
        try:
            data = self.path(sha).read_bytes()
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint object {sha[:12]}{where} is missing ({self.root})") from None
        except OSError as e:
            raise CheckpointError(f"checkpoint object {sha[:12]}{where} is unreadable: {e.strerror or e}") from None
        if hashlib.sha256(data).hexdigest() != sha:
            raise CheckpointError(f"checkpoint object {sha[:12]}{where} is corrupt (its content does not match)")
        return data


def file_sha(path: Path) -> str | None:
    """The sha256 of a file's content now (None: absent; UNKNOWN: not a readable regular file)."""
    try:
        with path.open("rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return UNKNOWN
            h = hashlib.sha256()
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
            return h.hexdigest()
    except FileNotFoundError:
        return None
    except OSError:
        return UNKNOWN


Signature = tuple[int, int]  # (mtime_ns, size)


@dataclass
class TreeState:
    """The project's files as last seen: stat signature and stored content, for diffing around Bash."""

    root: Path
    store: ObjectStore
    files: dict[str, tuple[Signature, str | None]] = field(default_factory=dict)  # rel path -> (sig, sha)
    too_big: bool = False
    synced: bool = False

    def listing(self) -> list[str] | None:
        """Tracked and untracked, non-ignored files (git), else a walk; None when over MAX_TREE_FILES."""
        names = _git_files(self.root)
        if names is None:
            names = _walk_files(self.root)
        if names is None or len(names) > MAX_TREE_FILES:
            return None
        return names

    def _scan(self) -> dict[str, Signature] | None:
        names = self.listing()
        if names is None:
            self.too_big = True
            return None
        out: dict[str, Signature] = {}
        for rel in names:
            try:
                st = os.lstat(self.root / rel)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                out[rel] = (st.st_mtime_ns, st.st_size)
        return out

    def sync(self) -> None:
        """Before a Bash call: bring the stored picture up to date (hash and store only what moved)."""
        now = self._scan()
        if now is None:
            return
        files = self.files
        for rel in [r for r in files if r not in now]:
            del files[rel]
        for rel, sig in now.items():
            known = files.get(rel)
            if known is None or known[0] != sig:
                files[rel] = (sig, self.store.snapshot(self.root / rel))
        self.synced = True

    def diff(self) -> dict[str, str | None]:
        """After a Bash call: the paths that changed since :meth:`sync`, with their content before."""
        if not self.synced:
            return {}
        now = self._scan()
        if now is None:
            return {}
        changed: dict[str, str | None] = {}
        files = self.files
        for rel in [r for r in files if r not in now]:
            changed[str(self.root / rel)] = files.pop(rel)[1]
        for rel, sig in now.items():
            known = files.get(rel)
            if known is not None and known[0] == sig:
                continue
            sha = self.store.snapshot(self.root / rel)
            if known is not None and known[1] == sha and sha != UNKNOWN:
                files[rel] = (sig, sha)  # touched, not changed
                continue
            changed[str(self.root / rel)] = known[1] if known is not None else None
            files[rel] = (sig, sha)
        return changed


def _git_files(root: Path) -> list[str] | None:
    if not (root / ".git").exists():
        return None
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return [n for n in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if n]


def _walk_files(root: Path) -> list[str] | None:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        rel = os.path.relpath(dirpath, root)
        out.extend(f if rel == "." else f"{rel}/{f}" for f in filenames)
        if len(out) > MAX_TREE_FILES:
            return None
    return out


@dataclass
class _Pending:
    tool: str
    paths: dict[str, str | None]  # path -> content before (sha / None / UNKNOWN)


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

    def extension(self) -> Extension:
        return Extension(
            "checkpoints", before_tool=self._before, after_tool=self._after, subscribers=[self._index_on_end]
        )

    def _index_on_end(self, event: Event) -> None:
        """Keep the session index in step: a run's end updates this session's row (fail open)."""
        if not isinstance(event, RunFinished | SessionEnded):
            return
        from agentkeel.session.index import SessionIndex, home_of

        try:
            SessionIndex(home_of(self.session_file)).update(self.session_file)
        except Exception:
            log.debug("session index not updated", exc_info=True)

    async def _before(self, call: ToolCall) -> Verdict | None:
        self.flush()  # a call interrupted before its after_tool: record what it did
        key = FILE_TOOLS.get(call.name)
        if key is not None:
            path = _target(call, key)
            if path is not None:
                before = await asyncio.to_thread(self.store.snapshot, path)
                self._pending[call.id] = _Pending(call.name, {str(path): before})
        elif call.name in TREE_TOOLS and not self.tree.too_big:
            await asyncio.to_thread(self.tree.sync)
            self._pending[call.id] = _Pending(call.name, {})
            self._notice_if_too_big()
        return None

    async def _after(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        pending = self._pending.pop(call.id, None)
        if pending is not None:
            changed = await asyncio.to_thread(self._changes, pending)
            if changed:
                self.emit(Checkpoint(tool_use_id=call.id, tool=pending.tool, files=changed))
        return output

    def _changes(self, pending: _Pending) -> dict[str, str | None]:
        if pending.tool in TREE_TOOLS:
            return self.tree.diff()
        return {p: before for p, before in pending.paths.items() if file_sha(Path(p)) != before or before == UNKNOWN}

    def flush(self) -> None:
        """Record the changes of calls that never reached after_tool (interrupted mid-call)."""
        for call_id in list(self._pending):
            pending = self._pending.pop(call_id)
            changed = self._changes(pending)
            if changed:
                self.emit(Checkpoint(tool_use_id=call_id, tool=pending.tool, files=changed))

    def _notice_if_too_big(self) -> None:
        if self.tree.too_big and not self._noticed:
            self._noticed = True
            self.emit(
                Notice(
                    level="warning",
                    message=f"{self.cwd} has more than {MAX_TREE_FILES:,} files: changes made by Bash are not "
                    "checkpointed in this session (Write and Edit still are)",
                )
            )


def _target(call: ToolCall, key: str) -> Path | None:
    raw: Any = call.input.get(key)
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        return None
    p = Path(raw).expanduser()
    if not p.is_absolute():
        p = (call.cwd or Path.cwd()) / p
    return Path(os.path.normpath(p))


def checkpoint_extension(session_file: Path, cwd: Path, emit: Callable[[Event], None]) -> tuple[Extension, Any]:
    """The extension and the recorder (put it in the session's services as ``CheckpointRecorder``)."""
    recorder = CheckpointRecorder(session_file, cwd, emit)
    return recorder.extension(), recorder
