"""The editor's buffers as the file tools meet them: a Read asks the editor for the lines it reads
(not the whole buffer); an answer over the transport's limit fails the read at once (the disk is
read instead) rather than leaving the Read waiting for ever."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from acp import schema

from kit import call
from tests.integration.acp.conftest import RecordingClient, keel_acp, prompt


class WindowClient(RecordingClient):
    """An editor that answers fs/read_text_file with the lines asked for, as Zed does."""

    def __init__(self, buffers: dict[str, str]) -> None:
        super().__init__(buffers=buffers)
        self.asked_lines: list[tuple[int | None, int | None]] = []

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> Any:
        self.asked_lines.append((line, limit))
        assert self.buffers is not None
        lines = self.buffers[path].splitlines(keepends=True)
        first = (line or 1) - 1
        window = lines[first : first + limit] if limit is not None else lines[first:]
        return schema.ReadTextFileResponse(content="".join(window))


async def test_a_read_with_a_limit_asks_the_editor_for_those_lines(project: Path, fake_llm: Any, acp_env: Any) -> None:
    log = project / "app.log"
    log.write_text("on disk\n")
    buffer = "".join(f"unsaved line {i}\n" for i in range(1, 10_001))
    server = fake_llm([call("Read", file_path="app.log", offset=3, limit=5), "Read it."])
    client = WindowClient(buffers={str(log): buffer})
    async with keel_acp(client, project, acp_env(server)) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("read app.log")), 60)
    assert result.stop_reason == "end_turn"
    assert client.asked_lines == [(3, 6)]  # the lines read, and one more to know whether there is more
    sent = str(server.cursor.requests[-1])
    assert "unsaved line 3" in sent and "unsaved line 7" in sent and "unsaved line 8" not in sent
    assert "Showing lines 3-7" in sent


async def test_an_answer_over_the_line_limit_fails_the_read_at_once_and_the_disk_is_read(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    big = project / "big.log"
    big.write_text("small on disk\n")
    buffer = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n" * (52 * 1024 * 1024 // 64)
    server = fake_llm([call("Read", file_path="big.log", limit=5), "Read it.", "Still here."])
    client = RecordingClient(buffers={str(big): buffer})  # answers the whole buffer, whatever is asked
    async with keel_acp(client, project, acp_env(server)) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("read big.log")), 120)
        assert result.stop_reason == "end_turn"
        assert "small on disk" in str(server.cursor.requests[-1])
        again = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("more")), 60)
        assert again.stop_reason == "end_turn"
