"""``keel acp [--model M] [--permission-mode MODE] [--verbose]``: keel as an ACP agent on stdio.

Standard input and output carry the protocol and nothing else: both are kept for the connection,
file descriptor 1 is pointed at standard error and 0 at /dev/null before any session starts, so a
stray print, a library's banner or a child that inherits a descriptor (``$EDITOR`` for ``/memory
edit``, a hook) can neither corrupt the stream nor read requests meant for keel.
Logs go to standard error (``--verbose`` for debug).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"keel acp: {message} (see keel acp --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="keel acp",
        description="Run keel as an Agent Client Protocol (ACP v1) agent on stdio, for editors "
        "(Zed, JetBrains, Neovim). See docs/editors.md.",
    )
    p.add_argument("--model", default=None, help="the model of every session (default: settings, KEEL_MODEL)")
    p.add_argument("--permission-mode", choices=MODES, default=None, help="the mode sessions start in")
    p.add_argument("--verbose", action="store_true", help="debug logs on standard error")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        import acp  # noqa: F401
    except ImportError:
        print("keel acp: needs the ACP SDK: pip install 'agentkeel[acp]'", file=sys.stderr)
        return EXIT_ERROR
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="keel acp: %(levelname)s %(name)s: %(message)s",
    )
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    os.dup2(2, 1)  # fd 1 is standard error from here on: only the connection writes the protocol
    sys.stdout = sys.stderr
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)  # and fd 0 is empty: a child that reads its input ($EDITOR, a hook) cannot eat requests
    os.close(nothing)
    try:
        asyncio.run(serve(args, protocol_in, protocol_out))
    except KeyboardInterrupt:
        pass
    return EXIT_OK


class LineTransport:
    """Newline-delimited JSON-RPC on stdio (the SDK's ``Transport``), answering bad input: a line
    that is not JSON gets a parse error and one that is not a JSON-RPC object an invalid-request
    error (the SDK's own framing skips the first silently and fails the connection on the second)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        sent: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.sent = sent  # told of each message once it is written
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        async with self._lock:
            self.writer.write(data)
            await self.writer.drain()
        if self.sent is not None:
            self.sent(message)

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                line = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:
                line = end.partial
                if not line.strip():
                    return None
            except asyncio.LimitOverrunError as over:
                head = await self.reader.readexactly(over.consumed)
                tail = await self._skip_line()
                answer = await self._oversized(head[:4096], tail)
                if answer is not None:
                    return answer
                continue
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                await self._error(-32700, "Parse error", "a line that is not JSON")
                continue
            except RecursionError:  # nested deeper than the parser goes: bad input, not a crash
                await self._error(-32700, "Parse error", "a line nested too deeply to parse")
                continue
            if not isinstance(message, dict) or not (isinstance(message.get("method"), str) or "id" in message):
                await self._error(-32600, "Invalid request", "a JSON-RPC message is an object with a method or an id")
                continue
            return message

    async def _skip_line(self) -> bytes:
        """Reads past the end of the current line; its last few kilobytes."""
        tail = b""
        while True:
            try:
                tail = (tail + await self.reader.readuntil(b"\n"))[-4096:]
                return tail
            except asyncio.LimitOverrunError as over:
                tail = (tail + await self.reader.readexactly(over.consumed))[-4096:]
            except asyncio.IncompleteReadError as end:
                return (tail + end.partial)[-4096:]

    async def _oversized(self, head: bytes, tail: bytes) -> dict[str, Any] | None:
        """A message over the line limit is not read, but its id is answered: a request of the
        client's gets its error; an answer to one of keel's requests (a huge fs/read_text_file) is
        handed on as that request's error, so it fails at once instead of waiting for ever."""
        detail = "a message longer than 50 MB"
        found = _ID.search(head.split(b'"result"', 1)[0].split(b'"error"', 1)[0])
        if found is None:
            ids = list(_ID.finditer(tail))
            found = ids[-1] if ids else None
        try:
            ident = json.loads(found.group(1)) if found is not None else None
        except ValueError:
            ident = None
        if ident is None:
            await self._error(-32700, "Parse error", detail)
        elif b'"method"' in head:
            log.warning("bad input from the client: %s", detail)
            error = {"code": -32700, "message": "Parse error", "data": detail}
            await self.send({"jsonrpc": "2.0", "id": ident, "error": error})
        else:
            log.warning("the client's answer to request %s is longer than 50 MB: not read", ident)
            return {
                "jsonrpc": "2.0",
                "id": ident,
                "error": {"code": -32603, "message": "Internal error", "data": detail},
            }
        return None

    async def _error(self, code: int, message: str, detail: str) -> None:
        log.warning("bad input from the client: %s", detail)
        await self.send({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message, "data": detail}})

    async def close(self) -> None:
        self.writer.close()


log = logging.getLogger("agentkeel.ui.acp")
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')  # a message's id, in the bytes of its start or end


async def _streams(in_fd: int, out_fd: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=50 * 1024 * 1024)  # images and embedded files come inline
    protocol = asyncio.StreamReaderProtocol(reader)
    await loop.connect_read_pipe(lambda: protocol, os.fdopen(in_fd, "rb", buffering=0))
    write_protocol = asyncio.streams.FlowControlMixin()
    transport, _ = await loop.connect_write_pipe(lambda: write_protocol, os.fdopen(out_fd, "wb", buffering=0))
    return reader, asyncio.StreamWriter(transport, write_protocol, None, loop)


async def serve(args: argparse.Namespace, in_fd: int, out_fd: int) -> None:
    from typing import cast

    from acp import Agent, run_agent

    from agentkeel.ui.acp.agent import KeelAgent

    agent = KeelAgent(env=os.environ, home=Path.home(), model=args.model, mode=args.permission_mode)
    reader, writer = await _streams(in_fd, out_fd)
    try:
        # KeelAgent implements the methods keel answers; the SDK's router answers the others
        # (session/list, fork, resume, config options) with method-not-found
        await run_agent(cast(Agent, agent), LineTransport(reader, writer, agent.sent))
    finally:
        await agent.close_all()
