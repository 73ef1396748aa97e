"""keel's MCP client (SPEC section 10): servers from ``.mcp.json``, settings and ``--mcp-config``,
their tools as ``mcp__<server>__<tool>``, resources (``@server:uri`` mentions, ListMcpResources,
ReadMcpResource) and prompts (``/mcp__<server>__<prompt>``).

This module is light: it reads the configuration and builds the session's extension only when
at least one server is configured; the ``mcp`` package is imported when a server starts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from agentkeel.core.extensions import Extension, PromptInfo, PromptVerdict
from agentkeel.core.tools import Services, ToolRegistry
from agentkeel.mcp.config import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_MAX_OUTPUT_TOKENS,
    DEFAULT_TOOL_TIMEOUT_S,
    ServerConfig,
    discover,
    env_int,
    env_seconds,
)

if TYPE_CHECKING:
    from agentkeel.mcp.pool import McpPool

__all__ = ["McpSetup", "ServerConfig", "mcp_extension", "mcp_pool"]

_MENTION = re.compile(r"(?:(?<=\s)|^)@([A-Za-z0-9_-]+):(\S+)")


class McpSetup(msgspec.Struct):
    """What the session's MCP servers are found from (the runtime fills it in)."""

    cwd: Path
    home: Path
    keel_home: Path
    env: Mapping[str, str]
    trusted: bool
    layers: Iterable[tuple[str, str, Mapping[str, Any]]] = ()  # (path, scope, data) of each settings layer
    cli: list[str] = msgspec.field(default_factory=list)  # --mcp-config values
    strict: bool = False  # --strict-mcp-config
    project: bool = True  # False: no server of .mcp.json this session
    plugins: list[Path] = msgspec.field(default_factory=list)  # the session's plugin folders (their MCP servers)
    services: Services = msgspec.field(default_factory=Services)
    warn: Callable[[str], None] = lambda _m: None  # a one-line warning shown at start
    notify: Callable[[str], None] = lambda _m: None  # a one-line warning shown now (later failures)


def mcp_pool(services: Services) -> McpPool | None:
    """The session's MCP servers, if it has any."""
    from agentkeel.mcp.pool import McpPool

    return services.find(McpPool)


def mcp_extension(setup: McpSetup) -> Extension | None:
    """The ``mcp`` extension, or None when no server is configured (nothing of MCP is loaded then)."""
    found = discover(
        cwd=setup.cwd,
        home=setup.home,
        layers=setup.layers,
        env=setup.env,
        trusted=setup.trusted,
        cli=setup.cli,
        strict=setup.strict,
        project=setup.project,
        plugins=setup.plugins,
    )
    for line in [*found.errors, *found.skipped]:
        setup.warn(line)
    if not found.servers:
        return None
    from agentkeel.mcp.pool import McpPool

    pool = McpPool(
        found.servers,
        env=setup.env,
        cwd=setup.cwd,
        connect_timeout_s=env_seconds(setup.env, "MCP_TIMEOUT", DEFAULT_CONNECT_TIMEOUT_S),
        tool_timeout_s=env_seconds(setup.env, "MCP_TOOL_TIMEOUT", DEFAULT_TOOL_TIMEOUT_S),
        max_output_tokens=env_int(setup.env, "MAX_MCP_OUTPUT_TOKENS", DEFAULT_MAX_OUTPUT_TOKENS),
        log_dir=setup.keel_home / "logs",
        notify=setup.notify,
    )
    setup.services.put(McpPool, pool)
    services = setup.services

    async def start() -> None:
        for line in await pool.start(services.find(ToolRegistry)):
            setup.warn(line)

    async def on_prompt(info: PromptInfo) -> PromptVerdict | None:
        blocks = await mention_context(pool, info.text)
        return PromptVerdict(context=tuple(blocks)) if blocks else None

    # each server has its own MCP_TIMEOUT, measured from start(): the runtime's cap is not ours
    limit = max(c.connect_timeout_s for c in pool.connections.values()) + 5
    return Extension("mcp", start=start, start_timeout_s=limit, on_prompt=on_prompt, close=pool.aclose)


async def mention_context(pool: McpPool, text: str) -> list[str]:
    """``@server:uri`` in a prompt: the resource's contents, as context after the prompt."""
    out: list[str] = []
    seen: set[tuple[str, str]] = set()
    for m in _MENTION.finditer(text):
        server, uri = m.group(1), m.group(2).rstrip(".,;:!?)")
        if server not in pool.connections or (server, uri) in seen:
            continue
        seen.add((server, uri))
        output = await pool.read_resource(server, uri)
        body = output.text()
        if output.is_error:
            out.append(f"(could not read @{server}:{uri}: {body})")
        else:
            out.append(f'<mcp-resource server="{server}" uri="{uri}">\n{body}\n</mcp-resource>')
    return out
