"""MCP tools as keel tools (``mcp__<server>__<tool>``), their results, and the resource tools."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from agentkeel.core.tools import Tool, ToolContext, ToolError, ToolOutput
from agentkeel.core.types import ImageBlock, TextBlock

if TYPE_CHECKING:
    import mcp_types as types
    from pydantic import BaseModel

    from agentkeel.mcp.client import Connection


class McpCalls(Protocol):
    """What the tools need of the pool (kept apart so the two modules do not import each other)."""

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> ToolOutput: ...

    def list_resources(self, server: str | None = None) -> list[dict[str, Any]]: ...

    async def read_resource(self, server: str, uri: str) -> ToolOutput: ...


CHARS_PER_TOKEN = 4  # the estimate Claude Code uses for MCP output
TRUNCATION_NOTE = (
    "[OUTPUT TRUNCATED - exceeded {limit} token limit]\n\n"
    "The tool output was truncated. If this MCP server provides pagination or filtering tools, use them to "
    "retrieve specific portions of the data. If pagination is not available, inform the user that you are "
    "returning truncated data."
)
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


MAX_NAME = 64  # the model APIs refuse longer tool names (and with them the whole request)


def tool_name(server: str, tool: str) -> str:
    """Claude Code's name: ``mcp__<server>__<tool>``, characters outside [A-Za-z0-9_-] as '_';
    a name over 64 characters is cut and given a short hash of the whole, so it stays unique."""
    name = f"mcp__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"
    if len(name) <= MAX_NAME:
        return name
    import hashlib

    return name[: MAX_NAME - 9] + "_" + hashlib.sha256(name.encode()).hexdigest()[:8]


@cache
def passthrough_model() -> type[BaseModel]:
    """Any JSON object: an MCP tool's input is checked against the server's own JSON Schema."""
    from pydantic import BaseModel, ConfigDict

    class McpInput(BaseModel):
        model_config = ConfigDict(extra="allow")

    return McpInput


class SchemaCheck:
    """A tool's JSON Schema, compiled at its first use; a broken schema checks nothing (the server judges)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self._validator: Any = None
        self._broken = False

    def error(self, value: dict[str, Any]) -> str:
        if self._broken:
            return ""
        if self._validator is None:
            from jsonschema import validators
            from jsonschema.exceptions import SchemaError

            try:
                cls = validators.validator_for(self.schema)
                cls.check_schema(self.schema)
            except SchemaError:
                self._broken = True
                return ""
            self._validator = cls(self.schema)
        error = next(iter(sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))), None)
        if error is None:
            return ""
        where = ".".join(str(p) for p in error.path) or "input"
        return f"{where}: {error.message}"


def mcp_tool(pool: McpCalls, conn: Connection, spec: types.Tool) -> Tool:
    from agentkeel.policy.permissions.rules import register_mcp_tool

    name = register_mcp_tool(conn.name, spec.name)  # rules match its server and tool, not the name's text
    schema = dict(spec.input_schema) if spec.input_schema else {"type": "object", "properties": {}}
    server, remote = conn.name, spec.name
    check = SchemaCheck(schema)

    async def run(args: Any, ctx: ToolContext) -> ToolOutput:
        arguments = args.model_dump() if hasattr(args, "model_dump") else dict(args)
        problem = check.error(arguments)
        if problem:
            raise ToolError(f"Invalid input for {name}: {problem}")
        return await pool.call(server, remote, arguments)

    hints = spec.annotations
    read_only = bool(hints and hints.read_only_hint)
    description = (spec.description or spec.title or spec.name).strip()
    return Tool(
        name=name,
        description=f"{description} (MCP server {server})"[:2048],
        input_model=passthrough_model(),
        run=run,
        group="custom",
        read_only=read_only,
        concurrency_safe=read_only,
        destructive=bool(hints and hints.destructive_hint),
        is_external=True,
        # a call may reconnect first (MCP_TIMEOUT); the call's own timeout then answers, naming the server
        timeout_s=conn.connect_timeout_s + conn.tool_timeout_s + 5,
        source="mcp",
        raw_schema=schema,
    )


def convert(result: types.CallToolResult, max_tokens: int) -> ToolOutput:
    """An MCP tool result as a keel tool output, cut at ``max_tokens`` with Claude Code's note."""
    blocks: list[TextBlock | ImageBlock] = []
    for item in result.content:
        kind = getattr(item, "type", "")
        if kind == "text":
            blocks.append(TextBlock(text=item.text))  # type: ignore[union-attr]
        elif kind == "image":
            blocks.append(ImageBlock(media_type=str(item.mime_type), data=str(item.data)))  # type: ignore[union-attr]
        elif kind == "audio":
            blocks.append(TextBlock(text=f"[audio {item.mime_type}, {len(item.data)} base64 characters omitted]"))  # type: ignore[union-attr]
        elif kind == "resource":
            blocks.append(TextBlock(text=_contents_text(item.resource)))  # type: ignore[union-attr]
        elif kind == "resource_link":
            blocks.append(TextBlock(text=f"[resource {item.uri}: {item.name}]"))  # type: ignore[union-attr]
    if not blocks and result.structured_content is not None:
        blocks.append(TextBlock(text=json.dumps(result.structured_content, ensure_ascii=False)))
    truncated, kept = _truncate(blocks, max_tokens)
    meta: dict[str, Any] = {"truncated": True} if truncated else {}
    if len(kept) == 1 and isinstance(kept[0], TextBlock):
        return ToolOutput(kept[0].text, is_error=result.is_error, metadata=meta)
    return ToolOutput(kept or "(no content)", is_error=result.is_error, metadata=meta)


def _contents_text(contents: Any) -> str:
    text = getattr(contents, "text", None)
    if isinstance(text, str):
        return text
    blob = getattr(contents, "blob", "")
    return f"[binary resource {contents.uri} ({contents.mime_type or 'unknown type'}), {len(blob)} base64 characters]"


def _truncate(blocks: list[TextBlock | ImageBlock], max_tokens: int) -> tuple[bool, list[TextBlock | ImageBlock]]:
    budget = max_tokens * CHARS_PER_TOKEN
    total = sum(len(b.text) if isinstance(b, TextBlock) else len(b.data) // 8 for b in blocks)
    if total <= budget:
        return False, blocks
    out: list[TextBlock | ImageBlock] = []
    left = budget
    for block in blocks:
        if isinstance(block, ImageBlock):
            cost = len(block.data) // 8
            if cost <= left:
                out.append(block)
                left -= cost
            continue
        if left <= 0:
            break
        out.append(TextBlock(text=block.text[:left]))
        left -= len(block.text)
    out.append(TextBlock(text="\n\n" + TRUNCATION_NOTE.format(limit=max_tokens)))
    if all(isinstance(b, TextBlock) for b in out):
        return True, [TextBlock(text="".join(b.text for b in out if isinstance(b, TextBlock)))]
    return True, out


LIST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"server": {"type": "string", "description": "only this server's resources (optional)"}},
}
READ_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "server": {"type": "string", "description": "the MCP server's name"},
        "uri": {"type": "string", "description": "the resource URI, as ListMcpResources shows it"},
    },
    "required": ["server", "uri"],
}


def resource_tools(pool: McpCalls) -> list[Tool]:
    list_check, read_check = SchemaCheck(LIST_SCHEMA), SchemaCheck(READ_SCHEMA)

    async def list_run(args: Any, ctx: ToolContext) -> ToolOutput:
        data = args.model_dump()
        problem = list_check.error(data)
        if problem:
            raise ToolError(f"Invalid input for ListMcpResources: {problem}")
        return ToolOutput(json.dumps(pool.list_resources(data.get("server")), ensure_ascii=False, indent=1))

    async def read_run(args: Any, ctx: ToolContext) -> ToolOutput:
        data = args.model_dump()
        problem = read_check.error(data)
        if problem:
            raise ToolError(f"Invalid input for ReadMcpResource: {problem}")
        return await pool.read_resource(data["server"], data["uri"])

    common: dict[str, Any] = {"input_model": passthrough_model(), "group": "custom", "source": "mcp"}
    return [
        Tool(
            name="ListMcpResources",
            description="List the resources (files, records, documents) the connected MCP servers offer.",
            run=list_run,
            read_only=True,
            raw_schema=LIST_SCHEMA,
            **common,
        ),
        Tool(
            name="ReadMcpResource",
            description="Read one resource of an MCP server by its URI.",
            run=read_run,
            read_only=True,
            raw_schema=READ_SCHEMA,
            **common,
        ),
    ]
