"""Reading session files: tolerant of torn lines, garbage and null bytes; never rewrites them."""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

import msgspec

from agentkeel.core.events import Event, UserMessage, event_from_dict
from agentkeel.core.types import Message, TextBlock
from agentkeel.core.view import messages_from_events


class LoadReport(msgspec.Struct):
    path: Path
    entries: int = 0
    skipped: list[str] = msgspec.field(default_factory=list)
    repairs: list[str] = msgspec.field(default_factory=list)

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


class LoadedSession(msgspec.Struct):
    session_id: str
    events: list[Event]
    messages: list[Message]
    report: LoadReport
    last_uuid: str | None


MAX_LINE = 64 * 1024 * 1024  # one entry larger than this is damage, not a turn: skipped, never held
_CHUNK = 1024 * 1024

# a raw line, or why it was dropped unread (too long, or a run of NUL bytes such as a sparse hole)
RawLine = bytes | str


def parse_lines(data: bytes, report: LoadReport) -> list[Event]:
    """Pure: bytes of a session file -> events, with every skipped line reported."""
    return parse_raw_lines(data.split(b"\n"), report)


def parse_raw_lines(lines: Iterable[RawLine], report: LoadReport) -> list[Event]:
    """Raw lines (the last may be torn) -> events, with every skipped line reported."""
    events: list[Event] = []
    held: tuple[int, bytes] | None = None  # the previous line: only the last one can be torn
    for n, raw in enumerate(lines, 1):
        if held is not None:
            _entry(*held, report, events, last=False)
            held = None
        if isinstance(raw, str):
            report.skipped.append(f"line {n}: {raw}")
            continue
        held = (n, raw)
    if held is not None:
        _entry(*held, report, events, last=True)
    report.entries = len(events)
    return events


def _entry(n: int, raw: bytes, report: LoadReport, events: list[Event], *, last: bool) -> None:
    if not raw.strip(b" \t\r\x00"):
        if b"\x00" in raw:
            report.skipped.append(f"line {n}: null bytes")
        return
    if b"\x00" in raw:
        report.skipped.append(f"line {n}: null bytes removed")
        raw = raw.replace(b"\x00", b"")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except RecursionError:
        report.skipped.append(f"line {n}: JSON nested too deeply")
        return
    except ValueError:  # invalid UTF-8, invalid JSON, an integer too long to convert
        report.skipped.append(f"line {n}: {'torn last line' if last else 'invalid JSON'}")
        return
    if not isinstance(obj, dict):
        report.skipped.append(f"line {n}: not an object")
        return
    event = event_from_dict(obj)
    if event is None:
        report.skipped.append(f"line {n}: not a valid {str(obj.get('type'))[:40]!r} entry")
        return
    events.append(event)


class NotASessionFile(OSError):
    """The path is not a regular file (a FIFO, a device, a directory): never opened for reading."""


def read_lines(fd: int, max_line: int = MAX_LINE) -> Iterator[RawLine]:
    """The lines of a session file, streamed with bounded memory: a line over ``max_line`` is
    dropped as it is read, and holes of a sparse file are skipped, not read (they are NUL bytes)."""
    size = os.fstat(fd).st_size
    pos, line, dropped = 0, bytearray(), ""
    while pos < size:
        try:
            data_at = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError:  # ENXIO: only a hole remains (or the filesystem cannot say: read on)
            data_at = size if _only_hole(fd, pos) else pos
        if data_at > pos:  # a hole: that many NUL bytes, with no line break in them
            dropped = dropped or "null bytes (a hole in a sparse file)"
            line.clear()
            pos = data_at
            continue
        os.lseek(fd, pos, os.SEEK_SET)
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            break
        pos += len(chunk)
        parts = chunk.split(b"\n")
        for i, part in enumerate(parts):
            if not dropped:
                line += part
                if len(line) > max_line:
                    dropped, line = f"longer than {max_line // (1024 * 1024)} MiB", bytearray()
            if i < len(parts) - 1:  # a line break ends the line
                yield dropped or bytes(line)
                line, dropped = bytearray(), ""
    yield dropped or bytes(line)


def _only_hole(fd: int, pos: int) -> bool:
    try:
        os.lseek(fd, pos, os.SEEK_HOLE)
    except OSError:
        return False  # no SEEK_HOLE support either: read it
    return True


def load_session(path: Path) -> LoadedSession:
    report = LoadReport(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO named like a session must not block
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotASessionFile(errno.EINVAL, "not a regular file", str(path))
        events = parse_raw_lines(read_lines(fd), report)
    finally:
        os.close(fd)
    view = messages_from_events(events)
    report.repairs = view.repairs
    return LoadedSession(
        session_id=path.stem,
        events=events,
        messages=view.messages,
        report=report,
        last_uuid=events[-1].uuid if events else None,
    )


class SessionInfo(msgspec.Struct):
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
        if not stat.S_ISREG(st.st_mode):
            continue  # a FIFO or device named like a session: opening it could block forever
        out.append(SessionInfo(f.stem, f, datetime.fromtimestamp(st.st_mtime), _first_prompt(f), st.st_size))
    out.sort(key=lambda s: s.modified, reverse=True)
    return out


def _first_prompt(path: Path) -> str:
    """The first prompt as the user typed it (context blocks that keel added, such as the
    memory context, are not part of it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return ""
        with os.fdopen(fd, "rb") as f:
            for _ in range(50):
                line = f.readline()
                if not line:
                    break
                try:
                    data = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if not isinstance(data, dict) or data.get("type") != "user":
                    continue
                event = event_from_dict(data)
                if isinstance(event, UserMessage):
                    first = next((b for b in event.message.content if isinstance(b, TextBlock)), None)
                    return (first.text if first else "")[:120].replace("\n", " ")
    except OSError:
        pass
    return ""


class AmbiguousSession(LookupError):
    def __init__(self, ref: str, ids: list[str]) -> None:
        shown = ", ".join(ids[:5]) + (" ..." if len(ids) > 5 else "")
        super().__init__(f"'{ref}' matches {len(ids)} sessions ({shown}): give more of the id")
        self.ids = ids


def find_session(directory: Path, ref: str) -> Path | None:
    """The session ``ref`` names: its full id or a unique prefix. None when nothing matches;
    :class:`AmbiguousSession` when the prefix matches several."""
    if not ref or "/" in ref or ref in (".", ".."):
        return None
    exact = directory / f"{ref}.jsonl"
    if exact.is_file():
        return exact
    matches = [s for s in list_sessions(directory) if s.id.startswith(ref)]
    if len(matches) > 1:
        raise AmbiguousSession(ref, [s.id for s in matches])
    return matches[0].path if matches else None
