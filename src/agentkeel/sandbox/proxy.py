"""The network way out of the sandbox: an HTTP proxy keel runs outside, for allowed domains only.

The sandbox has its own network namespace with nothing but loopback. The proxy listens on a
Unix socket in the session's sandbox directory (visible, read-only, inside); inside, ``socat``
relays ``127.0.0.1:3128`` to it and ``HTTP_PROXY``/``HTTPS_PROXY`` point there. The proxy
reads the request line (``CONNECT host:443`` or ``GET http://host/...``), lets the connection
through when the host is allowed (``sandbox.network.allowedDomains``, WebFetch
``domain:`` allow rules; exact host or ``*.suffix``) and answers 403 otherwise. DNS happens
outside, in the proxy: a name lookup from inside the sandbox goes nowhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from agentkeel.permissions.rules import normalise_host

log = logging.getLogger("agentkeel.sandbox")

PORT = 3128


class DomainProxy:
    def __init__(self, socket_path: Path, allowed: Callable[[str], bool]) -> None:
        self.socket_path = socket_path
        self.allowed = allowed
        self.server: asyncio.AbstractServer | None = None
        self.denied: list[str] = []  # hosts refused this session, newest last
        self.socat = shutil.which("socat")

    async def start(self) -> None:
        if self.server is None:
            self.server = await asyncio.start_unix_server(self._serve, path=str(self.socket_path))

    def env(self) -> dict[str, str]:
        url = f"http://127.0.0.1:{PORT}"
        return {k: url for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY")} | {
            "NO_PROXY": "",
            "no_proxy": "",
        }

    def relay(self) -> str:
        """Shell text run inside before the command: the relay, and a wait until it listens."""
        return (
            f"{self.socat} TCP-LISTEN:{PORT},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:{self.socket_path} "
            "2>/dev/null & i=0; until (: </dev/tcp/127.0.0.1/3128) 2>/dev/null || [ $i -gt 200 ]; "
            "do i=$((i+1)); sleep 0.005; done; "
        )

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            writer.close()
            return
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split()
        host, port = _target(parts)
        if host is None:
            await _refuse(writer, 400, "keel's sandbox proxy could not read the request")
            return
        if not self.allowed(host):
            self.denied.append(host)
            await _refuse(writer, 403, f"{host} is blocked by keel's sandbox proxy (not an allowed domain)")
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(host, port), 30)
        except (OSError, TimeoutError) as e:
            await _refuse(writer, 502, f"keel's sandbox proxy could not reach {host}: {e}")
            return
        if parts[0].upper() == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(head)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    async def aclose(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await self.server.wait_closed()
            self.server = None


def _target(parts: list[str]) -> tuple[str | None, int]:
    if len(parts) < 3:
        return None, 0
    method, target = parts[0].upper(), parts[1]
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        default = 443
    else:
        if not target.lower().startswith("http://"):
            return None, 0
        authority = target[7:].split("/", 1)[0].rsplit("@", 1)[-1]
        host, _, port = authority.rpartition(":") if ":" in authority.strip("[]") else (authority, "", "")
        default = 80
    host = host.strip("[]")
    try:
        number = int(port) if port else default
    except ValueError:
        return None, 0
    return normalise_host(host), number


async def _refuse(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (text + "\n").encode()
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
    writer.write(body)
    with contextlib.suppress(ConnectionError):
        await writer.drain()
    writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
