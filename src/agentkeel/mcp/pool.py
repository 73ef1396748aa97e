"""The session's MCP servers, a service (``services.find(McpPool)``): parallel start-up, the
session's tool list kept in step with what each server offers, calls, resources and prompts."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkeel.core.tools import Tool, ToolOutput, ToolRegistry
from agentkeel.core.types import ImageBlock, TextBlock
from agentkeel.mcp.client import Connection, ConnectionLost, Elicit, one_line
from agentkeel.mcp.config import ServerConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PromptCommand:
    """An MCP prompt as a slash command ``/mcp__<server>__<prompt> [args...]``: ``run`` returns the
    text to send to the model (the prompt's messages, joined)."""

    name: str
    description: str
    arguments: tuple[str, ...]
    run: Callable[[str], Any]  # async (args: str) -> str


class McpPool:
    def __init__(
        self,
        servers: Mapping[str, ServerConfig],
        *,
        env: Mapping[str, str],
        cwd: Path,
        connect_timeout_s: float,
        tool_timeout_s: float,
        max_output_tokens: int,
        log_dir: Path | None = None,
        notify: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.max_output_tokens = max_output_tokens
        self.registry: ToolRegistry | None = None
        self.notify = notify
        self._registered: set[str] = set()
        self._started = False
        self.connections: dict[str, Connection] = {
            name: Connection(
                config,
                connect_timeout_s=connect_timeout_s,
                tool_timeout_s=config.tool_timeout_s or tool_timeout_s,
                env=env,
                cwd=cwd,
                log_dir=log_dir,
                on_change=self._changed,
                notice=lambda message: self.notify(message),
            )
            for name, config in servers.items()
        }
        self._base_tools: list[Tool] = []
        # the last progress notification of each server's current or last call: (tool, progress, total, message)
        self.progress: dict[str, tuple[str, float, float | None, str | None]] = {}

    def set_elicitation(self, handler: Elicit | None) -> None:
        """A front end that can ask the user answers servers' elicitations through ``handler``;
        without one (headless) they are refused with a clear message."""
        for conn in self.connections.values():
            conn.elicit = handler

    # --- start and stop -----------------------------------------------------------------

    async def start(self, registry: ToolRegistry | None) -> list[str]:
        """Start every server at once and wait for each up to its own timeout. Returns one line
        per server that failed. Each server's tools join ``registry`` the moment it connects, so
        one that comes up after this returns (or after the caller gave up waiting) is in the next
        request; a failure after this returns is told through ``notify``."""
        from agentkeel.mcp.tools import resource_tools

        self.registry = registry
        self._base_tools = resource_tools(self)
        try:
            for conn in self.connections.values():
                conn.start()
            await asyncio.gather(*(c.wait_ready() for c in self.connections.values()))
            self.sync()
            return [
                f"MCP server '{c.name}' failed: {c.error}" for c in self.connections.values() if c.status == "failed"
            ]
        finally:
            self._started = True

    async def aclose(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.connections.values()), return_exceptions=True)

    def _changed(self, conn: Connection) -> None:
        self.sync()
        if self._started and conn.status == "failed" and conn.error != "stopped":
            self.notify(f"MCP server '{conn.name}' failed: {conn.error}")

    def sync(self) -> None:
        """Make the session's tool list match the connected servers' tools (the next request sees it)."""
        if self.registry is None:
            return
        from agentkeel.mcp.tools import mcp_tool

        wanted: dict[str, Tool] = {}
        for conn in self.connections.values():
            if conn.status not in ("connected", "failed"):
                continue
            for spec in conn.tools:
                tool = mcp_tool(self, conn, spec)
                wanted[tool.name] = tool
        if any(c.resources for c in self.connections.values() if c.status == "connected"):
            wanted.update({t.name: t for t in self._base_tools})
        for name in self._registered - wanted.keys():
            self.registry.unregister(name)
        for name, tool in wanted.items():
            current = self.registry.get(name)
            if current is None or current.input_schema != tool.input_schema or current.description != tool.description:
                self.registry.register(tool)
        self._registered = set(wanted)

    # --- calls ----------------------------------------------------------------------------

    def get(self, server: str) -> Connection:
        conn = self.connections.get(server)
        if conn is None:
            known = ", ".join(self.connections) or "none"
            raise ConnectionLost(f"no MCP server named '{server}' (configured: {known})")
        return conn

    async def call(self, server: str, tool: str, arguments: dict[str, Any], save_to: Path | None = None) -> ToolOutput:
        from mcp.shared.exceptions import MCPError
        from mcp_types import REQUEST_TIMEOUT

        from agentkeel.mcp.tools import convert

        try:

            async def progress(done: float, total: float | None, message: str | None) -> None:
                self.progress[server] = (tool, done, total, message)
                log.debug("MCP server %s: %s progress %s/%s %s", server, tool, done, total, message or "")

            result = await self.get(server).call_tool(tool, arguments, progress)
        except ConnectionLost as e:
            return ToolOutput(str(e), is_error=True)
        except MCPError as e:
            if e.code == REQUEST_TIMEOUT:
                limit = self.get(server).tool_timeout_s
                return ToolOutput(
                    f"MCP server '{server}': {tool} did not answer within {limit:g}s (MCP_TOOL_TIMEOUT)", is_error=True
                )
            return ToolOutput(f"MCP server '{server}' error: {e.message}", is_error=True)
        except TimeoutError:
            limit = self.get(server).tool_timeout_s
            return ToolOutput(
                f"MCP server '{server}': {tool} did not answer within {limit:g}s (MCP_TOOL_TIMEOUT)", is_error=True
            )
        return convert(result, self.max_output_tokens, save_to, server)

    def list_resources(self, server: str | None = None) -> list[dict[str, Any]]:
        out = []
        for conn in self.connections.values():
            if server is not None and conn.name != server:
                continue
            for r in conn.resources:
                item = {"server": conn.name, "uri": str(r.uri), "name": r.name}
                if r.mime_type:
                    item["mimeType"] = r.mime_type
                if r.description:
                    item["description"] = r.description
                out.append(item)
        return out

    async def read_resource(self, server: str, uri: str, save_to: Path | None = None) -> ToolOutput:
        from mcp.shared.exceptions import MCPError

        from agentkeel.mcp.tools import CHARS_PER_TOKEN, TRUNCATION_NOTE, _contents_text, save_large

        try:
            session = await self.get(server).ready_session()
            result = await session.read_resource(uri)
        except ConnectionLost as e:
            return ToolOutput(str(e), is_error=True)
        except MCPError as e:
            return ToolOutput(f"MCP server '{server}' error reading {uri}: {e.message}", is_error=True)
        except Exception as e:
            return ToolOutput(f"MCP server '{server}': reading {uri} failed: {one_line(e)}", is_error=True)
        blocks: list[TextBlock | ImageBlock] = []
        for index, contents in enumerate(result.contents):
            blob = getattr(contents, "blob", None)
            mime = contents.mime_type or ""
            if isinstance(blob, str) and mime.startswith("image/"):
                blocks.append(ImageBlock(media_type=mime, data=blob))
            else:
                blocks.append(TextBlock(text=_contents_text(contents, save_to, index, server)))
        text = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
        budget = self.max_output_tokens * CHARS_PER_TOKEN
        if len(text) > budget:
            saved = save_large(save_to, text, self.max_output_tokens)
            if saved is not None:
                return ToolOutput(saved)
            return ToolOutput(text[:budget] + "\n\n" + TRUNCATION_NOTE.format(limit=self.max_output_tokens))
        images = [b for b in blocks if isinstance(b, ImageBlock)]
        return ToolOutput([*([TextBlock(text=text)] if text else []), *images] if images else text)

    # --- prompts ----------------------------------------------------------------------------

    def prompt_commands(self) -> list[PromptCommand]:
        """Every connected server's prompts, as slash commands for the command registry."""
        from agentkeel.mcp.tools import tool_name

        out = []
        for conn in self.connections.values():
            if conn.status != "connected":
                continue
            for prompt in conn.prompts:
                names = tuple(a.name for a in prompt.arguments or ())
                out.append(
                    PromptCommand(
                        name=tool_name(conn.name, prompt.name),
                        description=prompt.description or f"MCP prompt {prompt.name} of {conn.name}",
                        arguments=names,
                        run=self._prompt_runner(conn.name, prompt.name, names),
                    )
                )
        return out

    def _prompt_runner(self, server: str, prompt: str, names: tuple[str, ...]) -> Callable[[str], Any]:
        async def run(args: str) -> str:
            words = args.split()
            values = dict(zip(names, words[: len(names)], strict=False))
            if len(words) > len(names) and names:  # the rest belongs to the last argument
                values[names[-1]] = " ".join(words[len(names) - 1 :])
            session = await self.get(server).ready_session()
            result = await session.get_prompt(prompt, arguments=values or None)
            parts = []
            for message in result.messages:
                content = message.content
                text = getattr(content, "text", None)
                if isinstance(text, str):
                    parts.append(text)
                elif getattr(content, "type", "") == "resource":
                    from agentkeel.mcp.tools import _contents_text

                    parts.append(_contents_text(content.resource))  # type: ignore[union-attr]
            return "\n\n".join(parts)

        return run

    def status_lines(self) -> list[str]:
        lines = []
        for conn in self.connections.values():
            c = conn.config
            detail = {
                "connected": f"connected, {len(conn.tools)} tools"
                + (f", {len(conn.resources)} resources" if conn.resources else "")
                + (f", {len(conn.prompts)} prompts" if conn.prompts else ""),
                "failed": f"failed: {conn.error}",
                "pending": "stopped" if conn.error == "stopped" else "connecting",
                "disabled": "disabled",
            }[conn.status]
            lines.append(f"{conn.name} ({c.scope}, {c.transport}): {detail}")
        return lines

    def status(self) -> list[dict[str, Any]]:
        """Claude Code's ``mcp_servers`` entries (name, status) for ``system/init`` and ``mcp_status``."""
        names = {"connected": "connected", "failed": "failed", "pending": "pending", "disabled": "disabled"}
        return [{"name": c.name, "status": names[c.status]} for c in self.connections.values()]
