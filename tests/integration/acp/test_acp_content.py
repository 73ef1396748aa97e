"""What ``keel acp`` streams besides text and tools (thoughts, plans from TodoWrite) and the prompt
content kinds it takes (images, embedded resources, resource links), through the ACP SDK's client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp import embedded_text_resource, image_block, resource_block, resource_link_block, text_block

from kit import call
from tests.integration.acp.conftest import RecordingClient, keel_acp, prompt

PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


async def test_thoughts_and_a_todo_plan_stream_as_thought_chunks_and_plan_updates(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    todos = [
        {"content": "Read the code", "status": "completed", "activeForm": "Reading the code"},
        {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
        {"content": "Run the tests", "status": "pending", "activeForm": "Running the tests"},
    ]
    server = fake_llm(
        [
            {"thinking": "First I plan.", "signature": "sig-1", **call("TodoWrite", todos=todos)},
            "Planned.",
        ]
    )
    client = RecordingClient()
    async with keel_acp(client, project, acp_env(server)) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        result = await conn.prompt(session_id=sid, prompt=prompt("plan it"))
    assert result.stop_reason == "end_turn"
    assert "".join(u.content.text for u in client.of(sid, "agent_thought_chunk")) == "First I plan."
    (plan,) = client.of(sid, "plan")
    assert [(e.content, e.status) for e in plan.entries] == [
        ("Read the code", "completed"),
        ("Fix the bug", "in_progress"),
        ("Run the tests", "pending"),
    ]
    assert client.asked == []  # TodoWrite asks nobody


async def test_images_embedded_resources_and_resource_links_reach_the_model(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    server = fake_llm(["Seen."])
    client = RecordingClient()
    src = project / "src.py"
    src.write_text("print('on disk')\n")
    async with keel_acp(client, project, acp_env(server)) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        result = await conn.prompt(
            session_id=sid,
            prompt=[
                text_block("look at these"),
                image_block(PIXEL, "image/png"),
                resource_block(
                    embedded_text_resource(src.as_uri(), "print('unsaved buffer')\n", mime_type="text/x-python")
                ),
                resource_link_block("notes.md", (project / "notes.md").as_uri()),
            ],
        )
    assert result.stop_reason == "end_turn"
    body = json.dumps(server.cursor.requests[-1])
    assert "look at these" in body and PIXEL in body and "image/png" in body
    assert f'<context ref=\\"{src.as_uri()}\\">' in body and "unsaved buffer" in body
    assert f"@{project / 'notes.md'}" in body


async def test_write_multiedit_and_notebookedit_report_the_diff_they_made(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    (project / "m.txt").write_text("alpha beta\n")
    notebook = {
        "cells": [{"id": "c1", "cell_type": "code", "source": ["print(1)"], "metadata": {}, "outputs": []}],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (project / "n.ipynb").write_text(json.dumps(notebook))
    server = fake_llm(
        [
            call("Write", file_path="new.txt", content="fresh\n"),
            call("Read", file_path="m.txt"),
            call(
                "MultiEdit",
                file_path="m.txt",
                edits=[{"old_string": "alpha", "new_string": "ALPHA"}, {"old_string": "beta", "new_string": "BETA"}],
            ),
            call("Read", file_path="n.ipynb"),
            call("NotebookEdit", notebook_path=str(project / "n.ipynb"), cell_id="c1", new_source="print(2)"),
            "Done.",
        ]
    )
    client = RecordingClient()
    async with keel_acp(client, project, acp_env(server), "--permission-mode", "acceptEdits") as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        result = await conn.prompt(session_id=sid, prompt=prompt("change them"))
    assert result.stop_reason == "end_turn" and client.asked == []
    diffs = {}
    for start in client.of(sid, "tool_call"):
        end = client.tool_updates(sid, start.tool_call_id)[-1]
        assert end.status == "completed", (start.title, end)
        if start.kind == "edit":
            (diff,) = end.content
            diffs[start.title.split()[0]] = (Path(diff.path).name, diff.old_text, diff.new_text)
    assert diffs["Write"] == ("new.txt", None, "fresh\n")
    assert diffs["MultiEdit"] == ("m.txt", "alpha beta\n", "ALPHA BETA\n")
    name, before, after = diffs["NotebookEdit"]
    assert name == "n.ipynb" and "print(1)" in before and "print(2)" in after
    assert json.loads((project / "n.ipynb").read_text())["cells"][0]["source"] in ("print(2)", ["print(2)"])
