"""The recorder's translation of a session's events, into a list (the sink a test reads)."""

from __future__ import annotations

from typing import Any

from agentkeel.core.events import AssistantMessage, PermissionDecided, RunFinished, ToolFinished, ToolResults
from agentkeel.core.extensions import PromptInfo
from agentkeel.core.types import Message, ToolResultBlock, Usage
from agentkeel.telemetry.config import read_config
from agentkeel.telemetry.recorder import Recorder, changed_lines, language

SECRET = "sk-ant-api03-FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000-x"


class ListSink:
    def __init__(self) -> None:
        self.points: list[tuple[str, float, dict[str, Any]]] = []
        self.events: list[tuple[str, dict[str, Any]]] = []

    def add(self, metric: str, value: float, attributes: dict[str, Any]) -> None:
        self.points.append((metric, value, attributes))

    def emit(self, event: str, attributes: dict[str, Any]) -> None:
        self.events.append((event, attributes))


def recorder(**env: str) -> tuple[Recorder, ListSink]:
    config = read_config({"CLAUDE_CODE_ENABLE_TELEMETRY": "1", **env})
    assert config is not None
    sink = ListSink()
    rec = Recorder(config, sink, session_id="s-1", model="m", provider="anthropic", env={}, version="9.9")
    return rec, sink


def _tool(rec: Recorder, name: str, tool_input: dict[str, Any], decision: str = "allow", source: str = "rule") -> None:
    rec(PermissionDecided(tool_use_id="t1", tool_name=name, decision=decision, source=source))  # type: ignore[arg-type]
    rec(ToolFinished(tool_use_id="t1", name=name, is_error=False, duration_ms=5, input=tool_input))
    block = ToolResultBlock(tool_use_id="t1", content="ok")
    rec(ToolResults(message=Message(role="user", content=[block])))


def test_lines_of_code_and_edit_decisions() -> None:
    rec, sink = recorder()
    _tool(rec, "Edit", {"file_path": "/p/a.py", "old_string": "a\nb\n", "new_string": "a\nc\nd\n"})
    lines = {p[2]["type"]: p[1] for p in sink.points if p[0] == "claude_code.lines_of_code.count"}
    assert lines == {"added": 2, "removed": 1}
    decisions = [p[2] for p in sink.points if p[0] == "claude_code.code_edit_tool.decision"]
    assert [(d["decision"], d["source"], d["tool_name"], d["language"]) for d in decisions] == [
        ("accept", "config", "Edit", "Python")
    ]
    assert [e[0] for e in sink.events] == ["claude_code.tool_decision", "claude_code.tool_result"]


def test_a_rejected_call_has_a_decision_and_no_result() -> None:
    rec, sink = recorder()
    _tool(rec, "Write", {"file_path": "/p/x.md", "content": "x"}, decision="deny", source="ask")
    assert [e[0] for e in sink.events] == ["claude_code.tool_decision"]
    assert sink.events[0][1]["decision"] == "reject" and sink.events[0][1]["source"] == "user_reject"
    assert not [p for p in sink.points if p[0] == "claude_code.lines_of_code.count"]


def test_commits_and_pull_requests_from_bash() -> None:
    rec, sink = recorder()
    _tool(rec, "Bash", {"command": "git add -A && git commit -m 'x'"})
    _tool(rec, "Bash", {"command": "gh pr create --fill"})
    _tool(rec, "Bash", {"command": "echo git commit; GIT_AUTHOR_NAME=x git -C sub -c a=b commit --amend"})
    names = [p[0] for p in sink.points]
    assert names.count("claude_code.commit.count") == 2
    assert names.count("claude_code.pull_request.count") == 1


def test_prompts_redacted_unless_asked_and_secrets_always() -> None:
    rec, sink = recorder()
    rec.prompt(PromptInfo(f"use {SECRET}", first=True))
    assert sink.events[0][1]["prompt"] == "<REDACTED>"
    rec, sink = recorder(OTEL_LOG_USER_PROMPTS="1")
    rec.prompt(PromptInfo(f"use {SECRET}", first=True))
    text = sink.events[0][1]["prompt"]
    assert text.startswith("use ") and SECRET not in text


def test_tokens_cost_and_active_time() -> None:
    rec, sink = recorder(OTEL_METRICS_INCLUDE_SESSION_ID="false", OTEL_METRICS_INCLUDE_VERSION="1")
    rec.prompt(PromptInfo("hi", first=True))
    usage = Usage(input_tokens=10, output_tokens=3, cache_read_tokens=7, cache_write_tokens=2)
    rec(AssistantMessage(message=Message(role="assistant", content=[]), model="m", usage=usage, cost_usd=0.5))
    rec(RunFinished(subtype="success", is_error=False, result="", num_turns=1, duration_ms=1, usage=usage,
                    total_cost_usd=0.5))  # fmt: skip
    tokens = {p[2]["type"]: p[1] for p in sink.points if p[0] == "claude_code.token.usage"}
    assert tokens == {"input": 10, "output": 3, "cacheRead": 7, "cacheCreation": 2}
    assert [p[1] for p in sink.points if p[0] == "claude_code.cost.usage"] == [0.5]
    assert [p[2]["type"] for p in sink.points if p[0] == "claude_code.active_time.total"] == ["cli"]
    assert all("session.id" not in p[2] and p[2]["app.version"] == "9.9" for p in sink.points)


def test_helpers() -> None:
    assert changed_lines("", "one\ntwo\n") == (2, 0)
    assert language("Dockerfile") == "Dockerfile" and language("x.txt") == "Plain text" and language("x.q") == "unknown"


def test_decision_sources_and_tool_sources() -> None:
    rec, sink = recorder()
    _tool(rec, "mcp__docs__search", {"q": "x"}, source="hook")
    _tool(rec, "Bash", {"command": "ls"}, source="ask")
    decisions = [e[1] for e in sink.events if e[0] == "claude_code.tool_decision"]
    assert [(d["tool_source"], d["source"], d["decision"]) for d in decisions] == [
        ("mcp", "hook", "accept"),
        ("builtin", "user_temporary", "accept"),
    ]
