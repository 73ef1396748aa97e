"""Large and binary MCP results are saved whole to a file the model can read (#34 item 11).

Oracle run (2026-11-28) with the server below and a scripted model calling its tools:
``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d)
CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 MAX_MCP_OUTPUT_TOKENS=5000 claude -p go --mcp-config CONFIG
--allowedTools mcp__big__long_text,mcp__big__binary``. Claude Code 2.1.328 answered "Error: result (202,164
characters) exceeds maximum allowed tokens. Output has been saved to <session>/tool-results/....txt." (it saved
the structuredContent, "Format: JSON with schema: {result: string}"; keel saves the text content) and
"[Resource from big at bin://payload] Binary content (application/octet-stream, 10KB) saved to ....bin"."""

from __future__ import annotations

import base64
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

PAYLOAD = bytes(range(256)) * 40  # 10 KiB of every byte value

SERVER = '''
import base64, sys
import mcp_types as types
from mcp.server.mcpserver import MCPServer

PAYLOAD = bytes(range(256)) * 40
server = MCPServer("big")


@server.tool()
def long_text() -> str:
    """200,000 characters, numbered lines, a marker at the very end."""
    lines = [f"line {i:06d} " + "y" * 80 for i in range(2200)]
    return "\\n".join(lines)[:199_986] + "\\nEND-OF-OUTPUT"


@server.tool()
def binary() -> list[types.EmbeddedResource]:
    """A binary resource embedded in the result."""
    blob = types.BlobResourceContents(
        uri="bin://payload", mime_type="application/octet-stream", blob=base64.b64encode(PAYLOAD).decode()
    )
    return [types.EmbeddedResource(type="resource", resource=blob)]


@server.resource("bin://payload", mime_type="application/octet-stream")
def payload() -> bytes:
    """Ten KiB of bytes."""
    return PAYLOAD


server.run("stdio")
'''


def _results(messages: list[dict[str, Any]]) -> dict[str, str]:
    out = {}
    for m in messages:
        if m["role"] != "user" or isinstance(m["content"], str):
            continue
        for block in m["content"]:
            if block.get("type") == "tool_result":
                content = block["content"]
                out[block["tool_use_id"]] = (
                    content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
                )
    return out


@pytest.mark.timeout(300)
def test_large_text_and_binary_content_are_saved_whole(
    fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun], tmp_path: Path
) -> None:
    script = tmp_path / "big_server.py"
    script.write_text(SERVER)
    server = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "mcp__big__long_text", "input": {}}]},
                {"tool_calls": [{"name": "mcp__big__binary", "input": {}}]},
                {"tool_calls": [{"name": "ReadMcpResourceTool", "input": {"server": "big", "uri": "bin://payload"}}]},
                "done",
            ]
        }
    )
    config = {"mcpServers": {"big": {"command": sys.executable, "args": [str(script)]}}}
    run = keel(
        "-p", "go", "--permission-mode", "bypassPermissions", "--mcp-config", json.dumps(config),
        env={**wire_env(server, "anthropic"), "MCP_TIMEOUT": "60000", "MAX_MCP_OUTPUT_TOKENS": "5000"},
        timeout=240,
    )  # fmt: skip
    assert run.code == 0, run.stderr
    requests = server.cursor.requests
    # 200,000 characters over a 5,000-token budget: all of it in a file, the model told where
    text = _results(requests[1]["body"]["messages"])["toolu_000_0"]
    found = re.search(r"^Error: result \(200,000 characters across [\d,]+ lines\) exceeds maximum allowed tokens\. "
                      r"Output has been saved to (\S+\.txt)\.$", text, re.M)  # fmt: skip
    assert found, text
    saved = Path(found.group(1))
    assert saved.parent.name == "tool-results"
    whole = saved.read_text()
    assert len(whole) == 200_000 and whole.endswith("END-OF-OUTPUT") and whole.startswith("line 000000 ")
    assert len(text) < 2000
    # a blob in a tool result and a blob resource: the bytes, in files named in the result
    for step, tool_id in ((2, "toolu_001_0"), (3, "toolu_002_0")):
        said = _results(requests[step]["body"]["messages"])[tool_id]
        match = re.search(
            r"^\[Resource from big at bin://payload\] "
            r"Binary content \(application/octet-stream, 10KB\) saved to (\S+)$",
            said,
        )
        assert match, said
        assert Path(match.group(1)).read_bytes() == PAYLOAD
    assert base64.b64encode(PAYLOAD).decode()[:40] not in json.dumps(requests[3]["body"])
