"""keel's own Python SDK (``agentkeel.ui.sdk``): in-process and subprocess transports, one API."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.ui.sdk import (
    AssistantMessage,
    HookMatcher,
    KeelAgentOptions,
    KeelSDKClient,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    ToolPermissionContext,
    create_sdk_mcp_server,
    query,
    tool,
)
from kit import KEEL, KeelRun, session_files, wait_until_async, wire_env
from scenarios import twenty_step_session

Start = Callable[[Any], FakeLLMServer]
TRANSPORTS = ["in-process", "subprocess"]
_VOLATILE = {"uuid", "parentUuid", "timestamp", "sessionId", "session_id", "duration_ms", "cwd", "usage", "cost_usd"}
# a background job's output so far depends on when BashOutput reads it: the one race in the script
_RUNNING = re.compile(r"<status>running</status>(\\n)+<output>.*?</output>")


def normalized(text: str, root: Path) -> str:
    return _RUNNING.sub("<status>running</status><output>...</output>", text.replace(str(root), "<ROOT>"))


def collect(prompt: str, opts: KeelAgentOptions) -> list[Any]:
    async def run() -> list[Any]:
        return [m async for m in query(prompt=prompt, options=opts)]

    return asyncio.run(asyncio.wait_for(run(), 120))


def transcript(log: Path, root: Path) -> list[Any]:
    """The conversation a session file holds, with ids, times and the project's location removed."""
    out = []
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if entry["type"] not in ("user", "assistant", "tool_results"):
            continue
        kept = {k: v for k, v in entry.items() if k not in _VOLATILE}
        out.append(json.loads(normalized(json.dumps(kept), root)))
    return out


def test_in_process_sdk_runs_the_twenty_step_session_like_keel_p(fake_llm: Start, tmp_path: Path) -> None:
    web = fake_llm({"steps": []})
    url = web.url + "/_keel/health"
    roots = [tmp_path / "cli", tmp_path / "sdk"]
    for root in roots:
        (root / "project" / ".git").mkdir(parents=True)
    cli_server = fake_llm(twenty_step_session(roots[0] / "project", url))
    proc = subprocess.run(
        [KEEL, "-p", "build calc.py with a test", "--permission-mode", "bypassPermissions"],
        cwd=roots[0] / "project",
        env={**os.environ, **wire_env(cli_server, "anthropic"), "KEEL_HOME": str(roots[0] / "keelhome")},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    sdk_server = fake_llm(twenty_step_session(roots[1] / "project", url))
    opts = KeelAgentOptions(
        cwd=roots[1] / "project",
        permission_mode="bypassPermissions",
        env={**wire_env(sdk_server, "anthropic"), "KEEL_HOME": str(roots[1] / "keelhome")},  # separate memories
    )
    messages = collect("build calc.py with a test", opts)
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.num_turns == 20 and not result.is_error
    assert result.result == proc.stdout.strip()
    logs = [session_files(root / "keelhome") for root in roots]
    assert [len(found) for found in logs] == [1, 1]
    cli_t, sdk_t = (transcript(found[0], root) for found, root in zip(logs, roots, strict=True))
    assert len(cli_t) == len(sdk_t) > 40
    assert cli_t == sdk_t
    # and the model saw the same requests
    cli_bodies = [normalized(json.dumps(r["body"]), roots[0]) for r in cli_server.cursor.requests]
    sdk_bodies = [normalized(json.dumps(r["body"]), roots[1]) for r in sdk_server.cursor.requests]
    assert cli_bodies == sdk_bodies


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_permissions_hooks_and_tools_as_python_callables(transport: str, fake_llm: Start, project: Path) -> None:
    allowed, denied, hooked = project / "allowed.txt", project / "denied.txt", project / "hooked.txt"
    ledger: list[dict[str, Any]] = []

    @tool("add", "Add two numbers", {"a": float, "b": float})
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        ledger.append(args)
        return {"content": [{"type": "text", "text": f"sum is {args['a'] + args['b']}"}]}

    steps = [
        {
            "tool_calls": [
                {"name": "Write", "input": {"file_path": str(allowed), "content": "yes\n"}},
                {"name": "Write", "input": {"file_path": str(denied), "content": "no\n"}},
            ]
        },
        {"tool_calls": [{"name": "Bash", "input": {"command": f"touch {hooked}"}}]},
        {"tool_calls": [{"name": "mcp__calc__add", "input": {"a": 2, "b": 3}}]},
        "All done.",
    ]
    server = fake_llm({"steps": steps})
    asked: list[str] = []

    async def can_use_tool(
        name: str, data: dict[str, Any], ctx: ToolPermissionContext
    ) -> PermissionResultAllow | PermissionResultDeny:
        asked.append(name)
        if data.get("file_path") == str(denied):
            return PermissionResultDeny(message="not that one")
        return PermissionResultAllow()

    async def no_shell(data: dict[str, Any], tool_use_id: str | None, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                       "permissionDecisionReason": "python hook: no shell"}}  # fmt: skip

    opts = KeelAgentOptions(
        cwd=project,
        env=wire_env(server, "anthropic"),
        transport=transport,  # type: ignore[arg-type]
        cli_path=KEEL,
        can_use_tool=can_use_tool,
        allowed_tools=["Bash", "mcp__calc__add"],
        hooks={"PreToolUse": [HookMatcher(matcher="Bash", hooks=[no_shell])]},
        mcp_servers={"calc": create_sdk_mcp_server("calc", tools=[add])},
    )
    messages = collect("go", opts)
    assert allowed.read_text() == "yes\n" and not denied.exists() and not hooked.exists()
    assert asked == ["Write", "Write"]
    assert ledger == [{"a": 2, "b": 3}]
    bodies = [json.dumps(r["body"]["messages"][-1]) for r in server.cursor.requests]
    assert "python hook: no shell" in bodies[2] and "sum is 5" in bodies[3]
    assert "not that one" in bodies[1]  # the host's denial message reaches the model
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.result == "All done."
    # the host denied Write, the Python hook Bash: both listed, as Claude Code lists hook denials
    assert [d["tool_name"] for d in result.permission_denials or []] == ["Write", "Bash"]
    assert isinstance(messages[0], SystemMessage) and "mcp__calc__add" in messages[0].data["tools"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_client_two_queries_interrupt_and_partial_messages(transport: str, fake_llm: Start, project: Path) -> None:
    server = fake_llm({"steps": ["One.", {"text": "never", "delay_s": 60}, "Three."]})
    opts = KeelAgentOptions(
        cwd=project,
        env=wire_env(server, "anthropic"),
        transport=transport,  # type: ignore[arg-type]
        cli_path=KEEL,
        include_partial_messages=True,
    )

    async def run() -> list[list[Any]]:
        async with KeelSDKClient(opts) as client:
            await client.query("first")
            first = [m async for m in client.receive_response()]
            await client.query("second")
            await wait_until_async(lambda: len(server.cursor.requests) >= 2, 60, "the second request")
            await client.interrupt()
            second = [m async for m in client.receive_response()]
            await client.set_permission_mode("plan")
            await client.query("third")
            third = [m async for m in client.receive_response()]
        return [first, second, third]

    first, second, third = asyncio.run(asyncio.wait_for(run(), 60))
    assert isinstance(first[-1], ResultMessage) and first[-1].result == "One."
    deltas = [m.event for m in first if isinstance(m, StreamEvent) and m.event["type"] == "content_block_delta"]
    assert "".join(d["delta"]["text"] for d in deltas) == "One."
    assert isinstance(second[-1], ResultMessage) and second[-1].is_error
    assert not any(isinstance(m, AssistantMessage) for m in second)
    assert isinstance(third[-1], ResultMessage) and third[-1].result == "Three."
    assert "first" in json.dumps(server.cursor.requests[2]["body"]["messages"])


def test_structured_output_in_process(fake_llm: Start, project: Path) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    server = fake_llm({"steps": ['{"n": "five"}', '```json\n{"n": 5}\n```']})
    opts = KeelAgentOptions(
        cwd=project, env=wire_env(server, "anthropic"), output_format={"type": "json_schema", "schema": schema}
    )
    result = collect("count", opts)[-1]
    assert isinstance(result, ResultMessage) and not result.is_error and result.structured_output == {"n": 5}
    assert len(server.cursor.requests) == 2
    assert "does not match the required JSON Schema" in json.dumps(server.cursor.requests[1]["body"]["messages"][-1])
    system = server.cursor.requests[0]["body"]["system"]
    assert json.dumps(schema) in "".join(block["text"] for block in system)


def test_sdk_import_is_lazy(keel: Callable[..., KeelRun]) -> None:
    code = "import sys, agentkeel.ui.sdk; print('agentkeel.app.runtime' in sys.modules, 'pydantic' in sys.modules)"
    out = subprocess.run([str(Path(KEEL).parent / "python"), "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_disconnect_interrupts_a_query_still_running(fake_llm: Start, project: Path, tmp_path: Path) -> None:
    server = fake_llm({"steps": [{"text": "slow", "delay_s": 60}]})

    async def run() -> None:
        client = KeelSDKClient(KeelAgentOptions(cwd=project, env=wire_env(server, "anthropic")))
        await client.connect()
        await client.query("go")
        await wait_until_async(lambda: server.cursor.requests, 60, "the request")
        await asyncio.wait_for(client.disconnect(), 30)  # waiting out the 60 s reply would time out here

    asyncio.run(run())
    (log,) = session_files(tmp_path / "keelhome")
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert any(e.get("subtype") == "interrupted" for e in entries), [e["type"] for e in entries]
    assert entries[-1]["type"] == "session_end"
