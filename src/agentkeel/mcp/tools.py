"""MCP tools as keel tools (``mcp__<server>__<tool>``), their results, and the resource tools."""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import os
import re
import uuid
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentkeel.core.tools import Tool, ToolContext, ToolError, ToolOutput
from agentkeel.core.types import ImageBlock, TextBlock
from agentkeel.tools import MCP_LIST, MCP_READ

if TYPE_CHECKING:
    import mcp_types as types
    from pydantic import BaseModel

    from agentkeel.mcp.client import Connection


class McpCalls(Protocol):
    """What the tools need of the pool (kept apart so the two modules do not import each other)."""

    async def call(
        self, server: str, tool: str, arguments: dict[str, Any], save_to: Path | None = None
    ) -> ToolOutput: ...

    def list_resources(self, server: str | None = None) -> list[dict[str, Any]]: ...

    async def read_resource(self, server: str, uri: str, save_to: Path | None = None) -> ToolOutput: ...


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
        return await pool.call(server, remote, arguments, save_to=save_stem(ctx))

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


def save_stem(ctx: ToolContext) -> Path | None:
    """Where a call's large or binary MCP output is saved (``<session>/tool-results/<tool_use_id>``),
    or None when the session has no such place (the output is then cut, as before)."""
    if ctx.scratch_dir is None:
        return None
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", ctx.tool_use_id) or f"mcp-{uuid.uuid4().hex[:12]}"
    return ctx.scratch_dir / safe


def _write(stem: Path, suffix: str, data: bytes) -> Path:
    stem.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # private, as the transcript it belongs to
    path = stem.with_name(stem.name + suffix)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with open(fd, "wb") as f:
        f.write(data)
    return path


def _size(n: int) -> str:
    """Claude Code's byte sizes: ``512 bytes``, ``10KB``, ``1.5MB``."""
    if n < 1024:
        return f"{n} bytes"
    value, unit = (n / 1024, "KB") if n < 1024 * 1024 else (n / 1024 / 1024, "MB")
    return f"{value:.1f}".removesuffix(".0") + unit


def save_binary(stem: Path | None, index: int, mime: str | None, data: str, what: str) -> str:
    """Base64 content the model cannot see, as Claude Code has it: the bytes in a file, and a line naming it."""
    if stem is None:
        return f"[{what} ({mime or 'unknown type'}), {len(data)} base64 characters]"
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{what} ({mime or 'unknown type'}): the server sent invalid base64, not saved]"
    ext = (mimetypes.guess_extension((mime or "").split(";")[0].strip()) or ".bin") if mime else ".bin"
    try:
        path = _write(stem, f"-{index}{ext}", raw)
    except OSError as e:
        kind = mime or "unknown type"
        return f"Binary content ({kind}, {len(raw)} bytes) could not be saved to disk: {e.strerror or e}"
    return f"Binary content ({mime or 'unknown type'}, {_size(len(raw))}) saved to {path}"


def save_large(stem: Path | None, text: str, max_tokens: int, is_json: bool = False) -> str | None:
    """Text over the budget saved whole, with Claude Code's wording (2.1.328: "Error: result (N characters)
    exceeds maximum allowed tokens. Output has been saved to PATH."); None when it could not be saved."""
    if stem is None:
        return None
    try:
        path = _write(stem, ".json" if is_json else ".txt", text.encode("utf-8", "surrogatepass"))
    except OSError:
        return None
    lines = text.splitlines() or [""]
    longest = max(len(line) for line in lines)
    size = f"{len(text):,} characters" + (f" across {len(lines):,} lines" if len(lines) > 1 else "")
    if longest <= max_tokens * CHARS_PER_TOKEN // 2 and len(lines) > 1:
        how = (
            "Use offset and limit parameters to read specific portions of the file, search within it for "
            "specific content, and jq to make structured queries."
        )
    else:
        how = (
            "Search within the file for specific content, and use jq if the content is JSON. Its lines are too long "
            "for Read's offset/limit: slice it by character range instead (e.g. python read()[A:B])."
        )
    return (
        f"Error: result ({size}) exceeds maximum allowed tokens. Output has been saved to {path}.\n"
        f"Format: {'JSON' if is_json else 'Plain text'}\n{how}\n"
        "REQUIREMENTS FOR SUMMARIZATION/ANALYSIS/REVIEW: read the whole file in portions before summarizing it, "
        "and quote key findings verbatim."
    )


def convert(result: types.CallToolResult, max_tokens: int, save_to: Path | None = None, server: str = "") -> ToolOutput:
    """An MCP tool result as a keel tool output. Over ``max_tokens``, the whole text is saved under
    ``save_to`` and the model told where (as Claude Code); without a place, it is cut with Claude Code's note.
    Binary content (audio, blob resources) is saved as its bytes, likewise."""
    blocks: list[TextBlock | ImageBlock] = []
    for index, item in enumerate(result.content):
        kind = getattr(item, "type", "")
        if kind == "text":
            blocks.append(TextBlock(text=item.text))  # type: ignore[union-attr]
        elif kind == "image":
            blocks.append(ImageBlock(media_type=str(item.mime_type), data=str(item.data)))  # type: ignore[union-attr]
        elif kind == "audio":
            blocks.append(TextBlock(text=save_binary(save_to, index, item.mime_type, item.data, "audio")))  # type: ignore[union-attr]
        elif kind == "resource":
            blocks.append(TextBlock(text=_contents_text(item.resource, save_to, index, server)))  # type: ignore[union-attr]
        elif kind == "resource_link":
            blocks.append(TextBlock(text=f"[resource {item.uri}: {item.name}]"))  # type: ignore[union-attr]
    structured = False
    if not blocks and result.structured_content is not None:
        blocks.append(TextBlock(text=json.dumps(result.structured_content, ensure_ascii=False)))
        structured = True
    if all(isinstance(b, TextBlock) for b in blocks):
        text = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
        if len(text) > max_tokens * CHARS_PER_TOKEN:
            saved = save_large(save_to, text, max_tokens, is_json=structured)
            if saved is not None:
                return ToolOutput(saved, is_error=result.is_error, metadata={"saved_to": saved_path(saved)})
    truncated, kept = _truncate(blocks, max_tokens)
    meta: dict[str, Any] = {"truncated": True} if truncated else {}
    if len(kept) == 1 and isinstance(kept[0], TextBlock):
        return ToolOutput(kept[0].text, is_error=result.is_error, metadata=meta)
    return ToolOutput(kept or "(no content)", is_error=result.is_error, metadata=meta)


def saved_path(message: str) -> str:
    return message.split("Output has been saved to ", 1)[1].split(".\n", 1)[0]


def _contents_text(contents: Any, save_to: Path | None = None, index: int = 0, server: str = "") -> str:
    text = getattr(contents, "text", None)
    if isinstance(text, str):
        return text
    blob = getattr(contents, "blob", "")
    said = save_binary(save_to, index, contents.mime_type, blob, f"binary resource {contents.uri}")
    # Claude Code 2.1.328: "[Resource from SERVER at URI] Binary content (MIME, SIZE) saved to PATH"
    return f"[Resource from {server} at {contents.uri}] {said}" if server and save_to is not None else said


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
        "uri": {"type": "string", "description": "the resource URI, as ListMcpResourcesTool shows it"},
    },
    "required": ["server", "uri"],
}


def resource_tools(pool: McpCalls) -> list[Tool]:
    list_check, read_check = SchemaCheck(LIST_SCHEMA), SchemaCheck(READ_SCHEMA)

    async def list_run(args: Any, ctx: ToolContext) -> ToolOutput:
        data = args.model_dump()
        problem = list_check.error(data)
        if problem:
            raise ToolError(f"Invalid input for {MCP_LIST}: {problem}")
        return ToolOutput(json.dumps(pool.list_resources(data.get("server")), ensure_ascii=False, indent=1))

    async def read_run(args: Any, ctx: ToolContext) -> ToolOutput:
        data = args.model_dump()
        problem = read_check.error(data)
        if problem:
            raise ToolError(f"Invalid input for {MCP_READ}: {problem}")
        return await pool.read_resource(data["server"], data["uri"], save_to=save_stem(ctx))

    common: dict[str, Any] = {"input_model": passthrough_model(), "group": "custom", "source": "mcp"}
    return [
        Tool(
            name=MCP_LIST,
            description="List the resources (files, records, documents) the connected MCP servers offer.",
            run=list_run,
            read_only=True,
            raw_schema=LIST_SCHEMA,
            **common,
        ),
        Tool(
            name=MCP_READ,
            description="Read one resource of an MCP server by its URI.",
            run=read_run,
            read_only=True,
            raw_schema=READ_SCHEMA,
            **common,
        ),
    ]
