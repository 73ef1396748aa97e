"""keel's lean HTTP/1.1 client (providers/_conn.py) against raw servers over loopback: the framings and
encodings fake-llm does not send, and a keep-alive connection the server closed while it sat idle."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from agentkeel.providers import _conn

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A raw TCP server; yields its URL and the list of connections it accepted (by peer port)."""
    peers: list[int] = []

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer.get_extra_info("peername")[1])
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/v1/messages", peers


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return await reader.readexactly(length)


def pool() -> _conn.Pool:
    def no_tls() -> object:
        raise AssertionError("no TLS here")

    return _conn.Pool(no_tls, 5.0)  # type: ignore[arg-type]


async def post(p: _conn.Pool, url: str) -> tuple[int, dict[str, str], bytes]:
    response = await p.post(url, {"content-type": "application/json"}, b'{"q": 1}', 5.0)
    try:
        return response.status_code, response.headers, await response.aread()
    finally:
        await response.aclose()


@pytest.mark.parametrize(
    ("encoding", "pack"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), ("identity", lambda b: b)],
)
async def test_bodies_by_content_length_in_every_encoding(encoding: str, pack: Callable[[bytes], bytes]) -> None:
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

    async with serve(handler) as (url, peers):
        p = pool()
        for _ in range(3):
            status, headers, got = await post(p, url)
            assert (status, got, headers["content-type"]) == (200, body, "application/json")
        await p.aclose()
    assert len(peers) == 1  # kept alive


async def test_chunked_with_extensions_trailers_and_an_interim_answer() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\nx-a: 2\r\n\r\n")
        for piece in (b"d;ext=1\r\nevent:", b" ping\n\n\r", b"\n9\r\ndata: {}\n\r\n0\r\nTrailer: t\r\n\r\n"):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.01)

    async with serve(handler) as (url, _):
        status, headers, got = await post(pool(), url)
    assert (status, headers["x-a"], got) == (200, "1, 2", b"event: ping\n\ndata: {}\n")


async def test_a_body_that_ends_with_the_connection_and_one_cut_short() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")

    async with serve(handler) as (url, _):
        assert (await post(pool(), url))[2] == b"until the end"

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")

    async with serve(cut) as (url, _):
        with pytest.raises(_conn.BodyBroken, match="91 bytes of the body unread"):
            await post(pool(), url)


async def test_an_idle_connection_the_server_closed_is_replaced() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        # keep-alive was not refused, but the server drops the connection after one answer

    async with serve(handler) as (url, peers):
        p = pool()
        assert (await post(p, url))[2] == b"ok"
        await asyncio.sleep(0.05)
        assert (await post(p, url))[2] == b"ok"
        await p.aclose()
    assert len(peers) == 2


async def test_no_answer_and_a_refused_connection_are_told_apart() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)

    async with serve(silent) as (url, _):
        with pytest.raises(_conn.NoAnswer):
            await post(pool(), url)
    with pytest.raises(_conn.ConnectFailed):
        await post(pool(), url)  # the server is gone: refused


async def test_a_header_with_a_line_break_is_refused_before_sending() -> None:
    with pytest.raises(ValueError, match="line break"):
        await pool().post("http://127.0.0.1:9/x", {"x-evil": "a\r\nb: c"}, b"", 1.0)


async def test_a_cancelled_request_closes_its_connection() -> None:
    """An interrupt while waiting for the answer leaves no connection open behind it."""
    closed = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await reader.read()  # b"" once the client has closed its end
        closed.set()

    async with serve(silent) as (url, _):
        p = pool()
        task = asyncio.create_task(post(p, url))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(closed.wait(), 5)
