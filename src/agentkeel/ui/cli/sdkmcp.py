"""Tools of SDK-hosted MCP servers (``{"type": "sdk"}`` in ``--mcp-config``): the server lives in
the client's process and speaks JSON-RPC inside ``mcp_message`` control requests. Each of its
tools becomes ``mcp__<server>__<tool>`` with the server's own JSON Schema; a call is a
``tools/call`` over the control channel."""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from agentkeel import Runtime
from agentkeel._version import __version__
from agentkeel.core.tools import Tool, ToolContext, ToolError, ToolOutput
from agentkeel.protocol import control

Request = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
_ids = itertools.count(1)
PROTOCOL_VERSION = "2025-06-18"


def initialize_servers(init: dict[str, Any], mcp_config: list[str]) -> list[str]:
    """The SDK-hosted servers an ``initialize`` request names (``sdkMcpServers``: the TypeScript
    SDK's way; the Python SDK passes ``{"type": "sdk"}`` in ``--mcp-config`` instead). The servers
    keel runs itself that it names (``mcpServers``: the TypeScript SDK's ``mcpServersDelivery:
    "initialize"``, which keeps their env and headers off the command line) join ``mcp_config``."""
    names = init.get("sdkMcpServers")
    if names is None:
        names = []
    if not (isinstance(names, list) and all(isinstance(n, str) and n for n in names)):
        raise control.ControlError("initialize: 'sdkMcpServers' must be a list of server names")
    servers = init.get("mcpServers")
    if servers is not None:
        if not isinstance(servers, dict):
            raise control.ControlError("initialize: 'mcpServers' must be an object of name -> server")
        sdk, rest = control.sdk_servers({"mcpServers": servers})
        names = [*names, *(n for n in sdk if n not in names)]
        if rest:
            mcp_config.append(json.dumps({"mcpServers": rest}))
    return list(names)


async def rpc(request: Request, server: str, method: str, params: dict[str, Any] | None = None) -> Any:
    """One JSON-RPC request to an SDK server; a JSON-RPC error raises ToolError with its message."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(_ids), "method": method}
    if params is not None:
        message["params"] = params
    body = await request(control.mcp_message(server, message))
    reply = body.get("mcp_response")
    if not isinstance(reply, dict):
        raise ToolError(f"MCP server {server}: no mcp_response in the answer to {method}")
    if "error" in reply:
        err = reply["error"]
        raise ToolError(f"MCP server {server}: {err.get('message', err) if isinstance(err, dict) else err}")
    return reply.get("result", {})


async def register_sdk_servers(rt: Runtime, servers: list[str], request: Request) -> dict[str, list[str]]:
    """Initialize each server, list its tools and register them; returns server -> tool names.
    A server that fails is reported as a warning notice and left out (fail open: it only adds tools)."""
    found: dict[str, list[str]] = {}
    for server in servers:
        try:
            await rpc(
                request,
                server,
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "keel", "version": __version__},
                },
            )
            await request(control.mcp_message(server, {"jsonrpc": "2.0", "method": "notifications/initialized"}))
            listed = await rpc(request, server, "tools/list", {})
        except (ToolError, control.ControlError) as e:
            rt.settings.warnings.append(f"SDK MCP server {server} could not be started: {e}")
            continue
        names = []
        for spec in listed.get("tools", []) if isinstance(listed, dict) else []:
            tool = sdk_tool(server, spec, request)
            rt.agent.tools.register(tool)
            names.append(tool.name)
        found[server] = names
    return found


def sdk_tool(server: str, spec: dict[str, Any], request: Request) -> Tool:
    from agentkeel.ui.sdk.tools import FreeInput, mcp_output

    name = str(spec.get("name", ""))
    schema = spec.get("inputSchema") if isinstance(spec.get("inputSchema"), dict) else {"type": "object"}
    annotations = spec.get("annotations") or {}

    async def run(args: Any, ctx: ToolContext) -> ToolOutput:
        result = await rpc(request, server, "tools/call", {"name": name, "arguments": args.model_dump()})
        return mcp_output(result)

    return Tool(
        name=f"mcp__{server}__{name}",
        description=str(spec.get("description") or name),
        input_model=FreeInput,
        run=run,
        read_only=bool(annotations.get("readOnlyHint", False)),
        is_external=True,
        source="mcp",
        raw_schema=schema,
    )


def sdk_elicitation(request: Request) -> Any:
    """MCP servers' ``elicitation/create`` asked of the SDK host, as Claude Code 2.1.328 asks it: an
    ``elicitation`` control request (``mcp_server_name``, ``message``, ``mode``, and ``requested_schema``
    with its ``property_order``, or ``url`` and ``elicitation_id``); the host's ``{action, content}``
    is the server's answer. A host that cannot answer (the Python SDK has no handler and answers
    with an error) cancels it, as Claude Code does."""
    from mcp_types import ElicitResult

    async def elicit(server: str, params: Any) -> Any:
        body: dict[str, Any] = {"subtype": "elicitation", "mcp_server_name": server, "message": params.message}
        if getattr(params, "mode", "form") == "url":
            body.update({"mode": "url", "url": params.url, "elicitation_id": params.elicitation_id})
        else:
            given = params.requested_schema
            schema = given.model_dump(by_alias=True, exclude_none=True) if hasattr(given, "model_dump") else dict(given)
            body.update({"mode": "form", "requested_schema": schema})
            if isinstance(schema.get("properties"), dict):
                body["property_order"] = list(schema["properties"])
        try:
            answer = await request(body)
        except control.ControlError:
            return ElicitResult(action="cancel")
        action = answer.get("action")
        if action not in ("accept", "decline", "cancel"):
            return ElicitResult(action="cancel")
        content = answer.get("content") if action == "accept" and isinstance(answer.get("content"), dict) else None
        return ElicitResult(action=action, content=content)

    return elicit


def attach_elicitation(rt: Runtime, request: Request) -> None:
    """The session's MCP servers elicit through the SDK host (a session without MCP servers: nothing)."""
    from agentkeel.mcp import mcp_pool

    pool = mcp_pool(rt.agent.services)
    if pool is not None:
        pool.set_elicitation(sdk_elicitation(request))
