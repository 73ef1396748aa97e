"""MCP configuration: scopes, trust, approval, ${VAR} expansion, --mcp-config; results and names;
and `keel mcp add|get|list|remove` as real processes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.core.tools import ToolRegistry
from agentkeel.mcp.config import McpConfigError, discover, expand, parse_server
from agentkeel.mcp.pool import McpPool
from agentkeel.mcp.tools import TRUNCATION_NOTE, convert, tool_name
from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

FIXTURE = str(Path(__file__).parents[2] / "mcp_fixtures" / "server.py")


def test_expand_vars_and_defaults() -> None:
    missing: list[str] = []
    env = {"HOST": "db.local", "EMPTY": ""}
    assert expand("${HOST}:${PORT:-5432}/${EMPTY:-x}", env, missing) == "db.local:5432/x"
    assert missing == []
    assert expand("token ${NOPE}", env, missing) == "token ${NOPE}"
    assert missing == ["NOPE"]


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("bad name", {"command": "x"}, "names may use only letters"),
        ("s", {"type": "stdio"}, "'command' must be a non-empty string"),
        ("s", {"type": "ws", "url": "ws://x"}, "type must be stdio, http or sse"),
        ("s", {"command": "x", "args": "not-a-list"}, "'args' must be a list of strings"),
        ("s", {"type": "http"}, "'url' must be a non-empty string"),
    ],
)
def test_bad_server_definitions_are_one_line(name: str, raw: dict[str, object], message: str) -> None:
    with pytest.raises(McpConfigError) as err:
        parse_server(name, raw, "project", ".mcp.json", {})
    assert message in str(err.value) and "\n" not in str(err.value) and ".mcp.json" in str(err.value)


def _layers(*items: tuple[str, str, dict[str, object]]) -> list[tuple[str, str, dict[str, object]]]:
    return list(items)


def test_scopes_trust_and_approval(tmp_path: Path) -> None:
    cwd, home = tmp_path / "p", tmp_path / "h"
    cwd.mkdir()
    home.mkdir()
    (cwd / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"shared": {"command": "a"}, "off": {"command": "b"}, "both": {"command": "p"}}})
    )
    user = ("u.json", "user", {"mcpServers": {"mine": {"type": "http", "url": "https://x/${PATHPART:-mcp}"}}})
    local = ("l.json", "local", {"mcpServers": {"both": {"command": "local-wins"}}, "disabledMcpjsonServers": ["off"]})

    untrusted = discover(cwd=cwd, home=home, layers=_layers(user, local), env={}, trusted=False)
    assert set(untrusted.servers) == {"mine", "both"}  # the project's .mcp.json is not read
    assert any("until you trust this folder" in line for line in untrusted.skipped)

    trusted = discover(cwd=cwd, home=home, layers=_layers(user, local), env={}, trusted=True)
    assert set(trusted.servers) == {"mine", "shared", "both"}
    assert trusted.servers["both"].command == "local-wins" and trusted.servers["both"].scope == "local"
    assert trusted.servers["mine"].url == "https://x/mcp"
    assert any("'off'" in line and "disabled" in line for line in trusted.skipped)

    cli = json.dumps({"mcpServers": {"only": {"command": "c"}}})
    strict = discover(cwd=cwd, home=home, layers=_layers(user), env={}, trusted=True, cli=[cli], strict=True)
    assert list(strict.servers) == ["only"] and strict.servers["only"].scope == "cli"

    (cwd / "extra.json").write_text(json.dumps({"mcpServers": {"shared": {"command": "from-file"}}}))
    both = discover(cwd=cwd, home=home, layers=[], env={}, trusted=True, cli=["extra.json", "{not json"])
    assert both.servers["shared"].command == "from-file"  # --mcp-config wins over .mcp.json
    assert any(line.startswith("--mcp-config: invalid JSON") for line in both.errors)


def test_claude_json_user_and_local_servers(tmp_path: Path) -> None:
    cwd, home = tmp_path / "p", tmp_path / "h"
    cwd.mkdir()
    home.mkdir()
    data = {
        "mcpServers": {"u": {"command": "u"}},
        "projects": {str(cwd): {"mcpServers": {"l": {"type": "sse", "url": "http://127.0.0.1:1/sse"}}}},
    }
    (home / ".claude.json").write_text(json.dumps(data))
    found = discover(cwd=cwd, home=home, layers=[], env={}, trusted=True)
    assert found.servers["u"].scope == "user" and found.servers["l"].scope == "local"


def test_missing_variable_and_missing_command_fail_in_one_line(tmp_path: Path) -> None:
    servers = {
        "needs": parse_server("needs", {"command": "x", "env": {"T": "${UNSET_TOKEN}"}}, "cli", "t", {}),
        "nocmd": parse_server("nocmd", {"command": "no-such-binary-keel-test"}, "cli", "t", {}),
    }

    async def go() -> list[str]:
        pool = McpPool(
            servers,
            env={"PATH": "/usr/bin"},
            cwd=tmp_path,
            connect_timeout_s=30,
            tool_timeout_s=5,
            max_output_tokens=10,
        )
        try:
            return await pool.start(ToolRegistry())
        finally:
            await pool.aclose()

    lines = asyncio.run(go())
    assert lines == [
        "MCP server 'needs' failed: missing environment variable UNSET_TOKEN (set it, or use ${VAR:-default})",
        "MCP server 'nocmd' failed: command not found: no-such-binary-keel-test",
    ]


def test_tool_names_and_truncation() -> None:
    import mcp_types as types

    assert tool_name("my.server", "get data") == "mcp__my_server__get_data"
    long_a, long_b = tool_name("srv", "x" * 80 + "a"), tool_name("srv", "x" * 80 + "b")
    assert len(long_a) == 64 and long_a.startswith("mcp__srv__xxx") and long_a != long_b
    small = convert(types.CallToolResult(content=[types.TextContent(text="ok")]), 100)
    assert small.content == "ok" and not small.is_error
    huge = convert(types.CallToolResult(content=[types.TextContent(text="y" * 10_000)]), 100)
    assert huge.text().startswith("y" * 400) and "y" * 401 not in huge.text()
    assert huge.text().endswith(TRUNCATION_NOTE.format(limit=100)) and huge.metadata == {"truncated": True}
    failed = convert(types.CallToolResult(content=[types.TextContent(text="bad")], is_error=True), 100)
    assert failed.is_error
    structured = convert(types.CallToolResult(content=[], structured_content={"n": 1}), 100)
    assert json.loads(structured.text()) == {"n": 1}


def test_keel_mcp_add_get_list_remove(keel: Callable[..., KeelRun], project: Path, tmp_path: Path) -> None:
    added = keel("mcp", "add", "fx", "-e", "GREETING=hi", "--", sys.executable, FIXTURE, "stdio")
    assert added.code == 0, added.stderr
    assert "Added stdio MCP server fx" in added.stdout and "local config" in added.stdout
    local = json.loads((project / ".keel" / "settings.local.json").read_text())
    assert local["mcpServers"]["fx"] == {
        "type": "stdio",
        "command": sys.executable,
        "args": [FIXTURE, "stdio"],
        "env": {"GREETING": "hi"},
    }
    again = keel("mcp", "add", "fx", "true")
    assert again.code == 2 and again.stderr.count("\n") == 1 and "already exists in local config" in again.stderr

    web = keel(
        "mcp",
        "add",
        "-s",
        "project",
        "-t",
        "http",
        "-H",
        "Authorization: Bearer ${TOKEN}",
        "web",
        "http://127.0.0.1:9/mcp",
    )
    assert web.code == 0, web.stderr
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["web"] == {
        "type": "http",
        "url": "http://127.0.0.1:9/mcp",
        "headers": {"Authorization": "Bearer ${TOKEN}"},
    }
    user = keel("mcp", "add", "-s", "user", "-t", "sse", "far", "http://127.0.0.1:9/sse")
    assert user.code == 0 and "mcpServers" in (tmp_path / "keelhome" / "settings.json").read_text()
    bad = keel("mcp", "add", "-t", "http", "-e", "A=b", "x", "http://h/mcp")
    assert bad.code == 2 and "-e is for stdio servers" in bad.stderr

    got = keel("mcp", "get", "fx", env={"MCP_TIMEOUT": "90000"}, timeout=120)
    assert got.code == 0, got.stdout + got.stderr
    assert "Status: ✓ Connected" in got.stdout and "GREETING=hi" in got.stdout and "Scope: Local config" in got.stdout

    keel("trust")
    listed = keel("mcp", "list", env={"MCP_TIMEOUT": "90000", "TOKEN": "fake-token"}, timeout=120)
    assert listed.code == 1  # web and far do not answer
    assert "fx: " in listed.stdout and "✓ Connected" in listed.stdout
    assert "web: http://127.0.0.1:9/mcp (http) - ✗ Failed to connect" in listed.stdout
    assert "far: http://127.0.0.1:9/sse (sse) - ✗ Failed to connect" in listed.stdout
    assert ": trusted" in keel("trust", "--status").stdout

    removed = keel("mcp", "remove", "web")
    assert removed.code == 0 and "Removed MCP server web from project config" in removed.stdout
    assert ": trusted" in keel("trust", "--status").stdout  # keel's own edit of .mcp.json kept the trust
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"] == {}
    missing = keel("mcp", "remove", "web")
    assert missing.code == 2 and "no MCP server named web" in missing.stderr

    other = tmp_path / "other"
    (other / ".keel").mkdir(parents=True)
    (other / ".keel" / "settings.json").write_text("{}")  # a folder with settings nobody trusted
    untrusted = keel("mcp", "add", "x", "true", cwd=other)
    assert untrusted.code == 0 and "is not trusted: its servers start after `keel trust`" in untrusted.stderr


def test_slash_mcp_and_prompt_commands_on_a_real_runtime(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], tmp_path: Path
) -> None:
    from agentkeel.app.runtime import Runtime, RuntimeOptions
    from agentkeel.mcp.command import mcp, prompt_commands

    server = fake_llm({"steps": ["ok"]})
    config = json.dumps({"mcpServers": {"fx": {"command": sys.executable, "args": [FIXTURE, "stdio"]}}})
    env = {**os.environ, **wire_env(server, "anthropic"), "MCP_TIMEOUT": "90000"}

    async def go() -> None:
        rt = Runtime.create(RuntimeOptions(cwd=project, env=env, mcp_config=[config], start_timeout_s=120))
        try:
            await rt.start()
            tools = rt.agent.tools
            assert "mcp__fx__add" in tools
            listing = await mcp(rt, "")
            assert "fx (cli, stdio): connected, 4 tools, 1 resources, 1 prompts" in listing
            [review] = prompt_commands(rt)
            assert review.name == "mcp__fx__review" and review.arguments == ("topic",)
            assert await review.run("the parser") == "Please review the parser carefully."
            assert "disabled" in await mcp(rt, "disable fx")
            assert "mcp__fx__add" not in tools and "ReadMcpResourceTool" not in tools
            assert (await mcp(rt, "enable fx")).startswith("MCP server fx connected: 4 tools")
            assert "mcp__fx__add" in tools
            assert (await mcp(rt, "bogus")).startswith("usage: /mcp")
        finally:
            await rt.aclose()

    asyncio.run(go())


def test_a_session_without_mcp_servers_never_imports_mcp(project: Path) -> None:
    code = (
        "import sys, asyncio; from pathlib import Path\n"
        "from agentkeel.app.runtime import Runtime, RuntimeOptions\n"
        "rt = Runtime.create(RuntimeOptions(cwd=Path('.'), model='anthropic:claude-sonnet-4-5', "
        "env={**__import__('os').environ, 'ANTHROPIC_API_KEY': 'sk-ant-test-not-a-real-key'}))\n"
        "asyncio.run(rt.start()); asyncio.run(rt.aclose())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'agentkeel')"
        " and ('mcp' in m.split('.')[0] or m.startswith('agentkeel.mcp.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['agentkeel.mcp.config']"


def test_slash_mcp_and_an_mcp_prompt_through_keel_p(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """`keel -p "/mcp"` lists the servers; `/mcp__fx__review X` sends the prompt's text to the model."""
    server = fake_llm({"steps": ["reviewed"]})
    config = json.dumps({"mcpServers": {"fx": {"command": sys.executable, "args": [FIXTURE, "stdio"]}}})
    env = {**wire_env(server, "anthropic"), "MCP_TIMEOUT": "90000"}
    listing = keel("-p", "/mcp", "--mcp-config", config, env=env, timeout=180)
    assert listing.code == 0 and "fx (cli, stdio): connected" in listing.stdout, listing.stderr
    assert server.cursor.requests == []  # a command's own output needs no model request
    run = keel("-p", "/mcp__fx__review the parser", "--mcp-config", config, env=env, timeout=180)
    assert run.code == 0 and "reviewed" in run.stdout, run.stderr
    sent = json.dumps(server.cursor.requests[-1]["body"]["messages"])
    assert "Please review the parser carefully." in sent


def test_approval_status_of_project_servers() -> None:
    from agentkeel.mcp.config import Approval

    layers = [{"enabledMcpjsonServers": ["a"], "disabledMcpjsonServers": ["b"]}]
    approval = Approval.from_layers(layers)
    assert [approval.status(n) for n in ("a", "b", "c")] == ["approved", "rejected", "pending"]
    assert approval.allows("c") and not approval.allows("b")  # nobody to ask: pending starts
    every = Approval.from_layers([*layers, {"enableAllProjectMcpServers": True}])
    assert [every.status(n) for n in ("a", "b", "c")] == ["approved", "rejected", "approved"]
