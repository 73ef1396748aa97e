"""Claude Code 2.1.328's tool names work in keel's rules and hook matchers (issue #34 item 9).

Claude Code 2.1.328 names the tool that stops a background shell ``TaskStop`` with the aliases
``KillShell`` and ``KillBash`` (its tool table: ``Ua="TaskStop",q7t=["KillShell","KillBash"]``), and
the subagent tool ``Agent`` (keel: ``Task``); it knows ``TaskOutput`` and ``BashOutputTool`` as
former names of the background output reader (keel: ``BashOutput``). A settings file or flag written
for Claude Code with those names must mean keel's tools.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

Keel = Callable[..., KeelRun]
FakeLLM = Callable[[Any], FakeLLMServer]
LOGGER = "import os, sys; open(os.environ['HOOK_LOG'], 'a').write(sys.stdin.read().replace(chr(10), ' ') + chr(10))"


def _call(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "input": tool_input}]}


def _result(server: FakeLLMServer, index: int) -> str:
    return json.dumps(server.cursor.requests[index]["body"]["messages"][-1]["content"])


def test_disallowing_taskstop_blocks_killshell(fake_llm: FakeLLM, keel: Keel) -> None:
    server = fake_llm({"steps": [_call("KillShell", shell_id="nope"), _call("BashOutput", bash_id="nope"), "done"]})
    run = keel("-p", "go", "--disallowedTools", "TaskStop,TaskOutput", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    for index in (1, 2):
        assert "denied" in _result(server, index).lower() or "disallowed" in _result(server, index).lower()
    # without the rule the same calls run (and fail on the unknown id): the denial was the rule's
    server = fake_llm({"steps": [_call("KillShell", shell_id="nope"), "done"]})
    assert keel("-p", "go", env=wire_env(server, "anthropic")).code == 0
    assert "denied" not in _result(server, 1).lower()


def test_hook_matchers_with_claude_codes_names(project: Path, tmp_path: Path, fake_llm: FakeLLM, keel: Keel) -> None:
    hook = {"type": "command", "command": f"{sys.executable} -c {json.dumps(LOGGER)}"}
    groups = [{"matcher": m, "hooks": [hook]} for m in ("TaskStop", "Agent")]
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": groups}}))
    assert keel("trust", str(project)).code == 0
    steps = [
        _call("KillShell", shell_id="nope"),
        _call("Task", description="look", prompt="say hi", subagent_type="general-purpose"),
        "hi",
        "done",
    ]
    server = fake_llm({"steps": steps})
    log = tmp_path / "hooks.jsonl"
    run = keel("-p", "go", env={**wire_env(server, "anthropic"), "HOOK_LOG": str(log)})
    assert run.code == 0, run.stderr
    fired = [json.loads(line)["tool_name"] for line in log.read_text().splitlines()]
    assert fired == ["KillShell", "Task"]


def test_a_blocking_hook_sees_every_name_of_the_tool(
    project: Path, tmp_path: Path, fake_llm: FakeLLM, keel: Keel
) -> None:
    """A PreToolUse hook that blocks (exit 2) with the matcher ``Task``, ``^Agent$`` or ``Agent|mcp__.*``
    blocks the subagent whichever name the model calls it by (before, a call to ``Agent`` slipped past
    a ``Task`` hook, and a pattern naming ``Agent`` missed ``Task``)."""
    block = "cat > /dev/null; echo blocked-by-hook >&2; exit 2"
    (project / ".claude").mkdir()
    settings = project / ".claude" / "settings.json"
    for matcher, called in (("Task", "Agent"), ("^Agent$", "Task"), ("Agent|mcp__.*", "Task")):
        groups = [{"matcher": matcher, "hooks": [{"type": "command", "command": block}]}]
        settings.write_text(json.dumps({"hooks": {"PreToolUse": groups}}))
        assert keel("trust", str(project)).code == 0
        task = {"description": "x", "prompt": "say hi", "subagent_type": "general-purpose"}
        server = fake_llm({"steps": [_call(called, **task), "SUBAGENT-RAN", "done"]})
        run = keel("-p", "go", env=wire_env(server, "anthropic"))
        assert run.code == 0, run.stderr
        assert "blocked-by-hook" in _result(server, 1), (matcher, called)
        children = [r for r in server.cursor.requests if "You are an agent for keel" in str(r["body"].get("system"))]
        assert children == [], (matcher, called)  # the subagent never ran


def test_an_agents_disallowed_tools_in_claude_codes_names(project: Path, fake_llm: FakeLLM, keel: Keel) -> None:
    """``disallowedTools: TaskStop, TaskOutput`` takes KillShell and BashOutput from the subagent."""
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "calm.md").write_text(
        "---\nname: calm\ndescription: no shell control\ndisallowedTools: TaskStop, TaskOutput\n---\nYou are calm.\n"
    )
    task = {"description": "x", "prompt": "say hi", "subagent_type": "calm"}
    server = fake_llm({"steps": [_call("Task", **task), "hi", "done"]})
    assert keel("-p", "go", env=wire_env(server, "anthropic")).code == 0
    [child] = [r["body"] for r in server.cursor.requests if "You are calm." in str(r["body"].get("system"))]
    offered = {t["name"] for t in child["tools"]}
    assert "Bash" in offered and not offered & {"KillShell", "BashOutput"}
