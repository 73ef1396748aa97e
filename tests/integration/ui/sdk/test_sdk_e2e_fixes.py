"""What the official Python SDK's e2e-tests (tests/integration/sdk_e2e) found, pinned one fix each.

Each test drives the real ``keel`` binary in stream-json mode (the SDKs' only mode) with the
scripted model, and checks the lines keel prints against what Claude Code 2.1.328 printed for the
same input (the command that recorded it is in each docstring; the capture harness is
tests/integration/sdk_e2e, run with ``SDK_E2E_CLI=<claude>``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]
STREAM = ("--output-format", "stream-json", "--verbose", "--input-format", "stream-json")


def user(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": None, "session_id": ""}


def initialize(**body: Any) -> dict[str, Any]:
    return {"type": "control_request", "request_id": "req_init", "request": {"subtype": "initialize", **body}}


def stream(keel: Keel, server: FakeLLMServer, *lines: dict[str, Any], args: tuple[str, ...] = ()) -> list[Any]:
    stdin = "".join(json.dumps(line) + "\n" for line in lines)
    run = keel(*STREAM, *args, env=wire_env(server, "anthropic"), stdin=stdin)
    assert run.stderr == "" or "Traceback" not in run.stderr, run.stderr
    return run.lines()


def inits(lines: list[Any]) -> list[dict[str, Any]]:
    return [x for x in lines if x.get("type") == "system" and x.get("subtype") == "init"]


def results(lines: list[Any]) -> list[dict[str, Any]]:
    return [x for x in lines if x.get("type") == "result"]


def _project_definitions(project: Path) -> None:
    claude = project / ".claude"
    (claude / "commands").mkdir(parents=True)
    (claude / "commands" / "projcmd.md").write_text("---\ndescription: a project command\n---\nDo it.\n")
    (claude / "agents").mkdir()
    (claude / "agents" / "projagent.md").write_text(
        "---\nname: projagent\ndescription: a project agent\n---\nYou help.\n"
    )
    (claude / "skills" / "projskill").mkdir(parents=True)
    (claude / "skills" / "projskill" / "SKILL.md").write_text(
        "---\nname: projskill\ndescription: a project skill\n---\nDo the skill.\n"
    )


def test_setting_sources_user_leaves_out_the_projects_commands_agents_and_skills(
    fake_llm: Start, keel: Keel, project: Path
) -> None:
    """``--setting-sources user`` reads none of the project's CLAUDE.md and .claude folders;
    ``user,project`` does.

    Claude Code 2.1.328 (vendored test_setting_sources_user_only, passing with
    ``SDK_E2E_CLI=~/.cache/keel-peers/node_modules/.bin/claude pytest tests/integration/sdk_e2e/vendored
    -k setting_sources``): the project's ``testcmd`` is not in ``slash_commands``."""
    _project_definitions(project)
    (project / "CLAUDE.md").write_text("Always answer in the PROJECT-INSTRUCTION-MARK style.\n")
    server = fake_llm({"steps": ["4", "4"]})
    (only_user,) = inits(stream(keel, server, user("What is 2 + 2?"), args=("--setting-sources", "user")))
    assert "projcmd" not in only_user["slash_commands"]
    assert "projagent" not in only_user["agents"]
    assert "projskill" not in only_user["skills"]
    assert "PROJECT-INSTRUCTION-MARK" not in json.dumps(server.cursor.requests[0]["body"])
    (both,) = inits(stream(keel, server, user("What is 2 + 2?"), args=("--setting-sources", "user,project")))
    assert "projcmd" in both["slash_commands"] and "projagent" in both["agents"] and "projskill" in both["skills"]
    assert "PROJECT-INSTRUCTION-MARK" in json.dumps(server.cursor.requests[1]["body"])


def test_init_reports_the_output_style_the_settings_name(fake_llm: Start, keel: Keel, project: Path) -> None:
    """``outputStyle`` from .claude/settings.local.json is echoed in the init message and in
    initialize's answer.

    Claude Code 2.1.328 (vendored test_setting_sources_default / _project_included, passing on
    it with the harness above): ``"output_style": "local-test-style"``."""
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.local.json").write_text('{"outputStyle": "local-test-style"}')
    server = fake_llm({"steps": ["4"]})
    lines = stream(keel, server, initialize(), user("What is 2 + 2?"))
    (init,) = inits(lines)
    assert init["output_style"] == "local-test-style"
    (answer,) = [x for x in lines if x.get("type") == "control_response"]
    assert answer["response"]["response"]["output_style"] == "local-test-style"
    assert "local-test-style" in answer["response"]["response"]["available_output_styles"]


def test_clear_starts_a_new_session_as_claude_code(fake_llm: Start, keel: Keel, project: Path) -> None:
    """``/clear`` in stream-json: ``conversation_reset`` with the old session's id, then an init and
    a result of a new session; the next prompt runs in it without the old conversation.

    Claude Code 2.1.328, recorded with ``claude --output-format stream-json --verbose
    --input-format stream-json --max-turns 1`` fed initialize, "Reply with exactly: one", "/clear",
    "hello again": ``conversation_reset`` (old id), ``system/init`` (new id), ``result``
    ``{"subtype": "success", "num_turns": 0, "result": "", "stop_reason": null,
    "local_command": "clear"}`` (new id, no ``terminal_reason``), then the next turn in the new id,
    after an ``init`` of its own (Claude Code writes one before every turn)."""
    server = fake_llm({"steps": ["one", "after"]})
    haiku = {
        "type": "control_request",
        "request_id": "req_m",
        "request": {"subtype": "set_model", "model": "claude-haiku-4-5"},
    }
    lines = stream(keel, server, haiku, user("Reply with exactly: one"), user("/clear"), user("hello again"))
    first, cleared, after = results(lines)
    (reset,) = [x for x in lines if x.get("type") == "conversation_reset"]
    old, new, again = (x["session_id"] for x in inits(lines))  # an init before every turn, as Claude Code
    assert again == new
    assert first["session_id"] == old == reset["session_id"] and reset["new_conversation_id"]
    assert new != old and cleared["session_id"] == new == after["session_id"]
    assert cleared["subtype"] == "success" and not cleared["is_error"] and cleared["num_turns"] == 0
    assert cleared["result"] == "" and cleared["stop_reason"] is None and cleared["local_command"] == "clear"
    assert "terminal_reason" not in cleared
    order = [x.get("type") for x in lines]
    assert order.index("conversation_reset") < order.index("result", order.index("conversation_reset"))
    assert after["result"] == "after"
    second = json.dumps(server.cursor.requests[1]["body"]["messages"])
    assert "Reply with exactly" not in second  # the old conversation is not sent
    assert [r["body"]["model"] for r in server.cursor.requests] == ["claude-haiku-4-5"] * 2  # the model carries over


def test_an_sdk_host_gets_no_memory_context_unless_its_settings_ask(fake_llm: Start, keel: Keel, project: Path) -> None:
    """Under an SDK host (stream-json input) keel appends no ``<memory-context>`` to the prompt by
    default: the host's prompts are its own. ``memory.inject: true`` in a settings file (or
    ``ClaudeAgentOptions(settings=...)``, i.e. ``--settings``) turns it on. Claude Code has no
    such memory: its prompts reach the model as the host sent them."""
    server = fake_llm({"steps": ["one", "two", "three"]})
    stream(keel, server, user("Reply with exactly: one"))
    stream(keel, server, user("Reply with exactly: two"))
    assert "<memory-context" not in json.dumps(server.cursor.requests[1]["body"]["messages"])
    stream(keel, server, user("Reply with exactly: three"), args=("--settings", '{"memory": {"inject": true}}'))
    assert "<memory-context" in json.dumps(server.cursor.requests[2]["body"]["messages"])


def test_the_python_sdk_accepts_the_version_keel_reports(
    fake_llm: Start, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK reads ``claude_code_version`` from the init message and warns "too old to report
    its version, and may be unsupported" without it, on every connect. keel reports the Claude
    Code release it speaks the protocol of (``keel_version`` stays keel's own).

    Claude Code 2.1.328's init (recorded as in the /clear test above): ``"claude_code_version":
    "2.1.328"``."""
    from claude_agent_sdk import ClaudeAgentOptions, SystemMessage, query

    server = fake_llm({"steps": ["4"]})

    async def run() -> list[Any]:
        opts = ClaudeAgentOptions(cli_path=KEEL, cwd=str(project), env=wire_env(server, "anthropic"))
        return [m async for m in query(prompt="What is 2 + 2?", options=opts)]

    with caplog.at_level(logging.WARNING, logger="claude_agent_sdk"):
        messages = asyncio.run(asyncio.wait_for(run(), 60))
    init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
    assert init.data["claude_code_version"] == "2.1.328" and init.data["keel_version"]
    assert not [r for r in caplog.records if "unsupported" in r.getMessage() or "too old" in r.getMessage()]


def _interrupted_session(server: FakeLLMServer, project: Path) -> list[Any]:
    """Ask, interrupt once the first words of the reply have streamed, then ask something else."""
    env = {**os.environ, **wire_env(server, "anthropic")}
    args = [KEEL, *STREAM, "--include-partial-messages"]
    proc = subprocess.Popen(args, cwd=project, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    lines: list[Any] = []
    try:
        proc.stdin.write(json.dumps(user("Count from 1 to 100 slowly.")) + "\n")
        proc.stdin.flush()
        for raw in proc.stdout:  # until the first text delta: the reply has begun
            lines.append(json.loads(raw))
            event = lines[-1].get("event") or {}
            if event.get("type") == "content_block_delta":
                break
        interrupt = {"type": "control_request", "request_id": "req_int", "request": {"subtype": "interrupt"}}
        proc.stdin.write(json.dumps(interrupt) + "\n" + json.dumps(user("now something else")) + "\n")
        proc.stdin.close()
        lines += [json.loads(raw) for raw in proc.stdout]
    finally:
        proc.wait(timeout=60)
    return lines


def test_an_interrupted_reply_stays_with_claude_codes_mark(fake_llm: Start, project: Path) -> None:
    """The partial reply stays in the conversation, then ``[Request interrupted by user]``; the next
    prompt is its own turn; the client is shown both (an assistant and a user line). The result:
    ``error_during_execution``, ``terminal_reason "aborted_streaming"``, ``stop_reason`` null,
    ``errors``.

    Claude Code 2.1.328, recorded with ``claude --output-format stream-json --verbose
    --input-format stream-json`` (scripted reply stalled after its first text; an ``interrupt``
    control request; a second prompt): the next request's messages are ``user(prompt)``,
    ``assistant("Counting: 1,")`` (what had streamed), ``user("[Request interrupted by user]\\n", "now something
    else")``; the result ``{"subtype": "error_during_execution", "is_error": true, "stop_reason":
    null, "terminal_reason": "aborted_streaming", "errors": [...]}``."""
    # streamed in three pieces ("Counti", "ng: 1,", " 2, 3"): two come, then nothing
    steps = [{"text": "Counting: 1, 2, 3", "stall_after": 5, "stall_s": 30}, "Something else."]
    server = fake_llm({"steps": steps})
    lines = _interrupted_session(server, project)
    cut, after = results(lines)
    shown = [x["message"]["content"] for x in lines if x.get("type") in ("assistant", "user")]
    assert shown[:2] == [
        [{"type": "text", "text": "Counting: 1,"}],
        [{"type": "text", "text": "[Request interrupted by user]"}],
    ]
    assert cut["subtype"] == "error_during_execution" and cut["is_error"] is True
    assert cut["terminal_reason"] == "aborted_streaming" and cut["stop_reason"] is None and cut["errors"]
    assert after["result"] == "Something else." and not after["is_error"]
    messages = server.cursor.requests[1]["body"]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [{"type": "text", "text": "Counting: 1,"}]
    texts = [b["text"] for b in messages[2]["content"]]
    assert texts[0].strip() == "[Request interrupted by user]" and texts[-1] == "now something else"
    assert "Count from 1 to 100" not in json.dumps(messages[2])  # the old prompt is not merged in


def test_result_shapes_of_api_errors_and_limits(fake_llm: Start, keel: Keel) -> None:
    """The result of a run an API error ended, or the endpoint never answered, or a limit stopped.

    Claude Code 2.1.328 (``claude -p hi --output-format stream-json --verbose``, retries off,
    the scripted server answering 500 / 529 / 401, or ``ANTHROPIC_BASE_URL=http://127.0.0.1:9``;
    ``--max-turns 1 --allowedTools Bash`` with a Bash call): API errors are ``{"subtype":
    "success", "is_error": true, "terminal_reason": "api_error", "api_error_status": 500 | 529 |
    401 | null (unreachable), "stop_reason": "stop_sequence"}`` with the message in ``result`` and
    no ``errors``; max turns is ``error_max_turns`` with ``stop_reason "tool_use"`` (the last
    reply's) and ``errors``."""
    no_retries = {"KEEL_MAX_RETRIES": "0"}
    for status in (500, 529, 401):
        server = fake_llm({"steps": [{"error": {"status": status}}], "loop": True})
        run = keel("-p", "hi", *STREAM[:3], env={**wire_env(server, "anthropic"), **no_retries})
        (line,) = results(run.lines())
        assert line["subtype"] == "success" and line["is_error"] is True and "errors" not in line, line
        assert line["terminal_reason"] == "api_error" and line["api_error_status"] == status, line
        assert line["stop_reason"] == "stop_sequence" and line["result"], line
    unreachable = {**wire_env(server, "anthropic"), **no_retries, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    (line,) = results(keel("-p", "hi", *STREAM[:3], env=unreachable).lines())
    assert line["subtype"] == "success" and line["terminal_reason"] == "api_error", line
    assert line["api_error_status"] is None and line["stop_reason"] == "stop_sequence" and line["result"], line
    bash = {"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]}
    server = fake_llm({"steps": [bash, bash, "done"]})
    run = keel("-p", "hi", *STREAM[:3], "--max-turns", "1", "--allowedTools", "Bash", env=wire_env(server, "anthropic"))
    (line,) = results(run.lines())
    assert line["subtype"] == "error_max_turns" and line["stop_reason"] == "tool_use" and line["errors"], line


def test_an_interrupt_right_after_the_prompt_stops_that_prompt(fake_llm: Start, keel: Keel) -> None:
    """The SDK's ``interrupt()`` right after ``query()`` (vendored test_interrupt) reaches keel
    before the run has begun: it still stops that prompt (an interrupted result), and the next
    prompt runs.

    Claude Code 2.1.328 (vendored test_interrupt with the companion check in
    tests/integration/sdk_e2e/test_companions.py, ``SDK_E2E_CLI=<claude>``): the turn ends as
    ``error_during_execution`` with ``errors``."""
    server = fake_llm({"steps": ["Something else."]})
    interrupt = {"type": "control_request", "request_id": "req_int", "request": {"subtype": "interrupt"}}
    lines = stream(keel, server, user("Count from 1 to 100 slowly."), interrupt, user("now something else"))
    cut, after = results(lines)
    assert cut["subtype"] == "error_during_execution" and cut["is_error"] is True and cut["errors"], cut
    assert after["result"] == "Something else." and not after["is_error"], after


FIXTURE = str(Path(__file__).parents[3] / "mcp_fixtures" / "server.py")


def test_print_mode_init_reports_mcp_servers_and_their_tools(fake_llm: Start, keel: Keel) -> None:
    """``-p`` init lists each MCP server with its status, and the servers' tools among ``tools``;
    and what else Claude Code's init says (output style, permission mode, key source, commands).

    Claude Code 2.1.328: ``claude -p hi --output-format stream-json --verbose --mcp-config
    '{"mcpServers": {"fx": {"command": "python", "args": ["tests/mcp_fixtures/server.py",
    "stdio"]}}}'`` prints ``"mcp_servers": [{"name": "fx", "status": "connected", "source":
    "dynamic"}]``, ``mcp__fx__add`` ... in ``tools``, ``"output_style": "default"``,
    ``"permissionMode": "default"``, ``"apiKeySource": "ANTHROPIC_API_KEY"``, ``slash_commands``,
    ``agents``, ``skills``."""
    server = fake_llm({"steps": ["hello"]})
    config = json.dumps({"mcpServers": {"fx": {"command": sys.executable, "args": [FIXTURE, "stdio"]}}})
    run = keel(
        "-p", "hi", *STREAM[:3], "--mcp-config", config, env={**wire_env(server, "anthropic"), "MCP_TIMEOUT": "60000"}
    )
    (init,) = inits(run.lines())
    assert init["mcp_servers"] == [{"name": "fx", "status": "connected", "source": "dynamic"}]
    assert "mcp__fx__add" in init["tools"]
    # and the rest of Claude Code's -p init (the same fields as under the SDK)
    assert init["output_style"] == "default" and init["permissionMode"] == "default"
    assert init["apiKeySource"] == "ANTHROPIC_API_KEY" and "clear" in init["slash_commands"]
    assert isinstance(init["agents"], list) and isinstance(init["skills"], list)


def test_sdk_mode_reports_configured_mcp_servers_connected(fake_llm: Start, project: Path) -> None:
    """Under the SDK, a configured (not in-process) server is in the init message, and
    ``get_mcp_status()`` says ``connected`` (with its tools) once its tool has run.

    Claude Code 2.1.328 (the official SDK with ``mcp_servers={"fx": {"command": ..., "args":
    [...]}}``): init ``mcp_servers`` ``[{"name": "fx", "status": "connected", ...}]``; status
    ``connected``."""
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, SystemMessage

    add = {"tool_calls": [{"name": "mcp__fx__add", "input": {"a": 2, "b": 3}}]}
    server = fake_llm({"steps": [add, "It is 5."]})
    fx: Any = {"type": "stdio", "command": sys.executable, "args": [FIXTURE, "stdio"]}

    async def run() -> tuple[list[Any], dict[str, Any]]:
        opts = ClaudeAgentOptions(
            cli_path=KEEL,
            cwd=str(project),
            env={**wire_env(server, "anthropic"), "MCP_TIMEOUT": "60000"},
            mcp_servers={"fx": fx},
            allowed_tools=["mcp__fx__add"],
        )
        async with ClaudeSDKClient(opts) as client:
            await client.query("add 2 and 3")
            messages = [m async for m in client.receive_response()]
            return messages, dict(await client.get_mcp_status())

    messages, status = asyncio.run(asyncio.wait_for(run(), 120))
    init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
    assert [(s["name"], s["status"]) for s in init.data["mcp_servers"]] == [("fx", "connected")]
    (fx_status,) = status["mcpServers"]
    assert fx_status["name"] == "fx" and fx_status["status"] == "connected"
    assert "add" in {t["name"] for t in fx_status["tools"]}


def test_the_session_after_clear_starts_with_source_clear(fake_llm: Start, keel: Keel, project: Path) -> None:
    """The new session ``/clear`` starts runs SessionStart hooks with ``source: "clear"`` (a
    ``"clear"`` matcher selects them), as Claude Code 2.1.328 does (its hooks documentation:
    SessionStart matchers ``startup``, ``resume``, ``clear``, ``compact``)."""
    seen = project.parent / "session-start.jsonl"
    hook = {"type": "command", "command": f"cat >> {seen}; echo >> {seen}"}
    settings = {"hooks": {"SessionStart": [{"matcher": "startup|clear", "hooks": [hook]}]}}
    server = fake_llm({"steps": ["one"]})
    stream(keel, server, user("Reply with exactly: one"), user("/clear"), args=("--settings", json.dumps(settings)))
    sources = [json.loads(line)["source"] for line in seen.read_text().splitlines() if line.strip()]
    assert sources == ["startup", "clear"]
