"""A lean HTTP/1.1 client on asyncio streams: what keel's wire clients need on the direct path.

keel's requests are POSTs of JSON, answered by a server-sent-event stream or a JSON body, to one
origin per session. This client does that and nothing more: a keep-alive pool per session, TLS with
the session's context, Content-Length, chunked and read-to-close bodies, gzip and deflate, a
connect timeout and a timeout on every read. Requests that go through a proxy use httpx instead
(``_http.HttpSession`` decides).

Why it exists: httpx and its stack (httpcore, anyio, h11, idna, plus httpx's CLI with click, rich
and pygments when those are installed) cost 50-170 ms to import on the path to the first request
and about a millisecond per request; asyncio is loaded anyway. Plain ``__slots__`` classes, no
dataclasses: a class here is built at import time, on that same path.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import urlsplit

_HEAD_LIMIT = 1 << 20  # status line + headers; a larger head is not an HTTP API's answer
_PIECE = 1 << 16


class HttpError(Exception):
    """A transport failure; ``_http`` turns each kind into a :class:`ProviderError`."""


class ConnectFailed(HttpError):
    """Could not connect: refused, no such host, TLS verification failed."""


class ConnectTimedOut(HttpError):
    pass


class NoAnswer(HttpError):
    """The connection closed or was reset before the status line."""


class AnswerTimedOut(HttpError):
    """No status line within the timeout."""


class BodyTimedOut(HttpError):
    pass


class BodyBroken(HttpError):
    """The body ended early, or its framing or encoding is broken."""


class _Conn:
    __slots__ = ("key", "loop", "reader", "writer")

    def __init__(self, key: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.key = key
        self.loop = asyncio.get_running_loop()
        self.reader = reader
        self.writer = writer

    def usable(self) -> bool:
        try:
            return (
                self.loop is asyncio.get_running_loop()
                and not self.writer.is_closing()
                and not self.reader.at_eof()
                and not self.reader._buffer  # type: ignore[attr-defined]  # bytes nobody asked for: not clean
            )
        except RuntimeError:
            return False

    def abort(self) -> None:
        try:
            self.writer.transport.abort()
        except Exception:  # a transport of a loop that is gone
            pass


class Response:
    """Status, headers (lower-case names) and a body read on demand. ``aclose`` always."""

    __slots__ = (
        "_chunked",
        "_conn",
        "_decoder",
        "_done",
        "_keep",
        "_left",
        "_pool",
        "_timeout",
        "headers",
        "status_code",
    )

    def __init__(
        self, pool: Pool, conn: _Conn, status: int, headers: dict[str, str], timeout_s: float, keep: bool
    ) -> None:
        self._pool = pool
        self._conn: _Conn | None = conn
        self.status_code = status
        self.headers = headers
        self._timeout = timeout_s
        self._keep = keep
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self._left: int | None = None
        if not self._chunked and length is not None:
            try:
                self._left = int(length)
            except ValueError:
                raise BodyBroken(f"bad Content-Length {length!r}") from None
        elif not self._chunked:
            self._keep = False  # the body ends when the connection does
        self._done = False
        encoding = headers.get("content-encoding", "identity").lower().strip()
        if encoding in ("", "identity"):
            self._decoder: Callable[[bytes], bytes] | None = None
        elif encoding in ("gzip", "x-gzip", "deflate"):
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS | 32).decompress  # gzip or zlib, by the header
        else:
            raise BodyBroken(f"unsupported Content-Encoding {encoding!r}")

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        async for piece in self._raw():
            out = self._decoder(piece) if self._decoder is not None else piece
            if out:
                yield out

    async def aread(self) -> bytes:
        return b"".join([piece async for piece in self.aiter_bytes()])

    async def _raw(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None or self._done:
            return
        reader = conn.reader
        try:
            if self._chunked:
                while True:
                    line = await self._read(reader.readuntil(b"\r\n"))
                    try:
                        size = int(line.split(b";", 1)[0].strip(), 16)
                    except ValueError:
                        raise BodyBroken("bad chunk size") from None
                    if size == 0:
                        while (await self._read(reader.readuntil(b"\r\n"))) != b"\r\n":
                            pass  # trailers
                        break
                    async for piece in self._exactly(reader, size):
                        yield piece
                    if await self._read(reader.readexactly(2)) != b"\r\n":
                        raise BodyBroken("bad chunk end")
            elif self._left is not None:
                async for piece in self._exactly(reader, self._left):
                    yield piece
            else:
                while piece := await self._read(reader.read(_PIECE)):
                    yield piece
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
            raise BodyBroken(f"the body ended early ({type(e).__name__})") from None
        except OSError as e:  # reset
            raise BodyBroken(str(e) or type(e).__name__) from None
        self._done = True

    async def _exactly(self, reader: asyncio.StreamReader, size: int) -> AsyncIterator[bytes]:
        while size > 0:
            piece = await self._read(reader.read(min(size, _PIECE)))
            if not piece:
                raise BodyBroken(f"the connection closed with {size} bytes of the body unread")
            size -= len(piece)
            yield piece

    async def _read(self, step: Awaitable[bytes]) -> bytes:
        try:
            async with asyncio.timeout(self._timeout):
                return await step
        except TimeoutError:
            raise BodyTimedOut() from None

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._done and self._keep:
            self._pool.put(conn)
        else:
            conn.abort()


class Pool:
    """Keep-alive connections of one session, by origin. ``ssl_context`` is asked at the first
    ``https`` connection."""

    def __init__(self, ssl_context: Callable[[], ssl.SSLContext], connect_timeout_s: float) -> None:
        self._ssl_context = ssl_context
        self._connect_timeout_s = connect_timeout_s
        self._idle: list[_Conn] = []

    def put(self, conn: _Conn) -> None:
        self._idle.append(conn)

    async def post(self, url: str, headers: dict[str, str], body: bytes, timeout_s: float) -> Response:
        """Send the POST and read up to the end of the response head."""
        parts = urlsplit(url)
        https = parts.scheme == "https"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConnectFailed(f"not an http(s) URL: {url.rsplit('@', 1)[-1]}")  # never the userinfo
        host = parts.hostname
        port = parts.port or (443 if https else 80)
        key = f"{parts.scheme}://{host}:{port}"
        shown = f"[{host}]" if ":" in host else host
        head = [f"POST {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1"]
        head.append(f"host: {shown}" if parts.port is None else f"host: {shown}:{port}")
        sent = {"host", "content-length", "accept-encoding", "connection"}
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise ValueError(f"the header {name!r} contains a line break")
            if name.lower() not in sent:
                head.append(f"{name}: {value}")
        head.append("accept-encoding: gzip, deflate")
        head.append(f"content-length: {len(body)}")
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1", "replace") + body
        reused = self._take(key)
        if reused is not None:
            try:
                return await self._exchange(reused, data, timeout_s)
            except NoAnswer:  # the server closed the idle connection as we reused it: a new one
                pass
        conn = await self._connect(key, host, port, https, min(self._connect_timeout_s, timeout_s))
        return await self._exchange(conn, data, timeout_s)

    def _take(self, key: str) -> _Conn | None:
        for conn in list(reversed(self._idle)):
            if conn.key == key or not conn.usable():
                self._idle.remove(conn)
                if conn.usable():
                    return conn
                conn.abort()
        return None

    async def _connect(self, key: str, host: str, port: int, https: bool, timeout_s: float) -> _Conn:
        context = self._ssl_context() if https else None
        try:
            async with asyncio.timeout(timeout_s):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=context, server_hostname=host if https else None, limit=_HEAD_LIMIT
                )
        except TimeoutError:
            raise ConnectTimedOut("connection timed out") from None
        except OSError as e:  # refused, DNS, TLS (ssl.SSLError is an OSError)
            raise ConnectFailed(str(e) or type(e).__name__) from None
        return _Conn(key, reader, writer)

    async def _exchange(self, conn: _Conn, data: bytes, timeout_s: float) -> Response:
        try:
            conn.writer.write(data)
            async with asyncio.timeout(timeout_s):
                await conn.writer.drain()
                head = await conn.reader.readuntil(b"\r\n\r\n")
                while head[9:10] == b"1" and head[:5] == b"HTTP/":  # 1xx: an interim answer, the real one follows
                    head = await conn.reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            conn.abort()
            raise AnswerTimedOut() from None
        except (asyncio.IncompleteReadError, OSError) as e:
            conn.abort()
            detail = "closed before answering" if isinstance(e, asyncio.IncompleteReadError) else str(e)
            raise NoAnswer(detail or type(e).__name__) from None
        except asyncio.LimitOverrunError:
            conn.abort()
            raise BodyBroken("the response head is too large") from None
        except BaseException:  # cancelled (an interrupt): the connection is in an unknown state
            conn.abort()
            raise
        try:
            status, headers, keep = _parse_head(head)
            return Response(self, conn, status, headers, timeout_s, keep)
        except BodyBroken:
            conn.abort()
            raise

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            if conn.usable():
                conn.writer.close()
                try:
                    await conn.writer.wait_closed()
                except OSError:
                    pass
            else:
                conn.abort()


def _parse_head(head: bytes) -> tuple[int, dict[str, str], bool]:
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    try:
        status = int(rest[:3])
    except ValueError:
        raise BodyBroken(f"not an HTTP status line: {lines[0][:80]!r}") from None
    if not version.startswith("HTTP/1."):
        raise BodyBroken(f"not an HTTP/1 answer: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise BodyBroken(f"malformed header line {line[:80]!r}")
        name, value = name.strip().lower(), value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    connection = headers.get("connection", "").lower()
    keep = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    return status, headers, keep
