"""One MCP server connection on the official ``mcp`` package: stdio, streamable HTTP or SSE.

Each connection lives in one task (the ``mcp`` transports are context managers that must be
entered and left in the same task): it connects, lists tools / resources / prompts, reports
ready, then waits to be stopped. Leaving the stdio transport closes the server's stdin, then
kills its process group (the ``mcp`` package spawns it in a session of its own).
A call that finds the connection gone marks it failed; the next call reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentkeel._version import __version__
from agentkeel.internal.private import open_private, private_dir
from agentkeel.mcp.config import ServerConfig

if TYPE_CHECKING:
    import mcp_types as types
    from mcp.client.session import ClientSession

log = logging.getLogger(__name__)

Status = Literal["pending", "connected", "failed", "disabled"]
Progress = Callable[[float, float | None, str | None], Awaitable[None]]
# asks the user for what an MCP server elicits: (server, request) -> the answer; None means no one can ask
Elicit = Callable[[str, "types.ElicitRequestParams"], Awaitable["types.ElicitResult | types.ErrorData"]]
_STOP_GRACE_S = 8.0  # closing stdin, then SIGTERM, then SIGKILL of the group: the mcp package's bounded steps


class ConnectionLost(Exception):
    """The server went away (crashed, closed its pipes, dropped the HTTP session)."""


def one_line(exc: BaseException) -> str:
    """An exception as one short line (exception groups unwrapped to their first cause)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        text = f"command not found: {exc.filename or text}"
    elif isinstance(exc, ImportError) and (exc.name or "").split(".")[0] in ("mcp", "mcp_types"):
        text = "the mcp package is not installed: pip install 'agentkeel[mcp]'"
    return re.sub(r"\s+", " ", text)[:300]


class Connection:
    def __init__(
        self,
        config: ServerConfig,
        *,
        connect_timeout_s: float,
        tool_timeout_s: float,
        env: Mapping[str, str],
        cwd: Path,
        log_dir: Path | None = None,
        on_change: Callable[[Connection], None] = lambda _c: None,
        roots: Callable[[], list[Path]] | None = None,
        elicit: Elicit | None = None,
        notice: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.config = config
        self.roots = roots or (lambda: [cwd])  # the project's directories, offered as MCP roots
        self.elicit = elicit  # None: headless, an elicitation is cancelled and the user told in one line
        self.notice = notice
        self.name = config.name
        self.connect_timeout_s = connect_timeout_s
        self.tool_timeout_s = tool_timeout_s
        self.env = env
        self.cwd = cwd
        self.log_dir = log_dir
        self.on_change = on_change
        self.status: Status = "pending"
        self.error = ""
        self.tools: list[types.Tool] = []
        self.resources: list[types.Resource] = []
        self.prompts: list[types.Prompt] = []
        self.instructions: str | None = None
        self.session: ClientSession | None = None
        self.attempts = 0
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._refreshing: asyncio.Task[None] | None = None
        self._deadline = 0.0  # the connect timeout runs from start(), imports and spawning included

    # --- life cycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Begin connecting (in the background); ``wait_ready`` awaits the outcome."""
        if self.status == "disabled" or (self._task is not None and not self._task.done()):
            return
        if self.config.missing:
            self._fail(
                "missing environment variable " + ", ".join(self.config.missing) + " (set it, or use ${VAR:-default})"
            )
            return
        self.status, self.error = "pending", ""
        self._ready, self._stop = asyncio.Event(), asyncio.Event()
        self.attempts += 1
        self._deadline = asyncio.get_running_loop().time() + self.connect_timeout_s
        self._task = asyncio.create_task(self._run(), name=f"mcp:{self.name}")

    async def wait_ready(self) -> None:
        """Until connected or failed; never longer than the connect timeout (and a grace)."""
        if self._task is None:
            return
        try:
            left = self._deadline - asyncio.get_running_loop().time()
            await asyncio.wait_for(asyncio.shield(self._ready.wait()), max(left, 0) + 0.5)
        except TimeoutError:
            self._fail(f"did not start within {self.connect_timeout_s:g}s")
            self._stop.set()  # the task stops the server in the background; stop() awaits it

    async def reconnect(self) -> None:
        await self.stop()
        self.status = "pending"
        self.start()
        await self.wait_ready()

    async def stop(self, *, disable: bool = False) -> None:
        await self._halt()
        if disable:
            self.status, self.error = "disabled", ""
            self._clear()
            self.on_change(self)

    async def _halt(self) -> None:
        task, self._task = self._task, None
        self._stop.set()
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), _STOP_GRACE_S)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        except BaseException:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # we are being cancelled, not just the server's task ending badly

    def _fail(self, reason: str) -> None:
        """Failed: its last known tools stay listed, so that a call reconnects (under the circuit breaker)."""
        self.status, self.error = "failed", reason
        self.session = None
        self._stop.set()
        self._ready.set()
        self.on_change(self)

    def _clear(self) -> None:
        self.tools, self.resources, self.prompts = [], [], []

    async def _run(self) -> None:
        try:
            from mcp.client.session import ClientSession
            from mcp_types import Implementation

            async with (
                self._transport() as (read, write),
                ClientSession(
                    read,
                    write,
                    message_handler=self._on_message,
                    list_roots_callback=self._list_roots,
                    elicitation_callback=self._elicit,
                    client_info=Implementation(name="keel", version=__version__),
                ) as session,
            ):
                try:
                    left = self._deadline - asyncio.get_running_loop().time()
                    await asyncio.wait_for(self._handshake(session), max(left, 0.001))
                except TimeoutError:
                    # reported now: stopping the server (in this task) must not delay anyone
                    self._fail(f"did not start within {self.connect_timeout_s:g}s")
                    return
                self.status, self.error, self.session = "connected", "", session
                self._ready.set()
                self.on_change(self)
                await self._stop.wait()
        except asyncio.CancelledError:
            if self.status != "failed":
                self._fail("stopped")
            raise
        except BaseException as exc:  # an exception group from the transport's task group
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            log.debug("MCP server %s failed", self.name, exc_info=True)
            if self.status == "pending":
                self._fail(one_line(exc))
            elif self.status == "connected" and not self._stop.is_set():
                self._fail(f"connection lost: {one_line(exc)}")
        finally:
            self.session = None
            if self.status == "connected":
                if self._stop.is_set():  # stopped on purpose
                    self.status, self.error = "pending", "stopped"
                    self._clear()
                else:
                    self._fail("connection closed")
            self._ready.set()

    async def _list_roots(self, context: Any) -> types.ListRootsResult:
        """``roots/list``: the project's directories (the working directory and any added ones), as Claude Code."""
        from mcp_types import ListRootsResult, Root

        seen: list[Path] = []
        for path in self.roots():
            resolved = path.resolve()
            if resolved not in seen:
                seen.append(resolved)
        return ListRootsResult(roots=[Root(uri=p.as_uri()) for p in seen])  # type: ignore[arg-type]  # no name, as Claude Code

    async def _elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        """``elicitation/create``: through the front end's ask path when it has one. Headless, the answer
        is Claude Code's (2.1.328 ``-p``: ``{"action": "cancel"}``) and the user is told why in one line."""
        from mcp_types import ElicitResult

        if self.elicit is not None:
            return await self.elicit(self.name, params)
        asked = re.sub(r"\s+", " ", getattr(params, "message", "") or "")[:200]
        self.notice(
            f"MCP server '{self.name}' asked for input ({asked!r}); this session is not interactive, "
            "so the request was cancelled (run keel interactively to answer it)"
        )
        return ElicitResult(action="cancel")

    async def _handshake(self, session: ClientSession) -> None:
        result = await session.initialize()
        self.instructions = result.instructions
        await self._list_all(session)

    async def _list_all(self, session: ClientSession) -> None:
        caps = session.server_capabilities
        self.tools = await _all_tools(session) if caps is None or caps.tools is not None else []
        self.resources = await _all_resources(session) if caps is not None and caps.resources is not None else []
        self.prompts = await _all_prompts(session) if caps is not None and caps.prompts is not None else []

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        c = self.config
        if c.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            env = {**self.env, **c.env}
            command, args = _guarded(c.command, list(c.args), env)
            params = StdioServerParameters(command=command, args=args, env=env, cwd=str(self.cwd))
            with self._errlog() as errlog:
                async with stdio_client(params, errlog=errlog) as streams:
                    yield streams[0], streams[1]
        elif c.transport == "http":
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            async with (
                create_mcp_http_client(headers=dict(c.headers)) as http,
                streamable_http_client(c.url, http_client=http) as streams,
            ):
                yield streams[0], streams[1]
        else:
            from mcp.client.sse import sse_client

            async with sse_client(c.url, headers=dict(c.headers), timeout=self.connect_timeout_s) as streams:
                yield streams[0], streams[1]

    @contextlib.contextmanager
    def _errlog(self) -> Any:
        """The server's stderr goes to ``$KEEL_HOME/logs/mcp-<name>.log``, never to the user's terminal."""
        path = self.log_dir / f"mcp-{self.name}.log" if self.log_dir is not None else None
        try:
            if path is not None:
                private_dir(path.parent)
                handle = os.fdopen(open_private(path), "a", encoding="utf-8")
            else:
                handle = open(os.devnull, "a", encoding="utf-8")  # noqa: SIM115
        except OSError:
            handle = open(os.devnull, "a", encoding="utf-8")  # noqa: SIM115
        try:
            yield handle
        finally:
            handle.close()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            log.debug("MCP server %s: transport error: %s", self.name, message)
            return
        method = getattr(message, "method", "")
        if method.endswith("/list_changed") and self.session is not None:
            # listing from inside the handler would wait on the dispatcher that runs it
            self._refreshing = asyncio.get_running_loop().create_task(self._refresh(method))

    async def _refresh(self, method: str) -> None:
        session = self.session
        if session is None:
            return
        try:
            if method == "notifications/tools/list_changed":
                self.tools = await _all_tools(session)
            elif method == "notifications/resources/list_changed":
                self.resources = await _all_resources(session)
            elif method == "notifications/prompts/list_changed":
                self.prompts = await _all_prompts(session)
        except Exception as exc:
            log.warning("MCP server %s: refreshing after %s failed: %s", self.name, method, one_line(exc))
            return
        self.on_change(self)

    # --- calls ----------------------------------------------------------------------------

    async def ready_session(self) -> ClientSession:
        """The live session, reconnecting first when the last one failed."""
        if self.status == "disabled":
            raise ConnectionLost(f"MCP server '{self.name}' is disabled (/mcp enable {self.name})")
        if self.status == "failed" or (self.status == "pending" and self._task is None):
            await self.reconnect()
        elif self.status == "pending":
            await self.wait_ready()
        if self.session is None:
            raise ConnectionLost(f"MCP server '{self.name}' is not connected: {self.error or self.status}")
        return self.session

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], progress: Progress | None = None
    ) -> types.CallToolResult:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, CallToolResult

        session = await self.ready_session()
        try:
            result = await session.call_tool(
                tool,
                arguments,
                read_timeout_seconds=self.tool_timeout_s,
                progress_callback=progress,  # type: ignore[arg-type]  # a ProgressFnT, positionally
            )
        except MCPError as e:
            if e.code == CONNECTION_CLOSED:
                await self._lost(e.message)
            raise
        except (TimeoutError, asyncio.CancelledError):
            raise
        except Exception as e:
            await self._lost(one_line(e))
            raise ConnectionLost(f"MCP server '{self.name}' connection lost: {one_line(e)}") from None
        await self._settle()
        if not isinstance(result, CallToolResult):
            raise ConnectionLost(
                f"MCP server '{self.name}' answered with an unexpected result ({type(result).__name__})"
            )
        return result

    async def _settle(self) -> None:
        """A list_changed sent during the call (a tool that adds tools) is applied before the result
        goes back, so the very next request carries the new list."""
        for _ in range(3):
            await asyncio.sleep(0)
        refreshing = self._refreshing
        if refreshing is not None and not refreshing.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(refreshing), 10)

    async def _lost(self, reason: str) -> None:
        if self.status == "connected":
            self._fail(f"connection lost: {reason}")
        await self._halt()


def _guarded(command: str, args: list[str], env: Mapping[str, str]) -> tuple[str, list[str]]:
    """The server's command, resolved on its PATH, and on Linux started under ``setpriv
    --pdeathsig KILL``: if keel itself is killed (SIGKILL, a crash past every cleanup), the kernel
    kills the server too, even one that ignores its closed stdin."""
    found = shutil.which(command, path=env.get("PATH"))
    if found is None:
        raise FileNotFoundError(2, "command not found", command)
    setpriv = shutil.which("setpriv") if sys.platform == "linux" else None
    if setpriv is None:
        return found, args
    return setpriv, ["--pdeathsig", "KILL", "--", found, *args]


async def _every_page(list_page: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    """Every item of a paginated MCP list (tools, resources, prompts), page after page."""
    from mcp_types import PaginatedRequestParams

    out: list[Any] = []
    cursor = None
    while True:
        page = await list_page(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        out += getattr(page, field)
        cursor = page.next_cursor
        if not cursor:
            return out


async def _all_tools(session: ClientSession) -> list[types.Tool]:
    return await _every_page(session.list_tools, "tools")


async def _all_resources(session: ClientSession) -> list[types.Resource]:
    return await _every_page(session.list_resources, "resources")


async def _all_prompts(session: ClientSession) -> list[types.Prompt]:
    return await _every_page(session.list_prompts, "prompts")
