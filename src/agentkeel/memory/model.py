"""Memory records, hits and entries: the shapes every store backend speaks."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec

from agentkeel.internal import jsonc

EventType = Literal["user_prompt", "assistant_response", "tool_observation", "session_summary", "lesson", "fact"]
EVENT_TYPES: tuple[str, ...] = (
    "user_prompt",
    "assistant_response",
    "tool_observation",
    "session_summary",
    "lesson",
    "fact",
)


class RecordError(ValueError):
    """A record that cannot be stored; the message names the field."""


# what a stored record is, in export and API order (Record and Entry share it)
_STORED_KEYS = ("id", "type", "project", "session", "timestamp", "text", "metadata")


class Record(msgspec.Struct, frozen=True):
    """One memory event, as it goes into the log. ``id`` is kept exactly as given."""

    id: str
    type: str
    text: str
    project: str = ""
    session: str = ""
    timestamp: str = ""  # ISO 8601
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def ts(self) -> float:
        return parse_time(self.timestamp)

    @classmethod
    def from_dict(cls, data: Any) -> Record:
        if isinstance(data, Record):
            return data
        if not isinstance(data, dict):
            raise RecordError(f"a memory record must be an object, not {type(data).__name__}")
        kind = str(data.get("type") or "fact")
        if kind not in EVENT_TYPES:
            raise RecordError(f"unknown record type {kind!r}: use one of {', '.join(EVENT_TYPES)}")
        text = data.get("text")
        if not isinstance(text, str):
            raise RecordError("a memory record needs a 'text' string")
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise RecordError("'metadata' must be an object")
        timestamp = str(data.get("timestamp") or "") or now_iso()
        parse_time(timestamp)  # validates
        return cls(
            id=str(data.get("id") or new_record_id()),
            type=kind,
            text=text,
            project=str(data.get("project") or ""),
            session=str(data.get("session") or ""),
            timestamp=timestamp,
            metadata=metadata,
        )

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in _STORED_KEYS}


class Hit(msgspec.Struct, frozen=True):
    """Layer 1 of progressive disclosure: an id and a one-line summary (tens of tokens)."""

    id: str
    score: float
    type: str
    timestamp: str
    session: str
    project: str
    summary: str

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.line())

    def line(self) -> str:
        return f"[{self.id}] {self.timestamp[:10]} {self.type}: {self.summary}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "score": round(self.score, 6),
            "type": self.type,
            "timestamp": self.timestamp,
            "session": self.session,
            "project": self.project,
            "summary": self.summary,
        }


class Entry(msgspec.Struct, frozen=True):
    """Layer 3: the full stored entry (already masked)."""

    id: str
    type: str
    project: str
    session: str
    timestamp: str
    text: str
    metadata: dict[str, Any]
    superseded_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {key: getattr(self, key) for key in _STORED_KEYS}
        if self.superseded_by:
            data["superseded_by"] = self.superseded_by
        return data

    def summary(self, width: int = 140) -> str:
        return one_line(self.text, width)


def new_record_id() -> str:
    return "m_" + uuid.uuid4().hex[:16]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def parse_time(value: str) -> float:
    """ISO 8601 (``Z`` allowed; naive means UTC) -> epoch seconds."""
    if not value:
        return 0.0
    text = value.strip().replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise RecordError(f"timestamp {value!r} is not ISO 8601 (e.g. 2024-05-08T13:56:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def date_words(ts: float) -> str:
    """The words a person uses for a moment (``8 May 2023 Monday``): indexed so "in May 2023" matches."""
    if ts <= 0:
        return ""
    moment = datetime.fromtimestamp(ts, UTC)
    return f"{moment.day} {moment.strftime('%B')} {moment.year} {moment.strftime('%A')}"


def estimate_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def one_line(text: str, width: int = 140) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def dumps(value: Any) -> str:
    return jsonc.dumps(value, default=str)
