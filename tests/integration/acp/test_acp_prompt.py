"""``keel acp`` driven by the ACP SDK's client: a prompt that reads and edits a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kit import call
from tests.integration.acp.conftest import RecordingClient, keel_acp, prompt


async def test_read_and_edit_stream_tool_calls_with_a_diff_and_ask_before_the_edit(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    (project / "a.txt").write_text("hello world\n")
    server = fake_llm(
        [
            call("Read", "Reading it.", file_path="a.txt"),
            call("Edit", file_path="a.txt", old_string="hello", new_string="goodbye"),
            "Done: it says goodbye now.",
        ]
    )
    client = RecordingClient(answers=["allow"])
    async with keel_acp(client, project, acp_env(server)) as (conn, _):
        new = await conn.new_session(cwd=str(project), mcp_servers=[])
        sid = new.session_id
        result = await conn.prompt(session_id=sid, prompt=prompt("change hello to goodbye in a.txt"))
    assert result.stop_reason == "end_turn"
    assert (project / "a.txt").read_text() == "goodbye world\n"
    starts = client.of(sid, "tool_call")
    assert [(s.kind, s.title) for s in starts] == [("read", "Read a.txt"), ("edit", "Edit a.txt")]
    assert starts[0].locations[0].path == str(project / "a.txt")
    read_end = client.tool_updates(sid, starts[0].tool_call_id)[-1]
    assert read_end.status == "completed" and "hello world" in read_end.content[0].content.text
    edit_end = client.tool_updates(sid, starts[1].tool_call_id)[-1]
    assert edit_end.status == "completed"
    diff = edit_end.content[0]
    assert (diff.type, diff.path, diff.old_text, diff.new_text) == (
        "diff",
        str(project / "a.txt"),
        "hello world\n",
        "goodbye world\n",
    )
    ((asked, options),) = client.asked
    assert asked.tool_call_id == starts[1].tool_call_id and asked.content[0].new_text == "goodbye world\n"
    assert {o.kind for o in options} >= {"allow_once", "reject_once"}
    assert "Reading it." in client.text(sid) and "goodbye now" in client.text(sid)


async def test_a_rejected_edit_changes_nothing_and_always_saves_the_rule_as_the_tui_does(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    (project / "a.txt").write_text("one\n")
    server = fake_llm(
        [
            call("Read", file_path="a.txt"),
            call("Edit", file_path="a.txt", old_string="one", new_string="two"),
            "It was refused.",
            call("Edit", file_path="a.txt", old_string="one", new_string="three"),
            "Changed.",
        ]
    )
    client = RecordingClient(answers=["reject", "allow_always"])
    async with keel_acp(client, project, acp_env(server)) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        first = await conn.prompt(session_id=sid, prompt=prompt("make it two"))
        assert first.stop_reason == "end_turn"
        assert (project / "a.txt").read_text() == "one\n"  # rejected: untouched
        refused = client.of(sid, "tool_call")[1]
        assert client.tool_updates(sid, refused.tool_call_id)[-1].status == "failed"
        second = await conn.prompt(session_id=sid, prompt=prompt("make it three"))
    assert second.stop_reason == "end_turn"
    assert (project / "a.txt").read_text() == "three\n"
    _, options = client.asked[1]
    always = next(o for o in options if o.kind == "allow_always")
    saved = json.loads((project / ".keel" / "settings.local.json").read_text())
    assert saved["permissions"]["allow"] and all(rule in always.name for rule in saved["permissions"]["allow"])


async def test_reads_and_edits_go_through_the_editors_buffers_when_the_client_offers_fs(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    target = project / "a.txt"
    target.write_text("saved version\n")
    server = fake_llm(
        [
            call("Read", file_path="a.txt"),
            call("Edit", file_path="a.txt", old_string="unsaved", new_string="edited"),
            "Edited the buffer.",
        ]
    )
    client = RecordingClient(answers=["allow"], buffers={str(target): "unsaved version\n"})
    async with keel_acp(client, project, acp_env(server)) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        result = await conn.prompt(session_id=sid, prompt=prompt("edit the buffer"))
    assert result.stop_reason == "end_turn"
    read, edit = client.of(sid, "tool_call")
    assert "unsaved version" in client.tool_updates(sid, read.tool_call_id)[-1].content[0].content.text
    assert client.writes == [(str(target), "edited version\n")]
    assert target.read_text() == "saved version\n"  # the disk is the editor's to save
    diff = client.tool_updates(sid, edit.tool_call_id)[-1].content[0]
    assert (diff.old_text, diff.new_text) == ("unsaved version\n", "edited version\n")
    assert str(target) in client.reads
