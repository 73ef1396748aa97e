"""The network way out of the sandbox: an HTTP proxy keel runs outside, for allowed domains only.

The sandbox has its own network namespace with nothing but loopback. The proxy listens on a
Unix socket in the session's sandbox directory (visible, read-only, inside); inside, ``socat``
relays ``127.0.0.1:3128`` to it and ``HTTP_PROXY``/``HTTPS_PROXY`` point there. The proxy
reads the request line (``CONNECT host:443`` or ``GET http://host/...``), lets the connection
through when the host is allowed (``sandbox.network.allowedDomains``, WebFetch
``domain:`` allow rules; exact host or ``*.suffix``; or the user's answer when keel asked about
a new host) and answers 403 otherwise. DNS happens outside, in the proxy: a name lookup from
inside the sandbox goes nowhere.

The relay costs a ``socat`` start in every call (a few ms); a command made only of programs that
never open a socket (:data:`LOCAL_PROGRAMS`, read from keel's own analysis of the command) runs
without it: its network is off, as it would not use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import posixpath
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

from agentkeel.policy.permissions.rules import normalise_host

log = logging.getLogger("agentkeel.policy.sandbox")

PORT = 3128

# programs that open no socket of their own and run no other program (not awk: system(); not tar: a
# ``host:file`` archive is remote; not git: hooks and remotes; what a wrapper or ``find -exec`` runs is
# a command of its own in keel's analysis). A command made only of these needs no relay. A program
# missing here only costs the relay's start; one wrongly here only loses the network (the safe side).
LOCAL_PROGRAMS = frozenset(
    """: [ [[ true false echo printf test cd pwd pushd popd dirs export unset set shift read exit return local
    declare typeset readonly let ls cat tac head tail wc sort uniq cut paste tr grep egrep fgrep
    rg sed find mkdir rmdir rm cp mv ln touch chmod stat basename dirname realpath readlink diff cmp
    comm tee date sleep du df tree nl seq yes jq sha1sum sha256sum sha512sum md5sum base64 od xxd hexdump file
    mktemp truncate split csplit fold fmt expand unexpand column rev shuf tsort join less more""".split()
)


def needs_network(command: str, cwd: str, home: str) -> bool:
    """Whether ``command`` may open a connection: anything but a line keel reads fully whose every
    program is in :data:`LOCAL_PROGRAMS` and that redirects to no ``/dev/tcp``/``/dev/udp``."""
    from agentkeel.policy.permissions.bash import analyse

    analysis = analyse(command, cwd, home)
    if not analysis.confident or not analysis.commands:
        return True
    # a wrapper (``timeout 5 ls``, ``xargs rm``) runs the program keel read after it: that one counts
    if any(not c.argv or posixpath.basename(c.argv[0]) not in LOCAL_PROGRAMS for c in analysis.commands):
        return True  # a name known only at run time holds DYNAMIC: not in the table either
    return any(r.target.startswith(("/dev/tcp", "/dev/udp")) or "\x00" in r.target for r in analysis.redirects)


class DomainProxy:
    def __init__(self, socket_path: Path, allowed: Callable[[str], Awaitable[bool]]) -> None:
        self.socket_path = socket_path
        self.allowed = allowed  # may ask the user (once per host: the sandbox remembers the answer)
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

    def relay(self, idle: Path) -> str:
        """Shell text run inside before the command: the relay, and a wait until it listens. The wait
        starts no process: a connect attempt is a redirection of the ``:`` builtin, and the pause a
        ``read -t`` on ``idle`` (a FIFO nobody writes) instead of ``sleep``."""
        return (
            f"{self.socat} TCP-LISTEN:{PORT},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:{self.socket_path} "
            f'2>/dev/null & exec 9<>"{idle}"; i=0; until : 2>/dev/null </dev/tcp/127.0.0.1/{PORT} || [ $i -gt 1000 ]; '
            "do i=$((i+1)); read -r -t 0.001 -u 9; done; exec 9>&-; "
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
        try:
            allowed = await self.allowed(host)
        except Exception:  # fail closed
            log.exception("deciding on %s failed; refused", host)
            allowed = False
        if not allowed:
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
