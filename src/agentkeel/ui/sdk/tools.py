"""In-process tools for :mod:`agentkeel.ui.sdk`: ``@tool`` and ``create_sdk_mcp_server``, named and
shaped as in the Claude Agent SDK, so the same definitions serve an in-process session (keel
calls the function directly) and a subprocess one (keel asks over ``mcp_message``)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from agentkeel.core.tools import Tool, ToolContext, ToolError, ToolOutput
from agentkeel.core.types import ImageBlock, TextBlock


class FreeInput(BaseModel):
    """Any JSON object: the schema the model sees is the tool's own (``raw_schema``)."""

    model_config = ConfigDict(extra="allow")


Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class SdkMcpTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler


def tool(name: str, description: str, input_schema: dict[str, Any] | type) -> Callable[[Handler], SdkMcpTool]:
    """``@tool("add", "Add two numbers", {"a": float, "b": float})``: an async function taking the
    arguments dict and returning ``{"content": [{"type": "text", "text": ...}], "isError"?: bool}``."""

    def wrap(fn: Handler) -> SdkMcpTool:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"@tool {name}: the handler must be an async function")
        return SdkMcpTool(name, description, json_schema(input_schema), fn)

    return wrap


_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


def json_schema(spec: dict[str, Any] | type) -> dict[str, Any]:
    """A JSON Schema from the SDK's short form (``{"a": float}``), a JSON Schema, or a pydantic model."""
    if isinstance(spec, type) and issubclass(spec, BaseModel):
        from agentkeel.core.tools import generated_schema

        return generated_schema(spec)
    if isinstance(spec, dict) and spec.get("type") == "object" and "properties" in spec:
        return spec
    if isinstance(spec, dict):
        props = {k: {"type": _TYPES.get(v, "string")} if isinstance(v, type) else v for k, v in spec.items()}
        return {"type": "object", "properties": props, "required": list(props)}
    raise TypeError("input_schema must be a dict or a pydantic model")


@dataclass
class SdkMcpServer:
    """An in-process MCP server: its tools become ``mcp__<name>__<tool>``."""

    name: str
    version: str = "1.0.0"
    tools: list[SdkMcpTool] = field(default_factory=list)

    def keel_tools(self) -> list[Tool]:
        return [_keel_tool(self.name, t) for t in self.tools]

    async def handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """JSON-RPC as keel's stream-json side sends it (``mcp_message``): initialize, tools/list,
        tools/call; notifications get None."""
        method, mid = message.get("method"), message.get("id")
        if mid is None:
            return None
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": message.get("params", {}).get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": self.name, "version": self.version},
            }
        elif method == "tools/list":
            result = {
                "tools": [
                    {"name": t.name, "description": t.description, "inputSchema": t.input_schema} for t in self.tools
                ]
            }
        elif method == "tools/call":
            params = message.get("params", {})
            found = next((t for t in self.tools if t.name == params.get("name")), None)
            if found is None:
                return {
                    "jsonrpc": "2.0",
                    "id": mid,
                    "error": {"code": -32602, "message": f"no tool {params.get('name')}"},
                }
            try:
                result = await found.handler(dict(params.get("arguments") or {}))
            except Exception as e:
                result = {"content": [{"type": "text", "text": f"{type(e).__name__}: {e}"}], "isError": True}
        else:
            return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"method {method} not found"}}
        return {"jsonrpc": "2.0", "id": mid, "result": result}


def create_sdk_mcp_server(name: str, version: str = "1.0.0", tools: list[SdkMcpTool] | None = None) -> dict[str, Any]:
    """The server as an ``mcp_servers`` entry: ``{"type": "sdk", "name": ..., "instance": ...}``."""
    return {"type": "sdk", "name": name, "instance": SdkMcpServer(name, version, list(tools or []))}


def _keel_tool(server: str, spec: SdkMcpTool) -> Tool:
    async def run(args: Any, ctx: ToolContext) -> ToolOutput:
        try:
            result = await spec.handler(args.model_dump())
        except ToolError:
            raise
        except Exception as e:
            return ToolOutput(f"{type(e).__name__}: {e}", is_error=True)
        return mcp_output(result)

    return Tool(
        name=f"mcp__{server}__{spec.name}",
        description=spec.description,
        input_model=FreeInput,
        run=run,
        is_external=True,
        source="mcp",
        raw_schema=spec.input_schema,
    )


def mcp_output(result: Any) -> ToolOutput:
    """An MCP ``CallToolResult`` as a tool output: text and image blocks, ``isError`` kept."""
    if not isinstance(result, dict):
        return ToolOutput(str(result))
    blocks: list[TextBlock | ImageBlock] = []
    for item in result.get("content", []) or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "text":
            blocks.append(TextBlock(text=str(item.get("text", ""))))
        elif item.get("type") == "image":
            blocks.append(ImageBlock(media_type=str(item.get("mimeType", "")), data=str(item.get("data", ""))))
        else:
            blocks.append(TextBlock(text=f"[{item.get('type')} content]"))
    content: str | list[TextBlock | ImageBlock] = blocks
    if all(isinstance(b, TextBlock) for b in blocks):
        content = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
    return ToolOutput(content, is_error=bool(result.get("isError")))
