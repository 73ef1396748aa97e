"""The TypeScript Agent SDK (@anthropic-ai/claude-agent-sdk 0.3.328, the release of Claude Code
2.1.328, installed by scripts/setup) drives keel: each check in checks.mjs runs ``query()`` with
``pathToClaudeCodeExecutable`` pointing at a shim that runs keel, against a scripted model (#34).

Oracle, 2026-11-28: the same checks.mjs with ``CLAUDE_EXE=~/.cache/keel-peers/node_modules/.bin/claude``
(Claude Code 2.1.328), ``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000
HOME=$(mktemp -d) CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 node checks.mjs NAME`` over
``keel dev fake-llm --script S``, the same scripts as below. What Claude Code gave is in each test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, node_modules, wire_env

HERE = Path(__file__).parent


def run_check(
    name: str, server: FakeLLMServer, project: Path, tmp_path: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """``node checks.mjs NAME`` with the SDK resolving from the setup's node dir; the CLI is keel."""
    modules = node_modules("@anthropic-ai/claude-agent-sdk")
    work = tmp_path / "sdk-ts"
    work.mkdir(exist_ok=True)
    (work / "node_modules").unlink(missing_ok=True)
    (work / "node_modules").symlink_to(modules)
    shutil.copy(HERE / "checks.mjs", work / "checks.mjs")
    shim = work / "keel-cli"
    shim.write_text(f'#!/bin/sh\nexec "{KEEL}" "$@"\n')
    shim.chmod(0o755)
    full = {
        **os.environ,
        **wire_env(server, "anthropic"),
        "CLAUDE_EXE": str(shim),
        "PROJECT_DIR": str(project),
        "KEEL_MAX_RETRIES": "0",
        **(env or {}),
    }
    proc = subprocess.run(
        ["node", str(work / "checks.mjs"), name], env=full, capture_output=True, text=True, timeout=120, cwd=work
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def requests_of(server: FakeLLMServer) -> list[dict[str, Any]]:
    with urllib.request.urlopen(server.url + "/_keel/requests") as r:
        out: list[dict[str, Any]] = json.loads(r.read())
    return out


def result_of(out: dict[str, Any]) -> dict[str, Any]:
    results = [m for m in out["messages"] if m["type"] == "result"]
    assert len(results) == 1, out
    return results[0]


def test_a_query_gives_init_assistant_and_a_success_result(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """Claude Code: init, assistant "hello there", result success / completed, nothing thrown."""
    out = run_check("result", fake_llm(["hello there"]), project, tmp_path)
    assert out["thrown"] is None
    assert (out["messages"][0]["type"], out["messages"][0]["subtype"]) == ("system", "init")
    texts = [b["text"] for m in out["messages"] if m["type"] == "assistant" for b in m["content"]]
    assert texts == ["hello there"]
    result = result_of(out)
    assert (result["subtype"], result["is_error"], result["result"], result["terminal_reason"]) == (
        "success",
        False,
        "hello there",
        "completed",
    )


def test_error_max_turns_reaches_the_host_with_its_errors(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """Claude Code: the result ``error_max_turns`` / ``is_error`` / ``errors: ["Reached maximum number
    of turns (1)"]`` / ``terminal_reason: "max_turns"`` is yielded, then the SDK throws "Claude Code
    returned an error result: Reached maximum number of turns (1)" (the SDK does so for every error
    result). Without an ``errors`` array the SDK threw before the host saw the result (#34 item 1)."""
    server = fake_llm({"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]}], "loop": True})
    out = run_check("max_turns", server, project, tmp_path)
    result = result_of(out)
    assert result["subtype"] == "error_max_turns" and result["is_error"] is True
    assert result["terminal_reason"] == "max_turns"
    assert result["errors"] and "1" in result["errors"][0]
    assert out["thrown"] == f"Claude Code returned an error result: {result['errors'][0]}"


def test_an_api_error_is_a_success_subtype_with_is_error(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """Claude Code (a 400 from the model): result ``subtype: "success"``, ``is_error: true``,
    ``terminal_reason: "api_error"``, result "API Error: 400 scripted error 400"; then the SDK throws
    with that text."""
    out = run_check("api_error", fake_llm({"steps": [{"error": {"status": 400}}], "loop": True}), project, tmp_path)
    result = result_of(out)
    assert (result["subtype"], result["is_error"], result["terminal_reason"]) == ("success", True, "api_error")
    assert "400" in result["result"]
    assert out["thrown"] is not None and "400" in out["thrown"]


def test_in_process_sdk_mcp_tools_from_the_ts_sdk(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """``createSdkMcpServer`` + ``tool()``: the SDK names its servers in ``initialize.sdkMcpServers``
    (not in ``--mcp-config``) and answers ``mcp_message`` control requests. Claude Code: the tool
    ran in the host (calls ``[{a: 2, b: 3}]``), its result reached the model, result success.
    keel ignored ``sdkMcpServers`` (the tool was unknown, the host's function never ran: #34 item 2)."""
    server = fake_llm([{"tool_calls": [{"name": "mcp__calc__add", "input": {"a": 2, "b": 3}}]}, "done"])
    out = run_check("sdk_mcp", server, project, tmp_path)
    assert out["calls"] == [{"a": 2, "b": 3}]
    results = [b for m in out["messages"] if m["type"] == "user" for b in m["content"] if b["type"] == "tool_result"]
    assert [r["content"] for r in results] == ["sum=5"]
    assert result_of(out)["subtype"] == "success"
    assert "sum=5" in json.dumps(requests_of(server)[-1]["body"]["messages"])


def test_a_hook_callback_from_the_ts_sdk_blocks_a_tool(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """A PreToolUse callback (matcher Bash) denying the call. Claude Code: the callback saw
    ``{event: PreToolUse, tool: Bash, command: "echo hi"}``; the tool result carried the reason
    ("PreToolUse:Bash hook error: blocked by the TS hook"); result success."""
    server = fake_llm([{"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]}, "done"])
    out = run_check("hooks", server, project, tmp_path)
    assert out["seen"] == [{"event": "PreToolUse", "tool": "Bash", "command": "echo hi"}]
    results = [b for m in out["messages"] if m["type"] == "user" for b in m["content"] if b["type"] == "tool_result"]
    assert len(results) == 1 and "blocked by the TS hook" in results[0]["content"]
    assert not (project / "hi").exists()
    assert result_of(out)["subtype"] == "success"


def test_can_use_tool_from_the_ts_sdk_denies_a_write(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """``canUseTool`` denying Write. Claude Code: asked once for Write, the tool result is the
    host's message "no writing today", the file is not written, result success."""
    server = fake_llm([{"tool_calls": [{"name": "Write", "input": {"file_path": "out.txt", "content": "x"}}]}, "done"])
    out = run_check("can_use_tool", server, project, tmp_path)
    assert [a["name"] for a in out["asked"]] == ["Write"]
    results = [b for m in out["messages"] if m["type"] == "user" for b in m["content"] if b["type"] == "tool_result"]
    assert len(results) == 1 and "no writing today" in results[0]["content"]
    assert not (project / "out.txt").exists()
    assert result_of(out)["subtype"] == "success"


def test_interrupt_from_the_ts_sdk_ends_the_turn(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """``query.interrupt()`` half a second into a 4 s model reply. Claude Code: a user message
    "[Request interrupted by user]", then result ``error_during_execution`` / ``is_error`` /
    ``terminal_reason: "aborted_streaming"``; nothing thrown. keel ends the turn the same way as far
    as the host can tell: one error_during_execution result, nothing thrown, the SDK still usable."""
    server = fake_llm({"steps": [{"text": "slow answer", "delay_s": 4}, "after"], "loop": True})
    out = run_check("interrupt", server, project, tmp_path)
    assert out["thrown"] is None
    result = result_of(out)
    assert result["subtype"] == "error_during_execution" and result["is_error"] is True


def test_streaming_input_runs_a_custom_command(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """Streaming input (an async iterable prompt) with "/greet Ada" and .claude/commands/greet.md
    "Say hello to $ARGUMENTS". Claude Code: the model received the expanded command, result
    success "ok"."""
    (project / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "greet.md").write_text("Say hello to $ARGUMENTS\n")
    server = fake_llm({"steps": ["ok"], "loop": True})
    out = run_check("streaming_command", server, project, tmp_path)
    assert result_of(out)["result"] == "ok"
    assert "Say hello to Ada" in json.dumps(requests_of(server)[-1]["body"]["messages"])


def test_setting_sources_project_loads_the_projects_commands(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """``settingSources: ["project"]`` puts the project's /greet in init's ``slash_commands``;
    ``settingSources: []`` leaves it out. Claude Code: "greet" listed with ["project"], absent with []."""
    (project / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "greet.md").write_text("Say hello to $ARGUMENTS\n")
    out = run_check("setting_sources", fake_llm({"steps": ["ok"], "loop": True}), project, tmp_path)
    assert "greet" in out["project"]
    assert "greet" not in out["none"]


SUBAGENT = [
    {
        "text": "delegating",
        "tool_calls": [
            {
                "name": "Agent",
                "input": {
                    "description": "say hi",
                    "prompt": "say hi and run echo sub",
                    "subagent_type": "general-purpose",
                    "run_in_background": False,
                },
            }
        ],
    },
    {"text": "sub thinking", "tool_calls": [{"name": "Bash", "input": {"command": "echo sub"}}]},
    "sub done",
    "all done",
]


@pytest.mark.parametrize("forward", [False, True])
def test_subagents_are_visible_to_the_host(forward: bool, fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """A foreground general-purpose agent that runs ``echo sub`` and answers "sub done".
    Claude Code (both settings of ``forwardSubagentText``): system ``task_started`` (task_id,
    tool_use_id of the Agent call, description "say hi"), a user message with the subagent's prompt
    and ``parent_tool_use_id`` = the Agent call, ``task_progress`` "Running echo sub", the subagent's
    Bash tool_use and its result (parent_tool_use_id set), ``task_updated``, ``task_notification``
    (status completed), then the parent's tool result and "all done". The subagent's text ("sub
    thinking", "sub done") reaches the host only with ``forwardSubagentText: true``.
    keel showed none of it (#34 item 12)."""
    out = run_check("subagent", fake_llm(SUBAGENT), project, tmp_path, env={"FORWARD": "1" if forward else "0"})
    assert out["thrown"] is None
    messages = out["messages"]
    agent_call = next(
        m for m in messages if m["type"] == "assistant" and any(b.get("name") == "Agent" for b in m["content"])
    )
    assert agent_call["parent_tool_use_id"] is None
    system = [m for m in messages if m["type"] == "system" and m["subtype"].startswith("task_")]
    assert [m["subtype"] for m in system] == ["task_started", "task_progress", "task_updated", "task_notification"]
    started, progress, _, done = system
    tool_use_id = started["tool_use_id"]
    assert tool_use_id and started["description"] == "say hi"
    assert progress["description"] == "Running echo sub" and progress["tool_use_id"] == tool_use_id
    assert done["status"] == "completed" and done["task_id"] == started["task_id"]
    nested = [m for m in messages if m.get("parent_tool_use_id") == tool_use_id]
    kinds = [(m["type"], b["type"]) for m in nested for b in m["content"]]
    assert ("user", "text") in kinds and ("assistant", "tool_use") in kinds and ("user", "tool_result") in kinds
    texts = [b["text"] for m in nested if m["type"] == "assistant" for b in m["content"] if b["type"] == "text"]
    assert texts == (["sub thinking", "sub done"] if forward else [])
    top = [m for m in messages if m["type"] == "assistant" and m["parent_tool_use_id"] is None]
    assert top[-1]["content"][-1]["text"] == "all done"
    assert result_of(out)["result"] == "all done"


def test_mcp_elicitation_reaches_the_hosts_on_elicitation(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """@modelcontextprotocol/server-everything 2026.8.31 over stdio, its trigger-elicitation-request
    tool, and an ``onElicitation`` that accepts with ``{name: "Ada Lovelace", check: true, integer: 7}``.
    Claude Code: the host was asked once (server "ev", mode "form", the server's 13 fields in its
    order), the tool result began "✅ User provided the requested information!" and listed the
    three values. keel answered every elicitation "cancel" under the SDK (#34 item 10)."""
    everything = node_modules("@modelcontextprotocol/server-everything")
    server = fake_llm([{"tool_calls": [{"name": "mcp__ev__trigger-elicitation-request", "input": {}}]}, "done"])
    entry = everything / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    out = run_check("elicitation", server, project, tmp_path, env={"EVERYTHING": str(entry)})
    assert len(out["asked"]) == 1
    asked = out["asked"][0]
    assert (asked["serverName"], asked["mode"]) == ("ev", "form")
    assert asked["fields"][:3] == ["name", "check", "firstLine"]
    results = [b for m in out["messages"] if m["type"] == "user" for b in m["content"] if b["type"] == "tool_result"]
    assert len(results) == 1
    assert results[0]["content"].startswith("✅ User provided the requested information!")
    assert "- Name: Ada Lovelace" in results[0]["content"] and "- Favorite Integer: 7" in results[0]["content"]
    assert result_of(out)["subtype"] == "success"


def test_the_ts_sdks_session_readers_find_keels_session_and_subagent(
    fake_llm: Any, project: Path, tmp_path: Path
) -> None:
    """After the subagent run above, the TypeScript SDK's ``getSessionMessages``, ``listSessions``,
    ``listSubagents`` and ``getSubagentMessages`` (they read Claude Code's files). Claude Code: the
    session listed, its chain user, assistant ("delegating" and the Agent call as two entries, one per
    block), user (the Agent result), assistant ("all done"), with the stream's uuids; one subagent,
    whose messages all carry the Agent call's id as ``parent_tool_use_id``. keel: the same, with the
    assistant's blocks in one entry, as keel streams them. Before: keel wrote no such files, the
    readers found nothing (#34 item 13)."""
    out = run_check("session_readers", fake_llm(SUBAGENT), project, tmp_path)
    assert out["thrown"] is None and out["sessions"] == [out["sid"]]
    top = [m["uuid"] for m in out["messages"] if m["type"] in ("user", "assistant") and not m.get("parent_tool_use_id")]
    read = out["messages_read"]
    assert read[0]["type"] == "user" and [m["uuid"] for m in read[1:]] == top
    assert len(out["agents"]) == 1
    agent_call = next(m for m in out["messages"] if m["type"] == "system" and m["subtype"] == "task_started")
    assert out["subagent"] and {m["parent_tool_use_id"] for m in out["subagent"]} == {agent_call["tool_use_id"]}


def test_mcp_servers_delivered_in_initialize(fake_llm: Any, project: Path, tmp_path: Path) -> None:
    """``mcpServersDelivery: "initialize"`` (the SDK's coming default: servers' env and headers stay off
    the command line): the SDK passes ``--await-initialize`` and the servers in ``initialize.mcpServers``.
    Claude Code: init listed ev connected, ``initializationResult().mcp_servers_applied`` true, the
    echo ran ("Echo: via init"). keel refused ``--await-initialize`` and the SDK's query failed."""
    everything = node_modules("@modelcontextprotocol/server-everything")
    entry = everything / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    server = fake_llm([{"tool_calls": [{"name": "mcp__ev__echo", "input": {"message": "via init"}}]}, "done"])
    out = run_check("mcp_initialize", server, project, tmp_path, env={"EVERYTHING": str(entry)})
    assert out["thrown"] is None
    results = [b for m in out["messages"] if m["type"] == "user" for b in m["content"] if b["type"] == "tool_result"]
    assert [r["content"] for r in results] == ["Echo: via init"]
    assert result_of(out)["subtype"] == "success"
