"""An MCP server for keel's tests, written with the ``mcp`` package's own server API (MCPServer).

``python server.py MODE [PORT]``. Modes: ``stdio`` (tools, a resource, a prompt), ``http PORT``
and ``sse PORT`` (the same over streamable HTTP / SSE), ``hang`` (never answers the handshake),
``crash`` (its ``boom`` tool kills the process mid-call), ``big`` (``dump`` returns 10 MB),
``linger`` (as stdio, but does not exit when its stdin closes).
Each start appends ``pid`` to the file named by ``$MCP_FIXTURE_PIDS`` when set.
"""

import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer


def record_pid() -> None:
    path = os.environ.get("MCP_FIXTURE_PIDS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")


def build(mode: str) -> "MCPServer":
    from mcp.server.mcpserver import Context, MCPServer

    server = MCPServer("fixture")

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return f"sum={a + b}"

    @server.tool()
    def echo_env(name: str) -> str:
        """The value of one environment variable of the server process."""
        return f"{name}={os.environ.get(name, '<unset>')}"

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Register a new tool `late` and tell the client its tool list changed."""

        @server.tool()
        def late() -> str:
            """A tool that appeared after start-up."""
            return "late tool ran"

        await ctx.session.send_tool_list_changed()
        return "grown"

    @server.tool()
    async def slow() -> str:
        """Takes a minute."""
        import anyio

        await anyio.sleep(60)
        return "slow done"

    @server.resource("notes://today", mime_type="text/plain")
    def today() -> str:
        """Today's notes."""
        return "buy milk; ship keel"

    @server.prompt()
    def review(topic: str) -> str:
        """Ask for a review of a topic."""
        return f"Please review {topic} carefully."

    if mode == "crash":

        @server.tool()
        def boom() -> str:
            """Crashes the server mid-call."""
            os._exit(3)

    if mode == "big":

        @server.tool()
        def dump() -> str:
            """Ten megabytes of text."""
            return "x" * (10 * 1024 * 1024)

    return server


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    record_pid()
    if mode == "hang":
        while True:  # never reads stdin, never answers
            time.sleep(1)
    server = build(mode)
    if mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif mode == "sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
        if mode == "linger":  # outlives its closed stdin: only a kill ends it
            while True:
                time.sleep(1)


if __name__ == "__main__":
    main()
