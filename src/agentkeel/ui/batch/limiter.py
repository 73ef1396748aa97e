"""Provider limits shared by every worker of a batch: a loopback proxy in the batch process.

Each worker's keel talks to its provider through this proxy (its ``ANTHROPIC_BASE_URL`` /
``OPENAI_BASE_URL`` point here), so one place sees every request of the batch, whatever the
backend runs them on. The proxy admits a request when the sliding window has room under the
requests/min and tokens/min limits (tokens estimated from the body, 4 bytes a token, as the
provider counts them before it answers), and streams the answer through unchanged. A 429 from
the provider pauses *every* request for its ``retry-after`` (or a doubling backoff) and the
request is sent again after the pause: the batch slows down as one client instead of N workers
each retrying into the limit. Workers never see a rate-limit error unless the provider keeps
refusing for ``max_attempts`` tries.

Why a proxy and not a limiter inside each keel: the provider clients stay as they are (a
batch task is an ordinary session), the limit holds across processes and Ray workers without
a shared store, and a global pause is one variable in one event loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11
import httpx

_HOP = {b"host", b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"proxy-connection"}


@dataclass
class Limits:
    rpm: int | None = None  # requests per window
    tpm: int | None = None  # estimated input tokens per window
    window_s: float = 60.0
    max_attempts: int = 30


@dataclass
class LimiterStats:
    admitted: int = 0
    upstream_429: int = 0


class SharedLimiter:
    """A sliding window of admitted requests, and a global pause. One event loop owns it."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.stats = LimiterStats()
        self._window: collections.deque[tuple[float, int]] = collections.deque()
        self._tokens = 0
        self._paused_until = 0.0
        self._backoff = 0.5

    def _expire(self, now: float) -> None:
        while self._window and now - self._window[0][0] >= self.limits.window_s:
            _, t = self._window.popleft()
            self._tokens -= t

    def _room(self, tokens: int) -> bool:
        lim = self.limits
        if lim.rpm is not None and len(self._window) >= lim.rpm:
            return False
        # a request larger than the whole budget still goes, alone, rather than never
        return lim.tpm is None or not self._window or self._tokens + tokens <= lim.tpm

    async def admit(self, tokens: int) -> None:
        while True:
            now = time.monotonic()
            self._expire(now)
            if now < self._paused_until:
                await asyncio.sleep(self._paused_until - now)
                continue
            if self._room(tokens):
                self._window.append((now, tokens))
                self._tokens += tokens
                self.stats.admitted += 1
                return
            wait = self.limits.window_s - (now - self._window[0][0]) if self._window else 0.01
            await asyncio.sleep(max(0.005, wait))

    def pause(self, retry_after: float | None) -> None:
        """The provider said 429: nobody sends until it said to (or a doubling backoff)."""
        self.stats.upstream_429 += 1
        if retry_after is None:
            retry_after = self._backoff
            self._backoff = min(self._backoff * 2, 30.0)
        else:
            self._backoff = 0.5
        until = time.monotonic() + retry_after
        if until > self._paused_until:
            self._paused_until = until


def retry_after_s(headers: httpx.Headers) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        with contextlib.suppress(ValueError):
            return max(0.0, float(raw) * scale)
    return None


class LimiterProxy:
    """The proxy, on its own thread and event loop; ``base_url`` is what workers use."""

    def __init__(self, upstream: str, limits: Limits, host: str = "127.0.0.1") -> None:
        parts = urlsplit(upstream)
        self.upstream_origin = f"{parts.scheme}://{parts.netloc}"
        self.upstream_path = parts.path.rstrip("/")
        self.limiter = SharedLimiter(limits)
        self.host = host
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="keel-batch-limiter", daemon=True)
        self._server: asyncio.Server | None = None
        self._client: httpx.AsyncClient | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}{self.upstream_path}"

    def start(self) -> LimiterProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._startup())
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _startup(self) -> None:
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=30.0), limits=httpx.Limits())
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._client is not None:
            await self._client.aclose()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request, body = await _read_request(conn, reader)
                if request is None:
                    return
                await self._forward(conn, writer, request, body)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (h11.ProtocolError, ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _forward(self, conn: h11.Connection, writer: asyncio.StreamWriter, req: h11.Request, body: bytes) -> None:
        assert self._client is not None
        headers = [(k.decode(), v.decode()) for k, v in req.headers if k.lower() not in _HOP]
        url = self.upstream_origin + req.target.decode()
        tokens = max(1, len(body) // 4)
        for attempt in range(self.limiter.limits.max_attempts):
            await self.limiter.admit(tokens)
            try:
                upstream = await self._client.send(
                    self._client.build_request(req.method.decode(), url, headers=headers, content=body), stream=True
                )
            except httpx.HTTPError as e:
                await _send(conn, writer, 502, [], f'{{"error": {{"message": "keel batch proxy: {e}"}}}}'.encode())
                return
            last = attempt == self.limiter.limits.max_attempts - 1
            if upstream.status_code == 429 and not last:
                self.limiter.pause(retry_after_s(upstream.headers))
                await upstream.aclose()
                continue
            try:
                out = [(k, v) for k, v in upstream.headers.raw if k.lower() not in _HOP]
                out.append((b"transfer-encoding", b"chunked"))
                writer.write(conn.send(h11.Response(status_code=upstream.status_code, headers=out)) or b"")
                async for chunk in upstream.aiter_raw():
                    writer.write(conn.send(h11.Data(data=chunk)) or b"")
                    await writer.drain()
                writer.write(conn.send(h11.EndOfMessage()) or b"")
                await writer.drain()
            finally:
                await upstream.aclose()
            return


async def _read_request(conn: h11.Connection, reader: asyncio.StreamReader) -> tuple[h11.Request | None, bytes]:
    request: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(65536)
            conn.receive_data(data)
            if not data and request is None:
                return None, b""
            continue
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return request, bytes(body)
        elif isinstance(event, h11.ConnectionClosed):
            return None, b""


async def _send(
    conn: h11.Connection, writer: asyncio.StreamWriter, status: int, headers: list[tuple[str, str]], body: bytes
) -> None:
    hdrs = [*headers, ("content-type", "application/json"), ("content-length", str(len(body)))]
    writer.write(conn.send(h11.Response(status_code=status, headers=hdrs)) or b"")
    writer.write(conn.send(h11.Data(data=body)) or b"")
    writer.write(conn.send(h11.EndOfMessage()) or b"")
    await writer.drain()
