"""OUT.jsonl: one result line per finished task, appended and fsynced as each one ends.

The file is the batch's only state. A batch killed at any point leaves whole lines plus at most
one partial last line; :func:`recorded` ignores that line and :class:`ResultWriter` cuts it off
before appending, so ``--resume`` never glues a new record onto half of an old one.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Literal

import msgspec

Status = Literal["success", "error", "timeout", "cancelled"]
#: statuses that --resume keeps; a cancelled task (Ctrl-C) runs again
FINAL: frozenset[str] = frozenset({"success", "error", "timeout"})


class Result(msgspec.Struct, omit_defaults=True):
    id: str
    status: Status
    result: str = ""
    error: str = ""
    session_id: str = ""
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    turns: int = 0
    duration_s: float = 0.0
    attempts: int = 1
    exit_code: int | None = None
    cwd: str = ""


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Result)


def recorded(path: Path) -> dict[str, Result]:
    """The results already in the file, by task id (the last line for an id wins)."""
    out: dict[str, Result] = {}
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return out
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            r = _decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue  # a partial last line from a killed batch, or a foreign line
        out[r.id] = r
    return out


class ResultWriter:
    """Appends results; thread-safe (Ray's driver and local workers finish concurrently)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        size = os.fstat(self._fd).st_size
        if size:
            # cut a partial last line (a batch killed mid-write) before appending
            tail = os.pread(self._fd, min(size, 1 << 20), max(0, size - (1 << 20)))
            if not tail.endswith(b"\n"):
                keep = size - len(tail) + tail.rfind(b"\n") + 1 if b"\n" in tail else 0
                os.ftruncate(self._fd, keep)

    def write(self, result: Result) -> None:
        line = _encoder.encode(result) + b"\n"
        with self._lock:
            os.write(self._fd, line)
            os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)
