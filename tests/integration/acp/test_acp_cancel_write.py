"""A cancel while the editor applies fs/write_text_file: the write, once sent, is finished and
recorded as done (the editor's buffer has the edit), then the turn ends cancelled."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from acp import schema

from agentkeel.session.load import load_session
from kit import call, wait_until_async
from tests.integration.acp.conftest import RecordingClient, keel_acp, prompt


class SlowWriter(RecordingClient):
    def __init__(self, buffers: dict[str, str]) -> None:
        super().__init__(buffers=buffers)
        self.writing = False

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        self.writing = True
        await asyncio.sleep(3)
        assert self.buffers is not None
        self.writes.append((path, content))
        self.buffers[path] = content
        return schema.WriteTextFileResponse()


async def test_a_cancel_during_an_editor_write_records_the_edit_it_made(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    f = project / "a.txt"
    f.write_text("one\n")
    server = fake_llm(
        [call("Read", file_path="a.txt"), call("Edit", file_path="a.txt", old_string="one", new_string="two"), "done"]
    )
    client = SlowWriter(buffers={str(f): "one\n"})
    async with keel_acp(client, project, acp_env(server), "--permission-mode", "acceptEdits") as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        running = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=prompt("edit")))
        await wait_until_async(lambda: client.writing, 60, "the editor to be writing")
        await conn.cancel(session_id=sid)
        result = await asyncio.wait_for(running, 30)
        assert result.stop_reason == "cancelled"
        assert client.buffers is not None and client.buffers[str(f)] == "two\n"
        edit = client.of(sid, "tool_call")[-1]
        updates = client.tool_updates(sid, edit.tool_call_id)
        assert updates[-1].status == "completed", updates
    (path,) = list(Path(acp_env(server)["KEEL_HOME"]).rglob(f"{sid}.jsonl"))
    results = [e for e in load_session(path).events if type(e).__name__ == "ToolResults"]
    last = results[-1].message.content[-1]
    assert not last.is_error, last.content
