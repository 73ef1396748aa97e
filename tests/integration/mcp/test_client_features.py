"""MCP client features (#34 item 10): roots, progress notifications, elicitation — against a real
server written with the ``mcp`` package's MCPServer (mcp 2.3.0), started by the test over stdio.

Oracle (2026-11-28): ``@modelcontextprotocol/server-everything`` 2026.8.31 from npm with a scripted model
calling get-roots-list, trigger-elicitation-request and trigger-long-running-operation:
``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d)
CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p go --mcp-config CONFIG
--allowedTools mcp__ev__get-roots-list,...``.
Claude Code 2.1.328 gave one root, the working directory's ``file://`` URI without a name; headless it answered
the elicitation ``{"action": "cancel"}``; the long-running operation completed. keel now does the same (and
tells the user in one line why the elicitation was cancelled). With the MCPServer fixture below Claude Code
answered neither roots nor elicitation ("this transport context has no back-channel"); keel answers both."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.mcp.config import parse_server
from agentkeel.mcp.pool import McpPool
from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

SERVER = '''
from pydantic import BaseModel
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("feat")


@server.tool()
async def roots(ctx: Context) -> str:
    """The client's roots."""
    result = await ctx.session.list_roots()
    return "roots: " + " ".join(str(r.uri) for r in result.roots)


@server.tool()
async def steps(ctx: Context) -> str:
    """Reports progress three times."""
    for i in range(1, 4):
        await ctx.report_progress(i, 3, f"step {i}")
    return "stepped"


class Answer(BaseModel):
    name: str


@server.tool()
async def ask(ctx: Context) -> str:
    """Asks the user for a name."""
    try:
        got = await ctx.elicit("What is your name?", Answer)
    except Exception as e:
        return f"elicitation failed: {e}"
    return f"action={got.action} data={getattr(got, 'data', None)}"


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
def test_roots_and_headless_elicitation_through_keel(
    fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun], project: Path, tmp_path: Path
) -> None:
    script = tmp_path / "feat_server.py"
    script.write_text(SERVER)
    server = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "mcp__feat__roots", "input": {}}]},
                {"tool_calls": [{"name": "mcp__feat__ask", "input": {}}]},
                "done",
            ]
        }
    )
    config = {"mcpServers": {"feat": {"command": sys.executable, "args": [str(script)]}}}
    run = keel(
        "-p", "go", "--permission-mode", "bypassPermissions", "--mcp-config", json.dumps(config),
        env={**wire_env(server, "anthropic"), "MCP_TIMEOUT": "60000"},
        timeout=240,
    )  # fmt: skip
    assert run.code == 0, run.stderr
    requests = server.cursor.requests
    assert _results(requests[1]["body"]["messages"])["toolu_000_0"] == f"roots: {project.resolve().as_uri()}"
    # headless: the server gets Claude Code's answer (cancel), the user one line saying why
    assert _results(requests[2]["body"]["messages"])["toolu_001_0"] == "action=cancel data=None"
    told = [line for line in run.stderr.splitlines() if "asked for input" in line]
    assert len(told) == 1 and "MCP server 'feat'" in told[0] and "What is your name?" in told[0], run.stderr
    assert "not interactive" in told[0]


@pytest.mark.timeout(300)
def test_progress_reaches_keel_and_a_front_end_answers_elicitation(tmp_path: Path) -> None:
    script = tmp_path / "feat_server.py"
    script.write_text(SERVER)
    import mcp_types as types

    async def go() -> tuple[str, str, tuple[Any, ...] | None, list[str]]:
        pool = McpPool(
            {"feat": parse_server("feat", {"command": sys.executable, "args": [str(script)]}, "cli", "test", {})},
            env=dict(__import__("os").environ),
            cwd=tmp_path,
            connect_timeout_s=60,
            tool_timeout_s=60,
            max_output_tokens=25_000,
        )
        asked: list[str] = []

        async def answer(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(f"{server}: {params.message}")
            return types.ElicitResult(action="accept", content={"name": "Ada"})

        try:
            assert await pool.start(None) == []
            stepped = (await pool.call("feat", "steps", {})).text()
            pool.set_elicitation(answer)
            got = (await pool.call("feat", "ask", {})).text()
            return stepped, got, pool.progress.get("feat"), asked
        finally:
            await pool.aclose()

    stepped, got, progress, asked = asyncio.run(go())
    assert stepped == "stepped"
    assert progress == ("steps", 3.0, 3.0, "step 3")
    assert asked == ["feat: What is your name?"]
    assert got == "action=accept data=name='Ada'"
