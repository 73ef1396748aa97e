"""Reading session files: tolerant of torn lines, garbage and null bytes; never rewrites them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from agentkeel.core.events import Event, UserMessage, event_from_dict
from agentkeel.core.types import Message
from agentkeel.core.view import messages_from_events


@dataclass
class LoadReport:
    path: Path
    entries: int = 0
    skipped: list[str] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.skipped and not self.repairs

    def summary(self) -> str:
        parts = []
        if self.skipped:
            parts.append(f"{len(self.skipped)} unreadable line(s) skipped")
        if self.repairs:
            parts.append(f"{len(self.repairs)} repair(s) in the view")
        return f"session {self.path.name}: " + ", ".join(parts) + " (the file itself is unchanged)"


@dataclass
class LoadedSession:
    session_id: str
    events: list[Event]
    messages: list[Message]
    report: LoadReport
    last_uuid: str | None


def parse_lines(data: bytes, report: LoadReport) -> list[Event]:
    """Pure: bytes of a session file -> events, with every skipped line reported."""
    events: list[Event] = []
    lines = data.split(b"\n")
    last_index = len(lines) - 1
    for n, raw in enumerate(lines, 1):
        if not raw.strip(b" \t\r\x00"):
            if b"\x00" in raw:
                report.skipped.append(f"line {n}: null bytes")
            continue
        if b"\x00" in raw:
            report.skipped.append(f"line {n}: null bytes removed")
            raw = raw.replace(b"\x00", b"")
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            torn = n - 1 == last_index
            report.skipped.append(f"line {n}: {'torn last line' if torn else 'invalid JSON'}")
            continue
        if not isinstance(obj, dict):
            report.skipped.append(f"line {n}: not an object")
            continue
        event = event_from_dict(obj)
        if event is None:
            if obj.get("type") not in _IGNORED_TYPES:
                report.skipped.append(f"line {n}: unknown entry type {str(obj.get('type'))[:40]!r}")
            continue
        events.append(event)
    report.entries = len(events)
    return events


_IGNORED_TYPES: frozenset[object] = frozenset()


def load_session(path: Path) -> LoadedSession:
    report = LoadReport(path)
    events = parse_lines(path.read_bytes(), report)
    view = messages_from_events(events)
    report.repairs = view.repairs
    return LoadedSession(
        session_id=path.stem,
        events=events,
        messages=view.messages,
        report=report,
        last_uuid=events[-1].uuid if events else None,
    )


@dataclass
class SessionInfo:
    id: str
    path: Path
    modified: datetime
    first_prompt: str
    size: int


def list_sessions(directory: Path) -> list[SessionInfo]:
    """Sessions of one project, newest first."""
    if not directory.is_dir():
        return []
    out = []
    for f in directory.glob("*.jsonl"):
        try:
            st = f.stat()
        except OSError:
            continue
        out.append(SessionInfo(f.stem, f, datetime.fromtimestamp(st.st_mtime), _first_prompt(f), st.st_size))
    out.sort(key=lambda s: s.modified, reverse=True)
    return out


def _first_prompt(path: Path) -> str:
    try:
        with path.open("rb") as f:
            for _ in range(50):
                line = f.readline()
                if not line:
                    break
                try:
                    event = event_from_dict(json.loads(line))
                except (ValueError, UnicodeDecodeError):
                    continue
                if isinstance(event, UserMessage):
                    return event.message.text()[:120].replace("\n", " ")
    except OSError:
        pass
    return ""


def find_session(directory: Path, ref: str) -> Path | None:
    exact = directory / f"{ref}.jsonl"
    if exact.is_file():
        return exact
    matches = [s.path for s in list_sessions(directory) if s.id.startswith(ref)]
    return matches[0] if len(matches) == 1 else None
