"""OUT.jsonl: one result line per task, appended and fsynced as each one ends.

The file is the batch's only state. A batch killed at any point leaves whole lines plus at most
one partial last line; :func:`recorded` ignores that line and :meth:`ResultWriter.tidy` cuts it
off (however long it is) before appending, so ``--resume`` never glues a new record onto half of
an old one. A line is written whole or not at all: a short write (disk full, file size limit) is
undone and reported (:class:`ResultWriteError`), never counted as recorded.

keel batch writes only into a file of its own: an OUT file holding a line that is not a result
(a user's file, the tasks file) is refused (:func:`foreign_line`), never cut or appended to. A
last line that is a whole result with no newline is kept (and ended), not cut. An OUT that is a
symbolic link stays one.

One batch at a time per OUT file: the writer holds an ``flock`` on it for the whole run; a second
``keel batch`` on the same file is refused (:class:`BatchLocked`).

One line per task: a task run again (after a Ctrl-C, ``cancelled``) gets a new line whose
``attempts`` and ``cost_usd`` count every run of it, and at the end of the run the file is
rewritten (whole, then renamed over the old one) with the last line of each task only. A batch
killed before that leaves both lines; readers take the last line of a task id (:func:`recorded`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import threading
from pathlib import Path
from typing import Literal

import msgspec

Status = Literal["success", "error", "timeout", "cancelled"]
#: statuses that --resume keeps; a cancelled task (Ctrl-C) runs again
FINAL: frozenset[str] = frozenset({"success", "error", "timeout"})
_CHUNK = 1 << 20


class Result(msgspec.Struct):
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
    attempts: int = 1  # runs of the task, across batch runs of this OUT file
    exit_code: int | None = None
    cwd: str = ""


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Result)


class BatchLocked(Exception):
    """Another keel batch is writing this OUT file."""


class ResultWriteError(Exception):
    """A result could not be recorded; nothing of it is left in the file."""


def _parse(data: bytes) -> dict[str, Result]:
    out: dict[str, Result] = {}
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            r = _decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue  # a partial last line from a killed batch, or a foreign line
        out.pop(r.id, None)
        out[r.id] = r  # in the order of the last lines
    return out


_OURS = b'{"id":'  # how every line keel batch writes begins (a torn one too)


def foreign_line(data: bytes) -> int | None:
    """The number (from 1) of the first line of ``data`` that keel batch did not write, if any: a
    line that is not a result (a partial last line that begins as a result's does is a killed
    batch's own). keel batch never writes into, or cuts, a file that holds one."""
    lines = data.split(b"\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if number == len(lines):  # no newline after it: a torn line of ours, or someone else's text
            try:
                _decoder.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return None if line.startswith(_OURS) else number
            return None
        try:
            _decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return number
    return None


def recorded(path: Path) -> dict[str, Result]:
    """The results already in the file, by task id (the last line for an id wins)."""
    try:
        return _parse(path.read_bytes())
    except FileNotFoundError:
        return {}


class ResultWriter:
    """Appends results; thread-safe (Ray's driver and local workers finish concurrently).

    Opening it takes the OUT file's lock (:class:`BatchLocked` when another batch holds it) and,
    unless ``tidy`` is False, cuts a partial last line (see :meth:`tidy`)."""

    def __init__(self, path: Path, *, tidy: bool = True) -> None:
        path = Path(os.path.realpath(path))  # a symlink stays a link: the end-of-run rewrite replaces its target
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fd = self._open_locked(path)
        self._lines = 0  # lines written by this writer
        if tidy:
            self.tidy()

    @staticmethod
    def _open_locked(path: Path) -> int:
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise BatchLocked(
                    f"{path} is being written by another keel batch: wait for it to end, or choose another -o file"
                ) from None
            except OSError:
                os.close(fd)
                raise
            try:
                same = os.fstat(fd).st_ino == path.stat().st_ino
            except FileNotFoundError:
                same = False
            if same:
                return fd
            os.close(fd)  # the file was rewritten (compacted) and replaced while we waited: lock the new one

    def tidy(self) -> None:
        """Cut a partial last line (a batch killed mid-write), however long, and stale rewrite files."""
        for stale in self.path.parent.glob(f".{self.path.name}.*.keel-tmp"):
            with contextlib.suppress(OSError):
                stale.unlink()
        size = os.fstat(self._fd).st_size
        if not size or os.pread(self._fd, 1, size - 1) == b"\n":
            return  # whole lines only
        line_start = 0  # where the last line begins: after the last newline, however far back
        end = size
        while end > 0:
            start = max(0, end - _CHUNK)
            nl = os.pread(self._fd, end - start, start).rfind(b"\n")
            if nl >= 0:
                line_start = start + nl + 1
                break
            end = start
        if self._whole_result(line_start, size):
            self._end_line()  # a whole result that lacks only its newline: recorded() counts it
            return
        os.ftruncate(self._fd, line_start)
        os.fsync(self._fd)

    def _whole_result(self, start: int, end: int) -> bool:
        """Whether bytes start..end (a last line with no newline) are a whole result (one that
        :func:`recorded` counts: it is kept, and ended with a newline, not cut)."""
        try:
            _decoder.decode(os.pread(self._fd, end - start, start))
        except (msgspec.DecodeError, msgspec.ValidationError):
            return False
        return True

    def _end_line(self) -> None:
        os.write(self._fd, b"\n")
        os.fsync(self._fd)

    def write(self, result: Result) -> None:
        """Append ``result`` as one line, fsynced; :class:`ResultWriteError` (and the file as it was) if not."""
        line = _encoder.encode(result) + b"\n"
        with self._lock:
            before = os.fstat(self._fd).st_size
            try:
                view = memoryview(line)
                while view:
                    n = os.write(self._fd, view)
                    if n <= 0:
                        raise OSError(0, "nothing could be written")
                    view = view[n:]
                os.fsync(self._fd)
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, before)
                    os.fsync(self._fd)
                raise ResultWriteError(
                    f"cannot record the result of task {result.id!r} in {self.path}: {e.strerror or e}"
                ) from None
            self._lines += 1

    def compact(self) -> None:
        """Rewrite the file with one line per task (its last), when it holds more; the lock is kept."""
        with self._lock:
            size = os.fstat(self._fd).st_size
            data = os.pread(self._fd, size, 0)
            results: dict[str, Result] = {}
            lines = 0
            for line in data.split(b"\n")[:-1]:
                if not line.strip():
                    continue
                try:
                    r = _decoder.decode(line)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    return  # a line that is not a result: the file is left as it is
                lines += 1
                results.pop(r.id, None)
                results[r.id] = r
            if lines == len(results):
                return
            tmp = self.path.parent / f".{self.path.name}.{secrets.token_hex(8)}.keel-tmp"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
                try:
                    mode = os.fstat(self._fd).st_mode & 0o7777
                    body = memoryview(b"".join(_encoder.encode(r) + b"\n" for r in results.values()))
                    while body:
                        body = body[os.write(fd, body) :]
                    os.fsync(fd)
                    os.fchmod(fd, mode)
                finally:
                    os.close(fd)
                tmp.replace(self.path)
            except OSError:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                return  # the lines stay as they were: readers take each task's last one

    def close(self) -> None:
        os.close(self._fd)
