"""A mirror of a session in Claude Code's transcript layout, for the Agent SDKs' session readers.

The SDKs' ``get_session_messages``, ``list_sessions``, ``list_subagents`` and
``get_subagent_messages`` read Claude Code's files, not keel's; a ``SessionStore`` gets
``transcript_mirror`` frames on stdout. This module writes both from the session's events:

- **where**: ``<config>/projects/<cwd sanitised>/<session id>.jsonl``, the subagents'
  ``<session id>/subagents/agent-<id>.jsonl`` with ``agent-<id>.meta.json`` beside each, where
  ``<config>`` is ``$CLAUDE_CONFIG_DIR`` or ``~/.claude`` and the folder name is the SDK's
  ``_sanitize_path`` (every character not in [a-zA-Z0-9] becomes ``-``; over 200 characters, cut
  and suffixed with the SDK's hash). Files 0600 in folders 0700, appended, never rewritten.
- **what**: one entry per message, as Claude Code 2.1.328 writes them (compared field by field
  with /work/shared/reference/claude-code-2.1.328-session.jsonl): ``type`` user | assistant,
  ``message`` (a prompt of plain text is a string; the assistant's with id, model, stop_reason,
  usage), ``uuid`` (the same as the stream-json message's), ``parentUuid`` (the previous entry),
  ``isSidechain`` (true in a subagent's, with ``agentId``), ``sessionId``, ``cwd``, ``timestamp``,
  ``userType`` "external", ``entrypoint`` "sdk-cli", ``version`` (keel's). A subagent's meta is
  ``{agentType, description, toolUseId, spawnDepth}``; a store receives it as an
  ``{"type": "agent_metadata", ...}`` entry. Claude Code's other entries (attachments,
  ``last-prompt``, request records, cost state) and its per-block split of an assistant message
  are not reproduced: the readers do not need them.
- **from what**: the events as the session's log gets them, after the bus's transforms, so the
  redaction of keel's log applies here too. keel's own log stays the source of truth: keel never
  reads the mirror (resume, fork and rewind use keel's log) and a failure to write it is one
  warning, never the session's end.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from agentkeel._version import __version__
from agentkeel.core.events import AssistantMessage, Event, ToolResults, UserMessage
from agentkeel.core.types import to_data
from agentkeel.session.store import encode_project

log = logging.getLogger(__name__)

MAX_SANITIZED_LENGTH = 200

Frames = Callable[[dict[str, Any]], None]
INJECTED = ("<memory-context", "<system-reminder")  # context keel or a hook added to a prompt


def projects_dir(env: Mapping[str, str] | None = None) -> Path:
    """Claude Code's projects folder: ``$CLAUDE_CONFIG_DIR/projects`` or ``~/.claude/projects``."""
    env = os.environ if env is None else env
    config = env.get("CLAUDE_CONFIG_DIR")
    if config:
        return Path(config) / "projects"
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".claude" / "projects"


def _simple_hash(text: str) -> str:
    h = 0
    for ch in text:
        h = ((h << 5) - h + ord(ch)) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    n, digits, out = abs(h), "0123456789abcdefghijklmnopqrstuvwxyz", []
    while n > 0:
        out.append(digits[n % 36])
        n //= 36
    return "".join(reversed(out)) or "0"


def sanitize(path: str) -> str:
    """The folder name Claude Code (and the SDK's readers) give a project path: keel's own
    (store.encode_project), cut and hashed as the SDK does over 200 characters."""
    name = encode_project(Path(path))
    if len(name) <= MAX_SANITIZED_LENGTH:
        return name
    return f"{name[:MAX_SANITIZED_LENGTH]}-{_simple_hash(path)}"


class _File:
    """One mirrored transcript: its path and the uuid its next entry hangs from."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last: str | None = None


class TranscriptMirror:
    """Writes a session's messages in Claude Code's layout (``files``) and/or as
    ``transcript_mirror`` frames (``frames``: the SDK's ``--session-mirror``)."""

    def __init__(
        self,
        root: Path,
        cwd: Path,
        session_id: str,
        *,
        files: bool = True,
        frames: Frames | None = None,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.cwd = str(cwd)
        self.session_id = session_id
        self.folder = root / sanitize(self.cwd)
        self.files = files
        self.frames = frames
        self.notice = notice
        self.failed = False
        self.main = _File(self.folder / f"{session_id}.jsonl")
        self.subagents: dict[str, _File] = {}
        self._pending: list[dict[str, Any]] = []  # the attachment entry of the prompt just mirrored

    # --- the session's own messages -------------------------------------------------------

    def seed(self, events: Iterable[Event]) -> None:
        """The history a resumed or forked session starts from, when its mirror has none yet."""
        if self.files and self.main.path.exists():
            self.main.last = _last_uuid(self.main.path)
            return
        self._write(self.main, self._entries(self.main, events, sidechain=None))

    def on_event(self, event: Event) -> None:
        self._write(self.main, self._entries(self.main, [event], sidechain=None))

    def _entries(self, file: _File, events: Iterable[Event], *, sidechain: str | None) -> list[dict[str, Any]]:
        """The entries of ``events``: one per message, a prompt's injected context one more after it."""
        out: list[dict[str, Any]] = []
        for event in events:
            entry = self._entry(file, event, sidechain=sidechain)
            if entry is not None:
                out.append(entry)
            out += self._pending
            self._pending = []
        return out

    # --- subagents (the spawner's listener: kind, activity, item) --------------------------

    def on_subagent(self, kind: str, activity: Any, item: Any) -> None:
        agent_id = str(activity.agent_id)
        if kind == "started":
            sub = _File(self.folder / self.session_id / "subagents" / f"agent-{agent_id}.jsonl")
            self.subagents[agent_id] = sub
            meta = {
                "agentType": activity.agent_type,
                "description": activity.description,
                "toolUseId": activity.tool_use_id,
                "spawnDepth": 1,
            }
            if self.files:
                self._guard(lambda: _write_private(sub.path.with_name(f"agent-{agent_id}.meta.json"), json.dumps(meta)))
            if self.frames is not None:
                self._frame(sub.path, [{"type": "agent_metadata", **meta}])
        elif kind == "event" and agent_id in self.subagents and isinstance(item, Event):
            sub = self.subagents[agent_id]
            self._write(sub, self._entries(sub, [item], sidechain=agent_id))
        elif kind == "finished":
            self.subagents.pop(agent_id, None)

    # --- entries ------------------------------------------------------------------------

    def _entry(self, file: _File, event: Event, *, sidechain: str | None) -> dict[str, Any] | None:
        fields: dict[str, Any]
        if isinstance(event, UserMessage):
            message = to_data(event.message)
            blocks = [b for b in message.get("content", []) if isinstance(b, dict)]
            injected = [b for b in blocks if b.get("type") == "text" and str(b.get("text", "")).startswith(INJECTED)]
            typed = [b for b in blocks if b not in injected]
            if len(typed) == 1 and typed[0].get("type") == "text":
                message["content"] = typed[0].get("text", "")
            elif injected:
                message["content"] = typed
            entry = self._finish(file, event, sidechain, {"type": "user", "message": message})
            if injected:  # as Claude Code keeps a hook's added context: an attachment after the prompt
                self._pending.append(self._attachment(file, event, sidechain, [str(b.get("text")) for b in injected]))
            return entry
        if isinstance(event, ToolResults):
            fields = {"type": "user", "message": to_data(event.message)}
            if file.last is not None:
                fields["sourceToolAssistantUUID"] = file.last
        elif isinstance(event, AssistantMessage):
            message = to_data(event.message)
            message.setdefault("id", "msg_" + event.uuid.replace("-", "")[:24])
            message.update(
                {
                    "type": "message",
                    "model": event.model,
                    "stop_reason": event.stop_reason,
                    "stop_sequence": None,
                    "usage": event.usage.to_wire(),
                }
            )
            fields = {"type": "assistant", "message": message}
        else:
            return None
        return self._finish(file, event, sidechain, fields)

    def _attachment(self, file: _File, event: Event, sidechain: str | None, texts: list[str]) -> dict[str, Any]:
        uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"keel-context:{event.uuid}"))
        extra = {"type": "attachment", "attachment": {"type": "hook_additional_context", "content": texts}}
        return self._finish(file, event, sidechain, extra, uid=uid)

    def _finish(
        self, file: _File, event: Event, sidechain: str | None, extra: dict[str, Any], uid: str | None = None
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {"parentUuid": file.last, "isSidechain": sidechain is not None}
        if sidechain is not None:
            entry["agentId"] = sidechain
        entry.update(extra)
        entry.update(
            {
                "uuid": uid or event.uuid,
                "timestamp": event.timestamp,
                "userType": "external",
                "entrypoint": "sdk-cli",
                "cwd": self.cwd,
                "sessionId": self.session_id,
                "version": __version__,
            }
        )
        file.last = uid or event.uuid
        return entry

    def _write(self, file: _File, entries: list[dict[str, Any]]) -> None:
        if not entries:
            return
        if self.files:
            text = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries)
            self._guard(lambda: _append_private(file.path, text))
        if self.frames is not None:
            self._frame(file.path, entries)

    def _frame(self, path: Path, entries: list[dict[str, Any]]) -> None:
        assert self.frames is not None
        self.frames({"type": "transcript_mirror", "filePath": str(path), "entries": entries})

    def _guard(self, write: Callable[[], None]) -> None:
        """A mirror that cannot be written is told once and given up: keel's log is the record."""
        if self.failed:
            return
        try:
            write()
        except OSError as e:
            self.failed = True
            why = (
                f"the Claude Code-format session mirror in {self.folder} cannot be written "
                f"({e.strerror or e}); keel's own session log is unaffected"
            )
            log.warning(why)
            if self.notice is not None:
                self.notice(why)


def _append_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


def _last_uuid(path: Path) -> str | None:
    last = None
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict) and isinstance(entry.get("uuid"), str) and not entry.get("isSidechain"):
                    last = entry["uuid"]
    except OSError:
        return None
    return last
