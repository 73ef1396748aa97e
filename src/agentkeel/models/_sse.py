"""Server-sent events, sans-IO: bytes in (in whatever pieces the network delivers), events out.

Follows the WHATWG event-stream rules: lines end in CRLF, LF or CR; ``field: value``; a blank
line dispatches; comments (``:``) and ``id``/``retry`` are ignored; an event left without its
blank line when the body ends is dropped, as browsers and the official SDKs do.
"""

from __future__ import annotations

import msgspec


class SSEEvent(msgspec.Struct, frozen=True):
    event: str | None
    data: str


class SSEDecoder:
    def __init__(self) -> None:
        self._pending = b""
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        buffer, held = self._pending + chunk, b""
        if b"\r" in buffer:
            if buffer.endswith(b"\r"):  # may be the first half of a CRLF split across two pieces
                buffer, held = buffer[:-1], b"\r"
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = buffer.rfind(b"\n")
        if end < 0:
            self._pending = buffer + held
            return []
        self._pending = buffer[end + 1 :] + held
        out: list[SSEEvent] = []
        for raw in buffer[:end].split(b"\n"):
            event = self._line(raw.decode("utf-8", "replace"))
            if event is not None:
                out.append(event)
        return out

    def close(self) -> list[SSEEvent]:
        """The body ended: a CR held back as a possible CRLF was a line end after all."""
        rest, self._pending = self._pending, b""
        return self.feed(rest[:-1] + b"\n") if rest.endswith(b"\r") else []

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            if not self._data:
                self._event = None
                return None
            event = SSEEvent(self._event, "\n".join(self._data))
            self._event, self._data = None, []
            return event
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value or None
        return None
