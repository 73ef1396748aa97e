"""Hook payloads of a child agent's tool calls carry the session's ids and the child's
``agent_id``/``agent_type``, as Claude Code 2.1.328 sends them (checked against the real
``claude -p``: PreToolUse and PostToolUse of a subagent's Bash call keep the parent's
``session_id`` and ``transcript_path`` and add ``agent_id`` and ``agent_type``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit import run_session, session


async def test_a_child_agents_tool_calls_are_hooked_with_its_agent_id(project: Path) -> None:
    seen: list[dict[str, Any]] = []

    def log(payload: dict[str, Any]) -> None:
        seen.append(payload)

    handler = {"hooks": [{"type": "python", "callable": log}]}
    hooks = {e: [handler] for e in ("PreToolUse", "PostToolUse", "SubagentStart", "SubagentStop")}
    task = {"description": "child work", "prompt": "run one echo", "subagent_type": "general-purpose"}
    steps = [
        {"tool_calls": [{"name": "Task", "input": task}]},
        {"tool_calls": [{"name": "Bash", "input": {"command": "echo child-step"}}]},
        "child done",
        {"tool_calls": [{"name": "Bash", "input": {"command": "echo parent-step"}}]},
        "parent done",
    ]
    rt = session(project, steps, allowed_tools=["Bash", "Task"], hooks=hooks)
    assert (await run_session(rt, "delegate")).result == "parent done"

    def of(event: str, **match: Any) -> list[dict[str, Any]]:
        return [p for p in seen if p["hook_event_name"] == event and all(p.get(k) == v for k, v in match.items())]

    start = of("SubagentStart")[0]
    agent_id = start["agent_id"]
    child_calls = [p for p in seen if p.get("tool_input") == {"command": "echo child-step"}]
    assert [p["hook_event_name"] for p in child_calls] == ["PreToolUse", "PostToolUse"]  # both, as Claude Code
    for p in child_calls:
        assert p["session_id"] == rt.session_id and p["transcript_path"] == str(rt.session_path)
        assert p["agent_id"] == agent_id and p["agent_type"] == "general-purpose"
        transcript = Path(p["agent_transcript_path"])  # keel's addition: the child's own transcript
        assert transcript.name == f"agent-{agent_id}.jsonl" and "echo child-step" in transcript.read_text()
    assert child_calls[1]["tool_response"]["stdout"] == "child-step"
    # the parent's own calls, before and after the child, carry no agent fields
    parent_calls = of("PreToolUse", tool_name="Task") + [
        p for p in seen if p.get("tool_input") == {"command": "echo parent-step"}
    ]
    assert len(parent_calls) == 3 and all("agent_id" not in p for p in parent_calls)
    assert of("SubagentStop")[0]["agent_id"] == agent_id


async def test_agent_iteration_start_and_end_bracket_each_request_and_its_tools(project: Path) -> None:
    order: list[tuple[str, Any]] = []

    def log(payload: dict[str, Any]) -> None:
        event = payload["hook_event_name"]
        if event.startswith("AgentIteration"):
            order.append((event, {k: payload[k] for k in ("iteration", "tool_calls") if k in payload}))
        else:
            order.append((event, payload.get("tool_input", {}).get("command")))

    handler = {"hooks": [{"type": "python", "callable": log}]}
    hooks = {e: [handler] for e in ("AgentIterationStart", "AgentIterationEnd", "PostToolUse")}
    two = [{"name": "Bash", "input": {"command": f"echo {n}"}} for n in ("a", "b")]
    rt = session(project, [{"tool_calls": two}, "done"], retries=None, allowed_tools=["Bash"], hooks=hooks)
    assert (await run_session(rt, "go")).result == "done"
    posts = sorted(o for o in order if o[0] == "PostToolUse")
    assert posts == [("PostToolUse", "echo a"), ("PostToolUse", "echo b")]
    assert [o for o in order if o[0] != "PostToolUse"] == [
        ("AgentIterationStart", {"iteration": 1}),
        ("AgentIterationEnd", {"iteration": 1, "tool_calls": 2}),
        ("AgentIterationStart", {"iteration": 2}),
        ("AgentIterationEnd", {"iteration": 2, "tool_calls": 0}),
    ]
    assert order.index(("AgentIterationEnd", {"iteration": 1, "tool_calls": 2})) == 3  # after both calls
