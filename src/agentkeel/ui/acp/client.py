"""What comes from the ACP client: its prompt blocks (as keel's user message), its MCP servers (as
``--mcp-config``) and its open files (the editor's buffers, through ``fs/*`` requests)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import RequestError, schema

from agentkeel.core.tools import OpenFiles, ToolError
from agentkeel.core.types import ImageBlock, Message, TextBlock

if TYPE_CHECKING:
    from acp.interfaces import Client

log = logging.getLogger("agentkeel.ui.acp")

CLIENT_READ_S = 30.0  # an editor that does not answer fs/read_text_file: the disk is read instead
McpServer = schema.HttpMcpServer | schema.SseMcpServer | schema.AcpMcpServer | schema.McpServerStdio


def invalid(message: str) -> RequestError:
    """Bad input from the client: JSON-RPC's invalid params, with one line saying what is wrong."""
    return RequestError(-32602, message)


class ClientFiles(OpenFiles):
    """The editor's view of the files (its unsaved buffers), when the client offers
    ``fs/read_text_file`` / ``fs/write_text_file``: the file tools read and write text through it.
    A read the client cannot answer falls back to the disk; a write it refuses fails the call."""

    def __init__(self, client: Client, *, read: bool, write: bool) -> None:
        self.client = client
        self.read = read
        self.write = write
        self.session_id = ""  # known once the runtime is built
        self.seen: dict[Path, str] = {}  # the last text read or written through the client, per file
        self.writing: set[asyncio.Future[Any]] = set()  # fs/write_text_file requests sent, not answered

    async def read_text(self, path: Path, line: int | None = None, limit: int | None = None) -> str | None:
        from agentkeel.tools.files import MAX_TEXT_BYTES

        if not self.read or not self.session_id:
            return None
        try:
            response = await asyncio.wait_for(
                self.client.read_text_file(session_id=self.session_id, path=str(path), line=line, limit=limit),
                CLIENT_READ_S,
            )
        except Exception as exc:  # not open, not readable by the editor, or no answer: the disk says why
            log.debug("the client did not read %s: %s", path, exc or type(exc).__name__)
            self.seen.pop(path, None)
            return None
        content = response.content
        if len(content) > MAX_TEXT_BYTES:  # as the disk path refuses a file too large to load
            raise ToolError(f"{path} is open in the editor and too large to load whole; use offset and limit")
        if line is None and limit is None:  # the whole buffer: what an edit's diff starts from
            self.seen[path] = content
        return content

    async def write_text(self, path: Path, text: str) -> bool:
        if not self.write or not self.session_id:
            return False
        # once sent, the editor applies it whatever keel does next: a cancel waits for it to finish
        # (``AcpSession.cancel``), so what keel records is what the editor did
        sent = asyncio.ensure_future(
            self.client.write_text_file(session_id=self.session_id, path=str(path), content=text)
        )
        self.writing.add(sent)
        sent.add_done_callback(self.writing.discard)
        try:
            await asyncio.shield(sent)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise ToolError(f"the editor could not write {path}: {exc}") from None
        self.seen[path] = text
        return True


def to_message(blocks: list[Any]) -> Message:
    """An ACP prompt as keel's user message: text, images, embedded resources (their text in a
    ``<context>`` block, as Claude Code's adapter sends them) and resource links (``@path`` for a
    file, the link otherwise)."""
    content: list[TextBlock | ImageBlock] = []
    context: list[str] = []
    for block in blocks:
        if isinstance(block, schema.TextContentBlock):
            content.append(TextBlock(text=block.text))
        elif isinstance(block, schema.ImageContentBlock):
            content.append(ImageBlock(media_type=block.mime_type, data=block.data))
        elif isinstance(block, schema.ResourceContentBlock):
            uri = block.uri
            content.append(TextBlock(text=f"@{uri[len('file://') :]}" if uri.startswith("file://") else uri))
        elif isinstance(block, schema.EmbeddedResourceContentBlock):
            res = block.resource
            if isinstance(res, schema.TextResourceContents):
                context.append(f'<context ref="{res.uri}">\n{res.text}\n</context>')
            elif isinstance(res, schema.BlobResourceContents) and (res.mime_type or "").startswith("image/"):
                content.append(ImageBlock(media_type=res.mime_type or "image/png", data=res.blob))
            else:
                raise invalid(f"embedded resource {res.uri}: only text and images are supported")
        else:
            raise invalid(f"prompt content of type {getattr(block, 'type', '?')!r} is not supported by keel")
    if context:
        content.append(TextBlock(text="\n".join(context)))
    merged: list[TextBlock | ImageBlock] = []
    for item in content:  # adjacent text blocks as one (a slash command is one text block)
        if merged and isinstance(item, TextBlock) and isinstance(merged[-1], TextBlock):
            merged[-1] = TextBlock(text=f"{merged[-1].text}\n{item.text}")
        else:
            merged.append(item)
    if not merged:
        raise invalid("the prompt is empty")
    return Message(role="user", content=list(merged))


def mcp_config(servers: list[McpServer] | None) -> list[str]:
    """The client's MCP servers as one ``--mcp-config`` JSON value (keel's MCP client starts them)."""
    out: dict[str, dict[str, Any]] = {}
    for server in servers or []:
        if isinstance(server, schema.McpServerStdio):
            env = {e.name: e.value for e in server.env}
            out[server.name] = {"type": "stdio", "command": server.command, "args": list(server.args), "env": env}
        elif isinstance(server, schema.HttpMcpServer | schema.SseMcpServer):
            headers = {h.name: h.value for h in server.headers}
            out[server.name] = {"type": server.type, "url": server.url, "headers": headers}
        else:
            raise invalid(f"MCP server {server.name!r}: the acp transport is not supported; use stdio, http or sse")
    return [json.dumps({"mcpServers": out})] if out else []
