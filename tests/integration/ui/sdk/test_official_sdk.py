"""The official Claude Agent SDK (``claude-agent-sdk``, from the dev extra) as the client of keel.

Each test drives the real ``keel`` console script through ``ClaudeAgentOptions(cli_path=...)``,
with the scripted model behind ``keel dev fake-llm``; the SDK parses every line keel prints (a
line it cannot parse raises), and the effects are checked on disk and in the server's request log.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    AgentDefinition,
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    ToolPermissionContext,
    UserMessage,
    create_sdk_mcp_server,
    query,
    tool,
)

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, session_files, wait_until_async, wire_env

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
Start = Callable[[Any], FakeLLMServer]


def options(server: FakeLLMServer, project: Path, **kw: Any) -> ClaudeAgentOptions:
    return ClaudeAgentOptions(cli_path=KEEL, cwd=str(project), env=wire_env(server, "anthropic"), **kw)


def tool_results(server: FakeLLMServer, index: int) -> list[dict[str, Any]]:
    """The tool_result blocks of the last user message of request ``index``."""
    last = server.cursor.requests[index]["body"]["messages"][-1]
    return [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content)
    return str(content)


def test_one_shot_query_writes_a_file(fake_llm: Start, project: Path) -> None:
    target = project / "a.txt"
    write = {"name": "Write", "input": {"file_path": str(target), "content": "hi\n"}}
    steps = [{"text": "Writing.", "tool_calls": [write]}]
    server = fake_llm({"steps": [*steps, "Done."]})

    async def run() -> list[Any]:
        return [m async for m in query(prompt="write a.txt", options=options(server, project, allowed_tools=["Write"]))]

    messages = asyncio.run(run())
    kinds = [type(m).__name__ for m in messages]
    assert kinds == ["SystemMessage", "AssistantMessage", "UserMessage", "AssistantMessage", "ResultMessage"], kinds
    init = messages[0]
    assert isinstance(init, SystemMessage) and init.subtype == "init" and "Write" in init.data["tools"]
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.subtype == "success" and result.result == "Done."
    assert result.num_turns == 2 and result.session_id == init.data["session_id"]
    assert target.read_text() == "hi\n"
    first = server.cursor.requests[0]["body"]
    assert first["messages"][0]["content"][0]["text"] == "write a.txt"
    assert "system" not in first or not first["system"]  # the SDK passes --system-prompt "" by default


def test_client_session_two_queries_and_an_interrupt(fake_llm: Start, project: Path) -> None:
    server = fake_llm({"steps": ["First answer.", {"text": "never seen", "delay_s": 60}, "Third answer."]})

    async def run() -> tuple[list[Any], list[Any], list[Any]]:
        async with ClaudeSDKClient(options(server, project, include_partial_messages=True)) as client:
            await client.query("one")
            first = [m async for m in client.receive_response()]
            await client.query("two")
            await wait_until_async(lambda: len(server.cursor.requests) >= 2, 60, "the second request")
            await client.interrupt()
            second = [m async for m in client.receive_response()]
            await client.query("three")
            third = [m async for m in client.receive_response()]
        return first, second, third

    first, second, third = asyncio.run(asyncio.wait_for(run(), 60))
    assert isinstance(first[-1], ResultMessage) and first[-1].result == "First answer."
    streamed = [m.event["delta"].get("text") for m in first if isinstance(m, StreamEvent) and "delta" in m.event]
    assert "".join(t for t in streamed if isinstance(t, str)) == "First answer."
    assert isinstance(second[-1], ResultMessage) and second[-1].is_error
    assert not any(isinstance(m, AssistantMessage) for m in second)  # the slow reply was cut off
    assert isinstance(third[-1], ResultMessage) and third[-1].result == "Third answer." and not third[-1].is_error
    assert len(server.cursor.requests) == 3
    texts = json.dumps(server.cursor.requests[2]["body"]["messages"])
    assert "First answer." in texts and "three" in texts  # one conversation across the queries


def test_can_use_tool_denies_one_call_and_allows_another(fake_llm: Start, project: Path) -> None:
    allowed, denied = project / "allowed.txt", project / "denied.txt"
    calls = [
        {"name": "Write", "input": {"file_path": str(allowed), "content": "yes\n"}},
        {"name": "Bash", "input": {"command": f"touch {denied}"}},
    ]
    server = fake_llm({"steps": [{"text": "Two things.", "tool_calls": calls}, "Done."]})
    asked: list[tuple[str, str | None]] = []

    async def can_use_tool(
        name: str, data: dict[str, Any], ctx: ToolPermissionContext
    ) -> PermissionResultAllow | PermissionResultDeny:
        asked.append((name, ctx.tool_use_id))
        if name == "Bash":
            return PermissionResultDeny(message="no shell today")
        return PermissionResultAllow()

    async def run() -> list[Any]:
        async with ClaudeSDKClient(options(server, project, can_use_tool=can_use_tool)) as client:
            await client.query("do two things")
            return [m async for m in client.receive_response()]

    messages = asyncio.run(asyncio.wait_for(run(), 60))
    assert sorted(n for n, _ in asked) == ["Bash", "Write"] and all(i for _, i in asked)
    assert allowed.read_text() == "yes\n" and not denied.exists()
    results = {b["tool_use_id"]: b for b in tool_results(server, 1)}
    assert len(results) == 2
    bash = next(b for b in results.values() if b.get("is_error"))
    assert "no shell today" in result_text(bash)  # the host's own words reach the model
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.permission_denials
    assert result.permission_denials[0]["tool_name"] == "Bash"


def test_a_python_pre_tool_use_hook_blocks_a_call(fake_llm: Start, project: Path) -> None:
    marker = project / "hooked.txt"
    steps = [{"tool_calls": [{"name": "Bash", "input": {"command": f"touch {marker}"}}]}, "Blocked, fine."]
    server = fake_llm({"steps": steps})
    seen: list[dict[str, Any]] = []

    async def guard(data: Any, tool_use_id: str | None, ctx: Any) -> Any:
        seen.append(dict(data))
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "the SDK hook says no",
            }
        }

    hooks: Any = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[guard])]}

    async def run() -> list[Any]:
        opts = options(server, project, allowed_tools=["Bash"], hooks=hooks)
        async with ClaudeSDKClient(opts) as client:
            await client.query("touch it")
            return [m async for m in client.receive_response()]

    messages = asyncio.run(asyncio.wait_for(run(), 60))
    assert not marker.exists()
    assert seen and seen[0]["tool_name"] == "Bash" and seen[0]["hook_event_name"] == "PreToolUse"
    assert seen[0]["tool_input"]["command"] == f"touch {marker}"
    (block,) = tool_results(server, 1)
    assert block.get("is_error") and "the SDK hook says no" in result_text(block)
    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "Blocked, fine."


def test_an_sdk_mcp_server_tool_is_called_by_the_model(fake_llm: Start, project: Path) -> None:
    ledger = project / "ledger.txt"

    @tool("add", "Add two numbers", {"a": float, "b": float})
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        total = args["a"] + args["b"]
        ledger.write_text(f"{args['a']}+{args['b']}={total}\n")
        return {"content": [{"type": "text", "text": f"sum is {total}"}]}

    calc = create_sdk_mcp_server("calc", tools=[add])
    steps = [{"tool_calls": [{"name": "mcp__calc__add", "input": {"a": 2, "b": 3}}]}, "It is 5."]
    server = fake_llm({"steps": steps})

    async def run() -> list[Any]:
        opts = options(server, project, mcp_servers={"calc": calc}, allowed_tools=["mcp__calc__add"])
        async with ClaudeSDKClient(opts) as client:
            status = await client.get_mcp_status()
            assert [s["name"] for s in status["mcpServers"]] == ["calc"]
            await client.query("add 2 and 3")
            return [m async for m in client.receive_response()]

    messages = asyncio.run(asyncio.wait_for(run(), 60))
    assert ledger.read_text() == "2+3=5\n"
    offered = {t["name"]: t for t in server.cursor.requests[0]["body"]["tools"]}
    assert offered["mcp__calc__add"]["input_schema"]["properties"] == {"a": {"type": "number"}, "b": {"type": "number"}}
    (block,) = tool_results(server, 1)
    assert result_text(block) == "sum is 5" and not block.get("is_error")
    assert any(isinstance(m, UserMessage) for m in messages)
    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "It is 5."


def test_set_permission_mode_changes_what_runs(fake_llm: Start, project: Path) -> None:
    first, second = project / "first.txt", project / "second.txt"
    steps = [
        {"tool_calls": [{"name": "Write", "input": {"file_path": str(first), "content": "1\n"}}]},
        "Could not.",
        {"tool_calls": [{"name": "Write", "input": {"file_path": str(second), "content": "2\n"}}]},
        "Wrote it.",
    ]
    server = fake_llm({"steps": steps})

    async def run() -> tuple[Any, Any]:
        async with ClaudeSDKClient(options(server, project)) as client:
            await client.query("write first")
            before = [m async for m in client.receive_response()]
            await client.set_permission_mode("acceptEdits")
            await client.query("write second")
            after = [m async for m in client.receive_response()]
        return before[-1], after[-1]

    before, after = asyncio.run(asyncio.wait_for(run(), 60))
    assert not first.exists()  # default mode, nobody to ask: denied
    assert second.read_text() == "2\n"  # acceptEdits allows edits in the project
    (denied,) = tool_results(server, 1)
    assert denied.get("is_error")
    assert isinstance(before, ResultMessage) and isinstance(after, ResultMessage) and after.result == "Wrote it."


def test_resume_and_set_model(fake_llm: Start, project: Path) -> None:
    server = fake_llm({"steps": ["Remembered: 42.", "You said 42.", "From the other model."]})

    async def run() -> tuple[list[Any], list[Any], list[Any]]:
        first = [m async for m in query(prompt="remember 42", options=options(server, project))]
        session = first[-1].session_id
        again = [m async for m in query(prompt="what did I say?", options=options(server, project, resume=session))]
        async with ClaudeSDKClient(options(server, project, resume=session)) as client:
            await client.set_model("anthropic:claude-haiku-4-5")
            await client.query("once more")
            third = [m async for m in client.receive_response()]
        return first, again, third

    first, again, third = asyncio.run(asyncio.wait_for(run(), 90))
    assert isinstance(again[-1], ResultMessage) and again[-1].session_id == first[-1].session_id
    requests = [r["body"] for r in server.cursor.requests]
    assert "remember 42" in json.dumps(requests[1]["messages"]) and "Remembered: 42." in json.dumps(
        requests[1]["messages"]
    )
    assert requests[0]["model"] == "claude-sonnet-4-5" and requests[2]["model"] == "claude-haiku-4-5"
    assert isinstance(third[-1], ResultMessage) and third[-1].result == "From the other model."
    assert "You said 42." in json.dumps(requests[2]["messages"])


def test_fork_session_goes_on_in_a_copy(fake_llm: Start, project: Path, tmp_path: Path) -> None:
    server = fake_llm({"steps": ["Noted.", "Forked answer."]})

    async def run() -> tuple[Any, Any]:
        first = [m async for m in query(prompt="note this", options=options(server, project))][-1]
        opts = options(server, project, resume=first.session_id, fork_session=True)
        forked = [m async for m in query(prompt="and then?", options=opts)][-1]
        return first, forked

    first, forked = asyncio.run(asyncio.wait_for(run(), 60))
    assert isinstance(forked, ResultMessage) and forked.session_id != first.session_id
    assert "Noted." in json.dumps(server.cursor.requests[1]["body"]["messages"])
    logs = {p.stem: p for p in session_files(tmp_path / "keelhome")}
    assert set(logs) == {first.session_id, forked.session_id}
    assert "Forked answer." not in logs[first.session_id].read_text()  # the original is untouched
    assert "Forked answer." in logs[forked.session_id].read_text()


def _skill(project: Path, name: str, description: str) -> None:
    folder = project / ".claude" / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nDo the {name} thing.\n")


def test_sdk_defined_agents_and_a_skill_allowlist(fake_llm: Start, project: Path) -> None:
    """``ClaudeAgentOptions(agents=..., skills=[...])`` travel in ``initialize``: the agent is a
    subagent type the model can call (its prompt and tools, from code), and only the listed
    skills are offered to the model."""
    _skill(project, "release", "Cut a release")
    _skill(project, "deploy", "Ship to production")
    task = {"description": "greet", "prompt": "say hello", "subagent_type": "greeter"}
    server = fake_llm({"steps": [{"tool_calls": [{"name": "Task", "input": task}]}, "Hello from the child.", "Done."]})
    greeter = AgentDefinition(description="Greets people", prompt="You are the greeter agent.", tools=["Read"])

    async def run() -> list[Any]:
        opts = options(server, project, agents={"greeter": greeter}, skills=["release"])
        async with ClaudeSDKClient(opts) as client:
            info = await client.get_server_info()
            await client.query("greet someone")
            return [info, *[m async for m in client.receive_response()]]

    info, *messages = asyncio.run(asyncio.wait_for(run(), 60))
    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "Done.", messages[-1]
    assert info is not None and "greeter" in [a["name"] for a in info["agents"]]
    assert any(c["name"] == "compact" for c in info["commands"])
    init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
    assert "greeter" in init.data["agents"] and init.data["skills"] == ["release"]
    parent, child = server.cursor.requests[0]["body"], server.cursor.requests[1]["body"]
    task_tool = next(t for t in parent["tools"] if t["name"] in ("Task", "Agent"))
    assert "greeter" in task_tool["description"] and "Greets people" in task_tool["description"]
    skill_tool = next(t for t in parent["tools"] if t["name"] == "Skill")
    assert "release" in skill_tool["description"] and "deploy" not in skill_tool["description"]
    assert "You are the greeter agent." in json.dumps(child.get("system", ""))
    assert [t["name"] for t in child["tools"]] == ["Read"]
    assert "Hello from the child." in json.dumps(server.cursor.requests[2]["body"]["messages"])


def test_malformed_sdk_agents_are_refused_in_one_line(fake_llm: Start, project: Path) -> None:
    server = fake_llm({"steps": ["never"]})
    run = subprocess.run(
        [KEEL, "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"],
        input=json.dumps(
            {"type": "control_request", "request_id": "r1", "request": {"subtype": "initialize", "agents": ["x"]}}
        )
        + "\n",
        capture_output=True,
        text=True,
        cwd=project,
        env={**os.environ, **wire_env(server, "anthropic")},
        timeout=60,
    )
    assert "'agents' must be an object" in run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert not server.cursor.requests
