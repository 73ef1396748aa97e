"""keel's HTTP side of the wire clients (providers/_http.py, on httpx) against raw servers over
loopback: the framings and encodings fake-llm does not send, keep-alive across requests, a
keep-alive connection the server closed while it sat idle, a server that drops the connection
mid-stream, and each transport failure told apart as the ProviderError kind the retry layer reads."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager

import pytest

from agentkeel.core.provider import ProviderError
from agentkeel.models._http import WHOLE_BODY, HttpSession, Target
from agentkeel.models._sse import SSEEvent

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A raw TCP server; yields its base URL and the list of connections it accepted (by peer port)."""
    peers: list[int] = []

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer.get_extra_info("peername")[1])
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}", peers


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return await reader.readexactly(length)


def target(base: str, timeout_s: float = 5.0) -> Target:
    return Target(
        url=f"{base}/v1/messages", endpoint=base, model="m", key_hint="ANTHROPIC_API_KEY", timeout_s=timeout_s
    )


async def post(
    session: HttpSession, base: str, headers: dict[str, str] | None = None, timeout_s: float = 5.0
) -> list[SSEEvent]:
    async with aclosing(session.post_sse(target(base, timeout_s), headers or {}, b'{"q": 1}')) as events:
        return [event async for event in events]


async def failure(
    session: HttpSession, base: str, headers: dict[str, str] | None = None, timeout_s: float = 5.0
) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await post(session, base, headers, timeout_s)
    return caught.value


@pytest.mark.parametrize(
    ("encoding", "pack"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), ("identity", lambda b: b)],
)
async def test_bodies_by_content_length_in_every_encoding_on_one_connection(
    encoding: str, pack: Callable[[bytes], bytes]
) -> None:
    """A server that ignored ``stream: true`` answers with a JSON body: it arrives whole, decoded,
    and the connection is kept for the next request."""
    body = b'{"answer": "' + b"x" * 5000 + b'"}'

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not reader.at_eof():
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            data = pack(body)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Encoding: {encoding}\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            await writer.drain()

    async with serve(handler) as (base, peers):
        session = HttpSession(base)
        for _ in range(3):
            assert await post(session, base) == [SSEEvent(WHOLE_BODY, body.decode())]
        await session.aclose()
    assert len(peers) == 1  # kept alive


async def test_chunked_events_with_extensions_trailers_and_an_interim_answer() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b"c;ext=1\r\nevent:", b" ping\n\r", b"\na\r\ndata: {}\n\n\r\n0\r\nTrailer: t\r\n\r\n"):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.01)

    async with serve(handler) as (base, _):
        session = HttpSession(base)
        assert await post(session, base) == [SSEEvent("ping", "{}")]
        await session.aclose()

    async def events(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b'event: a\r\ndata: {"n"', b": 1}\r\n\r\n", b"data: 2\n\n"):
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")

    async with serve(events) as (base, _):
        session = HttpSession(base)
        assert await post(session, base) == [SSEEvent("a", '{"n": 1}'), SSEEvent(None, "2")]
        await session.aclose()


async def test_a_body_that_ends_with_the_connection_and_one_cut_short() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: end\n\n")

    async with serve(handler) as (base, _):
        assert await post(HttpSession(base), base) == [SSEEvent(None, "end")]

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 100\r\n\r\ndata: x\n\n")

    async with serve(cut) as (base, _):
        error = await failure(HttpSession(base), base)
    assert error.kind == "stream_broken" and f"the response stream from {base} broke" in str(error)


async def test_a_server_that_drops_the_connection_mid_stream() -> None:
    """Events already read are delivered; then the break is a ``stream_broken`` the retry layer retries."""
    got: list[SSEEvent] = []

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        piece = b"event: message_start\ndata: {}\n\n"
        writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.transport.abort()  # no terminating chunk: reset

    async with serve(drop) as (base, _):
        session = HttpSession(base)
        with pytest.raises(ProviderError) as caught:
            async with aclosing(session.post_sse(target(base), {}, b"{}")) as events:
                async for event in events:
                    got.append(event)
        await session.aclose()
    assert got == [SSEEvent("message_start", "{}")]
    assert caught.value.kind == "stream_broken", caught.value


async def test_an_idle_connection_the_server_closed_is_replaced() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 9\r\n\r\ndata: 1\n\n")
        await writer.drain()
        # keep-alive was not refused, but the server drops the connection after one answer

    async with serve(handler) as (base, peers):
        session = HttpSession(base)
        assert await post(session, base) == [SSEEvent(None, "1")]
        await asyncio.sleep(0.05)
        assert await post(session, base) == [SSEEvent(None, "1")]
        await session.aclose()
    assert len(peers) == 2


async def test_no_answer_a_stall_and_a_refused_connection_are_told_apart() -> None:
    async def closes(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)  # then closes without a word

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(5)

    async with serve(closes) as (base, _):
        error = await failure(HttpSession(base), base)
    assert error.kind == "connection" and f"{base} closed the connection" in str(error), error
    async with serve(silent) as (base, _):
        error = await failure(HttpSession(base), base, timeout_s=0.3)
    assert error.kind == "timeout" and "within 0.3 s" in str(error), error
    error = await failure(HttpSession(base), base)  # the server is gone: refused
    assert error.kind == "connection" and f"cannot reach {base}" in str(error), error


async def test_a_header_with_a_line_break_is_never_sent() -> None:
    """A credential with a line break in it (a pasted key) cannot inject a header: the request fails
    before anything reaches the server."""
    received: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.read(65536))

    async with serve(handler) as (base, _):
        error = await failure(HttpSession(base), base, headers={"x-api-key": "sk-fake\r\nx-evil: c"})
        await asyncio.sleep(0.05)
    assert not any(b"x-evil" in r for r in received)
    assert "header value is not valid" in str(error) and "sk-fake" not in str(error)  # the credential is not shown


async def test_a_cancelled_request_closes_its_connection() -> None:
    """An interrupt while waiting for the answer leaves no connection open behind it."""
    closed = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await reader.read()  # b"" once the client has closed its end
        closed.set()

    async with serve(silent) as (base, _):
        session = HttpSession(base)
        task = asyncio.create_task(post(session, base))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(closed.wait(), 5)
