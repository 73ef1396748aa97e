"""Claude Code's per-server approval of a project's ``.mcp.json`` servers, as a user meets it:
interactive keel asks once per new server and remembers the answer in
``.keel/settings.local.json``; ``-p`` (nobody to ask) starts a pending server of a trusted folder
and never a rejected one; ``keel mcp reset-project-choices`` makes it ask again."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, KeelRun, wire_env

FIXTURE = str(Path(__file__).parents[2] / "mcp_fixtures" / "server.py")
Start = Callable[[Any], FakeLLMServer]


def _project_with_two_servers(project: Path) -> None:
    servers = {name: {"command": sys.executable, "args": [FIXTURE, "stdio"]} for name in ("alpha", "beta")}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


def _tools(server: FakeLLMServer, index: int = 0) -> set[str]:
    return {t["name"] for t in server.cursor.requests[index]["body"]["tools"]}


def _local(project: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((project / ".keel" / "settings.local.json").read_text())
    return data


def test_interactive_asks_per_new_server_and_remembers(
    project: Path, fake_llm: Start, keel: Callable[..., KeelRun]
) -> None:
    _project_with_two_servers(project)
    assert keel("trust").code == 0
    server = fake_llm({"steps": ["hello", "again"]})
    env = {**os.environ, **wire_env(server, "anthropic"), "TERM": "dumb"}
    child = pexpect.spawn(KEEL, cwd=str(project), env=env, encoding="utf-8", timeout=60, dimensions=(40, 200))
    try:
        child.expect(r"New MCP server found in \.mcp\.json: alpha")
        child.expect(r"\[n\] no: ")
        child.sendline("n")
        child.expect(r"New MCP server found in \.mcp\.json: beta")
        child.expect(r"\[n\] no: ")
        child.sendline("y")
        child.expect("/help for commands")
        child.expect("> ")
        child.sendline("hi")
        child.expect("hello")
        child.expect("> ")
        child.send("\x04")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    local = _local(project)
    assert local["disabledMcpjsonServers"] == ["alpha"] and local["enabledMcpjsonServers"] == ["beta"]
    tools = _tools(server)
    assert any(t.startswith("mcp__beta__") for t in tools) and not any(t.startswith("mcp__alpha__") for t in tools)
    assert ": trusted" in keel("trust", "--status").stdout  # keel's own write kept the folder trusted

    # answered once: the next interactive session asks nothing and goes straight to the prompt
    server = fake_llm({"steps": ["second session"]})
    env = {**os.environ, **wire_env(server, "anthropic"), "TERM": "dumb"}
    child = pexpect.spawn(KEEL, cwd=str(project), env=env, encoding="utf-8", timeout=60, dimensions=(40, 200))
    try:
        index = child.expect(["New MCP server found", "/help for commands"])
        assert index == 1, "asked again about a server already answered"
        child.expect("> ")
        child.send("\x04")
        child.expect(pexpect.EOF)
    finally:
        child.close()

    reset = keel("mcp", "reset-project-choices")
    assert reset.code == 0 and "have been reset" in reset.stdout
    assert not {"enabledMcpjsonServers", "disabledMcpjsonServers"} & set(_local(project))
    assert ": trusted" in keel("trust", "--status").stdout


def test_headless_starts_pending_servers_and_never_rejected_ones(
    project: Path, fake_llm: Start, keel: Callable[..., KeelRun]
) -> None:
    _project_with_two_servers(project)
    # a rejection written by Claude Code itself, in .claude/settings.local.json
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.local.json").write_text(json.dumps({"disabledMcpjsonServers": ["alpha"]}))
    assert keel("trust").code == 0
    server = fake_llm({"steps": ["ok"]})
    run = keel("-p", "hi", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    tools = _tools(server)
    assert any(t.startswith("mcp__beta__") for t in tools)  # pending: nobody to ask, so it starts
    assert not any(t.startswith("mcp__alpha__") for t in tools)
    assert "MCP server 'alpha' from .mcp.json is disabled (disabledMcpjsonServers)" in run.stderr
    assert not (project / ".keel" / "settings.local.json").exists()  # -p records nothing
