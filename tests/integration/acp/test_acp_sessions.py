"""``keel acp`` sessions as an editor drives them with the ACP SDK's client: cancel, load, slash
commands, modes, a client's MCP server, bad input, several sessions in one process."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, schema

from agentkeel.session.load import load_session
from kit import call, descendants, wait_until_async
from tests.integration.acp.conftest import RecordingClient, keel_acp, prompt

TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")


def _requests(server: Any) -> str:
    return json.dumps(server.cursor.requests)


async def test_cancel_during_a_slow_bash_step_ends_the_prompt_cancelled_and_the_session_goes_on(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    server = fake_llm([call("Bash", command="sleep 60 && touch late.txt"), "After the cancel."])
    client = RecordingClient(answers=["allow"])
    async with keel_acp(client, project, acp_env(server)) as (conn, proc):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        running = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=prompt("run it")))

        def started() -> bool:
            return any(u.status == "in_progress" for u in client.of(sid, "tool_call_update")) and any(
                "sleep" in " ".join(argv) for _, argv in descendants(proc.pid)
            )

        await wait_until_async(started, 60, "the Bash step to run")
        await conn.cancel(session_id=sid)
        result = await asyncio.wait_for(running, 30)
        assert result.stop_reason == "cancelled"
        bash = client.of(sid, "tool_call")[0]
        assert bash.kind == "execute" and bash.title.startswith("sleep 60")
        assert client.tool_updates(sid, bash.tool_call_id)[-1].status == "failed"
        assert not any("sleep" in " ".join(argv) for _, argv in descendants(proc.pid))
        again = await conn.prompt(session_id=sid, prompt=prompt("go on"))  # the log is whole: it resumes
        assert again.stop_reason == "end_turn" and "After the cancel." in client.text(sid)
    assert not (project / "late.txt").exists()
    (path,) = list(Path(acp_env(server)["KEEL_HOME"]).rglob(f"{sid}.jsonl"))
    loaded = load_session(path)
    assert loaded.report.clean


async def test_load_replays_an_earlier_session_and_continues_it(project: Path, fake_llm: Any, acp_env: Any) -> None:
    (project / "notes.md").write_text("the code word is heron\n")
    server = fake_llm([call("Read", file_path="notes.md"), "The code word is heron.", "Still heron."])
    first = RecordingClient()
    async with keel_acp(first, project, acp_env(server)) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=prompt("what is the code word?"))
    second = RecordingClient()
    async with keel_acp(second, project, acp_env(server)) as (conn, _):
        loaded = await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
        assert loaded is not None and loaded.modes is not None
        users = [u.content.text for u in second.of(sid, "user_message_chunk")]
        assert users == ["what is the code word?"]
        assert "The code word is heron." in second.text(sid)
        (read,) = second.of(sid, "tool_call")
        assert read.kind == "read" and read.title == "Read notes.md"
        assert second.tool_updates(sid, read.tool_call_id)[-1].status == "completed"
        replayed = len(second.updates)
        result = await conn.prompt(session_id=sid, prompt=prompt("and now?"))
    assert result.stop_reason == "end_turn"
    assert "Still heron." in "".join(
        u.content.text for _, u in second.updates[replayed:] if u.session_update == "agent_message_chunk"
    )
    assert "the code word is heron" in json.dumps(server.cursor.requests[-1])  # the model saw the history
    async with keel_acp(RecordingClient(), project, acp_env(server)) as (conn, _):
        listed = await conn.list_sessions(cwd=str(project))
    assert [(s.session_id, s.cwd, s.title) for s in listed.sessions] == [
        (sid, str(project.resolve()), "what is the code word?")
    ]


async def test_a_project_slash_command_is_offered_and_runs(project: Path, fake_llm: Any, acp_env: Any) -> None:
    commands = project / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "greet.md").write_text(
        "---\ndescription: Greet someone warmly\nargument-hint: <name>\n---\nWrite a warm greeting for $ARGUMENTS.\n"
    )
    server = fake_llm(["Hello, Ada!"])
    client = RecordingClient()
    async with keel_acp(client, project, acp_env(server)) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        result = await conn.prompt(session_id=sid, prompt=prompt("/greet Ada"))
        listed = client.of(sid, "available_commands_update")
    assert result.stop_reason == "end_turn"
    wire = client.incoming
    answered = next(i for i, m in enumerate(wire) if (m.get("result") or {}).get("sessionId") == sid)
    announced = next(
        i
        for i, m in enumerate(wire)
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
    )
    assert answered < announced  # the client knows the session before its commands arrive
    offered = {c.name: c for c in listed[0].available_commands}
    assert offered["greet"].description == "Greet someone warmly" and offered["greet"].input.root.hint == "<name>"
    assert "compact" in offered or "help" in offered  # the built-ins are there too
    assert "Write a warm greeting for Ada." in _requests(server)
    answer = client.text(sid)
    assert answer.endswith("Hello, Ada!")
    assert "[keel] warning:" in answer and "keel trust" in answer  # start-up warnings open the first answer


async def test_mode_switching_changes_what_asks(project: Path, fake_llm: Any, acp_env: Any) -> None:
    (project / "a.txt").write_text("x\n")
    server = fake_llm(
        [call("Read", file_path="a.txt"), call("Edit", file_path="a.txt", old_string="x", new_string="y"), "ok"]
    )
    client = RecordingClient()  # no answers: any ask would be cancelled (denied)
    async with keel_acp(client, project, acp_env(server)) as (conn, _):
        new = await conn.new_session(cwd=str(project), mcp_servers=[])
        sid = new.session_id
        assert new.modes is not None and new.modes.current_mode_id == "default"
        assert {m.id for m in new.modes.available_modes} == {
            "default",
            "acceptEdits",
            "plan",
            "dontAsk",
            "bypassPermissions",
        }
        with pytest.raises(RequestError) as bad:
            await conn.set_session_mode(session_id=sid, mode_id="yolo")
        assert bad.value.code == -32602 and "yolo" in str(bad.value.data or bad.value)
        await conn.set_session_mode(session_id=sid, mode_id="acceptEdits")
        assert client.of(sid, "current_mode_update")[-1].current_mode_id == "acceptEdits"
        result = await conn.prompt(session_id=sid, prompt=prompt("edit it"))
        planned = await conn.prompt(session_id=sid, prompt=prompt("/plan"))  # a command switches the mode
        assert planned.stop_reason == "end_turn"
        assert client.of(sid, "current_mode_update")[-1].current_mode_id == "plan"
    assert result.stop_reason == "end_turn"
    assert client.asked == []  # acceptEdits: the edit did not ask
    assert (project / "a.txt").read_text() == "y\n"


async def test_a_client_provided_mcp_server_tool_is_called(project: Path, fake_llm: Any, acp_env: Any) -> None:
    server = fake_llm([call("mcp__time__get_current_time", timezone="UTC"), "It is now."])
    client = RecordingClient(answers=["allow"])
    time_server = schema.McpServerStdio(name="time", command=TIME_SERVER, args=["--local-timezone", "UTC"], env=[])
    async with keel_acp(client, project, acp_env(server)) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[time_server])).session_id
        result = await conn.prompt(session_id=sid, prompt=prompt("what time is it?"))
    assert result.stop_reason == "end_turn"
    (tool,) = client.of(sid, "tool_call")
    end = client.tool_updates(sid, tool.tool_call_id)[-1]
    assert end.status == "completed" and '"timezone": "UTC"' in end.content[0].content.text


async def test_bad_input_gets_a_json_rpc_error_and_the_sessions_go_on(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    server = fake_llm({"steps": ["first", "second"], "loop": True})
    client = RecordingClient()
    async with keel_acp(client, project, acp_env(server)) as (conn, proc):
        one = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        two = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        assert one != two
        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id="no-such-session", prompt=prompt("hi"))
        assert unknown.value.code == -32602
        with pytest.raises(RequestError) as relative:
            await conn.new_session(cwd="not/absolute", mcp_servers=[])
        assert relative.value.code == -32602
        with pytest.raises(RequestError) as blob:
            await conn.prompt(
                session_id=one,
                prompt=[
                    schema.EmbeddedResourceContentBlock(
                        type="resource",
                        resource=schema.BlobResourceContents(uri="file:///x.bin", blob="AAAA", mime_type="x/y"),
                    )
                ],
            )
        assert blob.value.code == -32602
        assert proc.stdin is not None
        proc.stdin.write(b"{this is not json\n[1, 2]\n")  # broken lines on the wire: errors, not an exit
        await proc.stdin.drain()

        def errors() -> list[Any]:
            return [m["error"]["code"] for m in client.incoming if "error" in m and m.get("id") is None]

        await wait_until_async(lambda: len(errors()) == 2, 30, "the two errors")
        assert errors() == [-32700, -32600]
        results = await asyncio.gather(
            conn.prompt(session_id=one, prompt=prompt("a")), conn.prompt(session_id=two, prompt=prompt("b"))
        )
        assert [r.stop_reason for r in results] == ["end_turn", "end_turn"]
        assert client.text(one) and client.text(two)
        assert proc.returncode is None


async def test_a_child_that_reads_its_input_cannot_eat_the_protocol(
    project: Path, tmp_path: Path, fake_llm: Any, acp_env: Any
) -> None:
    editor = tmp_path / "editor.sh"  # /memory edit runs $EDITOR with keel's own standard input
    editor.write_text(f"#!/bin/sh\ncat > {tmp_path / 'stolen.txt'}\n")
    editor.chmod(0o755)
    server = fake_llm(["still here"])
    client = RecordingClient()
    async with keel_acp(client, project, {**acp_env(server), "EDITOR": str(editor)}) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        edited = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("/memory edit KEEL.md")), 60)
        assert edited.stop_reason == "end_turn" and "exited with 0" in client.text(sid)
        after = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("hello")), 60)
    assert after.stop_reason == "end_turn" and "still here" in client.text(sid)
    assert (tmp_path / "stolen.txt").read_text() == ""


async def test_a_failing_session_reports_its_error_and_the_other_answers(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    server = fake_llm(
        {
            "steps": ["fine"],
            "loop": True,
            "match": [{"contains": "BREAK", "steps": [{"error": {"status": 400, "message": "scripted failure"}}]}],
        }
    )
    client = RecordingClient()
    async with keel_acp(client, project, acp_env(server)) as (conn, proc):
        broken = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        healthy = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        results = await asyncio.gather(
            conn.prompt(session_id=broken, prompt=prompt("BREAK")),
            conn.prompt(session_id=healthy, prompt=prompt("hello")),
        )
        assert [r.stop_reason for r in results] == ["end_turn", "end_turn"]
        assert "[keel]" in client.text(broken) and "400" in client.text(broken)
        assert client.text(healthy) == "fine"
        again = await conn.prompt(session_id=healthy, prompt=prompt("again"))
        assert again.stop_reason == "end_turn" and proc.returncode is None
