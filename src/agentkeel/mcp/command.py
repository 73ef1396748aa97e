"""The ``/mcp`` slash command's body and the MCP prompts as slash commands, for the command registry.

``/mcp`` lists the servers; ``/mcp reconnect NAME``, ``/mcp disable NAME``, ``/mcp enable NAME``
act on one for this session (settings are not changed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkeel.mcp.pool import McpPool, PromptCommand

if TYPE_CHECKING:
    from agentkeel.core.handle import SessionHandle

USAGE = "usage: /mcp [list | reconnect NAME | enable NAME | disable NAME]"


def _pool(runtime: SessionHandle) -> McpPool | None:
    found: McpPool | None = runtime.agent.services.find(McpPool)
    return found


async def mcp(runtime: SessionHandle, args: str) -> str:
    pool = _pool(runtime)
    words = args.split()
    if pool is None or not pool.connections:
        return "No MCP servers configured. Add one with `keel mcp add NAME COMMAND` (or .mcp.json), then restart."
    if not words or words[0] == "list":
        return "MCP servers:\n" + "\n".join(f"  {line}" for line in pool.status_lines())
    action, name = words[0], (words[1] if len(words) > 1 else "")
    if action not in ("reconnect", "enable", "disable") or not name:
        return USAGE
    conn = pool.connections.get(name)
    if conn is None:
        return f"No MCP server named {name}. Configured: {', '.join(pool.connections)}"
    if action == "disable":
        await conn.stop(disable=True)
        pool.sync()
        return f"MCP server {name} disabled for this session; its tools are gone from the next request."
    if action == "enable" and conn.status != "disabled":
        return f"MCP server {name} is not disabled ({conn.status})."
    conn.status = "pending"
    await conn.reconnect()
    pool.sync()
    if conn.session is not None:
        return f"MCP server {name} connected: {len(conn.tools)} tools."
    return f"MCP server {name} failed: {conn.error}"


def prompt_commands(runtime: SessionHandle) -> list[PromptCommand]:
    """``/mcp__<server>__<prompt>`` commands of the connected servers (empty without MCP)."""
    pool = _pool(runtime)
    return pool.prompt_commands() if pool is not None else []
