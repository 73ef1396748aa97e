"""Reading files without surprises: regular files only, streamed, memory bounded whatever the file.

A device (``/dev/zero``), a FIFO, a socket may never end or never send anything, so the
file tools refuse anything but a regular file, checked before ``open`` (opening some devices
has effects) and again on the open descriptor (the path may have changed in between); the
open itself never blocks (``O_NONBLOCK``: a FIFO without a writer would wait forever).

Text is read in chunks through ``LineWindow`` (sans-IO): lines before ``offset`` are
counted, never kept; a kept line keeps its first ``LINE_KEEP`` bytes, and the window at
most ``WINDOW_BUDGET`` characters whatever ``limit`` asks; after the first kept line at
most ``SCAN_AFTER_START`` more bytes are read (to finish the window and count the lines).
So memory stays at a chunk plus the window, for a 4 GB file or a 1 GB line, and the reader
yields to the event loop between chunks, so an interrupt or a timeout stops it.
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from pathlib import Path

from agentkeel.core.tools import ToolError
from agentkeel.tools.textfile import ERRORS, UTF8_SEQ, decode_line, sniff_bom

CHUNK = 1 << 20
MAX_LINE_CHARS = 2000
LINE_KEEP = MAX_LINE_CHARS * 4 + 4  # bytes kept of a long line: always more than MAX_LINE_CHARS characters
SCAN_AFTER_START = 64 << 20  # bytes read past the start of the window, to complete it and count lines
WINDOW_BUDGET = 8 << 20  # characters (plus 64 a line) kept in one window: 2000 full lines fit, twice over
BINARY_SNIFF = 8192  # a NUL in the first bytes: a binary file
UTF16_CAP = 50 << 20  # a UTF-16 file is decoded whole: at most this many bytes
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_regular(path: Path, st: os.stat_result) -> None:
    if stat.S_ISREG(st.st_mode):
        return
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path} is a directory, not a file: use LS to list it")
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
    raise ToolError(
        f"{path} is {kind}, not a regular file: keel's file tools read regular files only (a device or a pipe "
        f"may never end, or never send anything). To sample it, use Bash with a bounded command, "
        f"e.g. `timeout 5 head -c 4096 {path}`."
    )


def _os_error(path: Path, err: OSError) -> ToolError:
    if isinstance(err, FileNotFoundError):
        return ToolError(f"File does not exist: {path}")
    if isinstance(err, PermissionError):
        return ToolError(f"Permission denied: {path}")
    return ToolError(f"Cannot read {path}: {err.strerror or err}")


def open_regular(path: Path) -> tuple[int, os.stat_result]:
    """A descriptor open for reading on a regular file, and its stat; a ToolError for anything else."""
    try:
        check_regular(path, path.stat())
        fd = os.open(path, _FLAGS)
    except OSError as e:
        raise _os_error(path, e) from None
    try:
        st = os.fstat(fd)
        check_regular(path, st)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_capped(path: Path, cap: int, what: str) -> bytes:
    """The whole of a regular file of at most ``cap`` bytes (``what`` says why it is loaded whole)."""
    fd, st = open_regular(path)
    try:
        parts: list[bytes] = []
        size = 0
        while size <= cap and (data := os.read(fd, min(CHUNK, cap + 1 - size))):
            parts.append(data)
            size += len(data)
    except OSError as e:
        raise _os_error(path, e) from None
    finally:
        os.close(fd)
    if size > cap:
        actual = f" ({human_size(st.st_size)})" if st.st_size > cap else ""
        raise ToolError(f"{path} is larger than {human_size(cap)}{actual}: {what}")
    return b"".join(parts)


def _block(data: bytes) -> str | None:
    """Whole lines decoded at once as decode_line would one by one, or None when lines may differ (mixed)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None if UTF8_SEQ.search(data) else data.decode("cp1252", ERRORS)


def human_size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


class LineWindow:
    """Lines ``start`` .. ``start + limit - 1`` of a byte stream fed in chunks; counts the others."""

    def __init__(self, start: int, limit: int) -> None:
        self.start = start
        self.limit = limit
        self.lines: list[str] = []
        self.newlines = 0  # "\n" seen so far: the next byte belongs to line newlines + 1
        self.size = 0
        self.scanned = 0  # bytes fed since the start of the window
        self.eof = False
        self._cur = bytearray()
        self._last = b""
        self._room = WINDOW_BUDGET

    @property
    def full(self) -> bool:
        """``limit`` lines kept, or as many as the budget holds (a huge limit on short lines)."""
        return len(self.lines) >= self.limit or self._room <= 0

    @property
    def total(self) -> int | None:
        """Lines in the file, once all of it was read."""
        if not self.eof:
            return None
        return self.newlines + (1 if self.size and self._last != b"\n" else 0)

    def feed(self, data: bytes) -> bool:
        """Take the next chunk; True when no more is needed."""
        if not data:
            return False
        self.size += len(data)
        self._last = data[-1:]
        pos, n = 0, len(data)
        need = self.start - 1 - self.newlines
        if need > 0:
            count = data.count(b"\n")
            if count < need:
                self.newlines += count
                return False
            for _ in range(need):
                pos = data.index(b"\n", pos) + 1
            self.newlines += need
        self.scanned += n - pos
        while pos < n and not self.full:
            if not self._cur:
                pos = self._whole_lines(data, pos)  # the lines this chunk holds whole, in bulk
                if pos >= n or self.full:
                    break
            nl = data.find(b"\n", pos)
            end = n if nl < 0 else nl
            room = LINE_KEEP - len(self._cur)
            if room > 0:
                self._cur += data[pos : min(end, pos + room)]
            if nl < 0:
                pos = n
                break
            self._take_line()
            self.newlines += 1
            pos = nl + 1
        if pos < n:
            self.newlines += data.count(b"\n", pos)
        return self.scanned >= SCAN_AFTER_START

    def _whole_lines(self, data: bytes, pos: int) -> int:
        """Keep the complete lines of data from pos (as _take_line would, one by one); where they end."""
        last = data.rfind(b"\n", pos)
        if last < 0:
            return pos
        want = self.limit - len(self.lines)
        raws = data[pos:last].split(b"\n", want)
        if len(raws) > want:
            raws.pop()  # past the window
        end = pos + sum(map(len, raws)) + len(raws)
        block = _block(data[pos : end - 1]) if raws and max(map(len, raws)) <= MAX_LINE_CHARS else None
        if block is not None:  # no line cut, one encoding: decoded as one text
            texts = block.split("\n")
            if "\r" in block:
                texts = [t[:-1] if t.endswith("\r") else t for t in texts]
            cost = sum(map(len, texts)) + 64 * len(texts)
            if cost < self._room:  # the budget is not reached inside these lines
                self.lines += texts
                self._room -= cost
                self.newlines += len(texts)
                return end
        for raw in raws:
            pos += len(raw) + 1
            text = decode_line(raw[:LINE_KEEP], cut=len(raw) > LINE_KEEP)
            text = (text[:-1] if text.endswith("\r") else text)[: MAX_LINE_CHARS + 1]
            self.lines.append(text)
            self._room -= len(text) + 64
            self.newlines += 1
            if self._room <= 0:
                break
        return pos

    def feed_zeros(self, n: int) -> None:
        """Take ``n`` NUL bytes (a hole of a sparse file) without their being read."""
        self.size += n
        self._last = b"\x00"
        if self.newlines + 1 >= self.start and not self.full:
            self._cur += bytes(max(0, min(n, LINE_KEEP - len(self._cur))))

    def finish(self, eof: bool) -> None:
        """The input ended (``eof``) or the reader stopped: a line begun is kept (marked when cut short)."""
        self.eof = eof
        if self._cur and not self.full:
            self._take_line(cut=not eof)
        if self.start == 1 and self.lines and self.lines[0].startswith("\ufeff"):
            self.lines[0] = self.lines[0][1:]  # a UTF-8 byte-order mark: not part of the text

    def _take_line(self, cut: bool = False) -> None:
        text = decode_line(bytes(self._cur), cut=cut or len(self._cur) >= LINE_KEEP)
        text = (text[:-1] if text.endswith("\r") else text)[: MAX_LINE_CHARS + 1]  # longer: shown truncated
        if cut and len(text) <= MAX_LINE_CHARS:
            text += "… [line not read to its end]"
        self.lines.append(text)
        self._room -= len(text) + 64  # a str's own cost, roughly
        self._cur = bytearray()


async def read_window(path: Path, start: int, limit: int) -> tuple[LineWindow, os.stat_result]:
    """Stream a regular text file into a LineWindow; yields to the event loop between chunks.

    Holes of a sparse file (NUL bytes, no newline) are skipped with ``SEEK_DATA``, not read.
    """
    fd, st = open_regular(path)
    window = LineWindow(start, limit)
    try:
        found = sniff_bom(os.pread(fd, 4, 0))
    except OSError as e:
        os.close(fd)
        raise _os_error(path, e) from None
    if found is not None and found[1].startswith("utf-16"):  # whole, transcoded: its NULs are no binary sign
        os.close(fd)
        bom, encoding = found
        data = read_capped(path, UTF16_CAP, "too large to show as UTF-16 text; use Bash (e.g. iconv) on it")
        window.feed(data[len(bom) :].decode(encoding, "replace").encode("utf-8"))
        window.finish(True)
        return window, st
    hard_cap = st.st_size + SCAN_AFTER_START  # a file that grows while read (or /proc, which says 0) ends here
    pos = read = 0
    eof = False
    holes = _SEEK_DATA is not None
    try:
        while True:
            if holes:
                data_at = _next_data(fd, pos)
                if data_at is None:
                    holes = False
                elif data_at > pos:
                    if pos < BINARY_SNIFF:
                        raise ToolError(f"{path} is a binary file; it cannot be read as text")
                    window.feed_zeros(data_at - pos)
                    pos = data_at
            data = os.read(fd, CHUNK)
            if not data:
                eof = True
                break
            if pos < BINARY_SNIFF and b"\x00" in data[: BINARY_SNIFF - pos]:
                raise ToolError(f"{path} is a binary file; it cannot be read as text")
            pos += len(data)
            read += len(data)
            if window.feed(data) or read >= hard_cap:
                break
            await asyncio.sleep(0)
    except OSError as e:
        raise _os_error(path, e) from None
    finally:
        os.close(fd)
    window.finish(eof)
    return window, st


_SEEK_DATA: int | None = getattr(os, "SEEK_DATA", None)


def _next_data(fd: int, pos: int) -> int | None:
    """Where the next data at or after ``pos`` starts, with the descriptor moved there (the end of the
    file when only a hole is left); None when the file system cannot tell, the descriptor left at ``pos``."""
    assert _SEEK_DATA is not None
    try:
        return os.lseek(fd, pos, _SEEK_DATA)
    except OSError as e:
        if e.errno == errno.ENXIO:  # nothing but a hole up to the end
            end = max(os.fstat(fd).st_size, pos)
            return os.lseek(fd, end, os.SEEK_SET)
        os.lseek(fd, pos, os.SEEK_SET)
        return None
