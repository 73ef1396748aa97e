"""keel's events and the client's input as ACP payloads (pure translation, no process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp import RequestError, schema

from agentkeel.core.events import AssistantMessage, TodosUpdated, ToolResults, UserMessage
from agentkeel.core.types import ImageBlock, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agentkeel.tools import effects_of
from agentkeel.ui.acp import updates as up
from agentkeel.ui.acp.client import mcp_config, to_message


def test_a_tool_call_is_shown_from_what_the_tool_declares(tmp_path: Path) -> None:
    kinds = {
        name: up.kind_of(effects_of(name)) for name in ("Bash", "Edit", "Write", "Read", "Grep", "Glob", "WebFetch")
    }
    assert kinds == {
        "Bash": "execute",
        "Edit": "edit",
        "Write": "edit",
        "Read": "read",
        "Grep": "search",
        "Glob": "search",
        "WebFetch": "fetch",
    }
    read = ToolUseBlock(id="t1", name="Read", input={"file_path": "src/a.py", "offset": 10})
    start = up.tool_call_start(read, effects_of("Read"), tmp_path)
    assert (start.title, start.kind, start.status) == ("Read src/a.py", "read", "pending")
    assert start.locations == [schema.ToolCallLocation(path=str(tmp_path / "src/a.py"), line=10)]
    bash = ToolUseBlock(id="t2", name="Bash", input={"command": "pytest -q\necho done"})
    assert up.tool_call_start(bash, effects_of("Bash"), tmp_path).title == "pytest -q"


def test_a_failed_edit_shows_its_error_not_a_diff() -> None:
    diff = up.diff_content("/p/a.txt", "a\n", "b\n")
    ok = up.result_update(ToolResultBlock(tool_use_id="t", content="updated"), diff)
    assert ok.status == "completed" and ok.content == [diff]
    failed = up.result_update(ToolResultBlock(tool_use_id="t", content="not found", is_error=True), diff)
    assert failed.status == "failed" and failed.content[0].content.text == "not found"


def test_a_saved_conversation_replays_in_order(tmp_path: Path) -> None:
    use = ToolUseBlock(id="t1", name="Read", input={"file_path": "a.txt"})
    events = [
        UserMessage(message=Message.user("hi")),
        AssistantMessage(
            message=Message(role="assistant", content=[ThinkingBlock(thinking="hmm"), TextBlock(text="Reading."), use])
        ),
        ToolResults(message=Message(role="user", content=[ToolResultBlock(tool_use_id="t1", content="x")])),
        TodosUpdated(todos=[{"content": "do it", "status": "pending"}]),
    ]
    kinds = [u.session_update for u in up.replay(events, effects_of, tmp_path)]
    assert kinds == [
        "user_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
    ]


def test_prompt_content_becomes_one_user_message() -> None:
    message = to_message(
        [
            schema.TextContentBlock(type="text", text="see"),
            schema.ImageContentBlock(type="image", data="AAAA", mime_type="image/png"),
            schema.ResourceContentBlock(type="resource_link", name="a", uri="file:///p/a.py"),
            schema.EmbeddedResourceContentBlock(
                type="resource", resource=schema.TextResourceContents(uri="file:///p/b.py", text="B")
            ),
        ]
    )
    assert message.content == [
        TextBlock(text="see"),
        ImageBlock(media_type="image/png", data="AAAA"),
        TextBlock(text='@/p/a.py\n<context ref="file:///p/b.py">\nB\n</context>'),
    ]
    with pytest.raises(RequestError) as empty:
        to_message([])
    assert empty.value.code == -32602
    with pytest.raises(RequestError):
        to_message([schema.AudioContentBlock(type="audio", data="AAAA", mime_type="audio/wav")])


def test_the_clients_mcp_servers_become_one_mcp_config() -> None:
    (value,) = mcp_config(
        [
            schema.McpServerStdio(
                name="time", command="/bin/t", args=["-x"], env=[schema.EnvVariable(name="TZ", value="UTC")]
            ),
            schema.HttpMcpServer(
                type="http",
                name="web",
                url="http://127.0.0.1:1/mcp",
                headers=[schema.HttpHeader(name="X-Test", value="fake-value")],
            ),
        ]
    )
    assert json.loads(value) == {
        "mcpServers": {
            "time": {"type": "stdio", "command": "/bin/t", "args": ["-x"], "env": {"TZ": "UTC"}},
            "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X-Test": "fake-value"}},
        }
    }
    assert mcp_config([]) == []
