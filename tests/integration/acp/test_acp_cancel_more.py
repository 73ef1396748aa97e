"""Cancels that land between keel's steps: during a slash command's expansion (its !`...` runs)
and while the editor applies a write. The cancel sticks and keel says what happened."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from kit import call, descendants, wait_until_async
from tests.integration.acp.conftest import RecordingClient, keel_acp, prompt


async def test_a_cancel_during_a_command_expansion_stops_it_and_runs_no_tool(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    cmds = project / ".claude" / "commands"
    cmds.mkdir(parents=True)
    (cmds / "slow.md").write_text("---\ndescription: slow\n---\nContext: !`sleep 30`\nNow write the file.\n")
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["Bash(sleep:*)", "Write"]}})
    )
    server = fake_llm(
        {
            "steps": [call("Write", file_path="written.txt", content="should not exist\n"), "Wrote it."],
            "match": [{"contains": "go on", "steps": ["Later."]}],
        }
    )
    client = RecordingClient(answers=["allow"])  # should the !`sleep 30` be asked about
    async with keel_acp(client, project, acp_env(server), "--permission-mode", "acceptEdits") as (conn, proc):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        running = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=prompt("/slow")))

        def sleeping() -> bool:
            return any("sleep 30" in " ".join(argv) for _, argv in descendants(proc.pid))

        await wait_until_async(sleeping, 60, lambda: f"the !`sleep 30` to run (asked: {client.asked})")
        await conn.cancel(session_id=sid)
        result = await asyncio.wait_for(running, 20)
        assert result.stop_reason == "cancelled"
        assert client.of(sid, "tool_call") == []
        assert not sleeping()  # the expansion's command is killed with it
        assert server.cursor.requests == []  # the model was never asked
        again = await conn.prompt(session_id=sid, prompt=prompt("go on"))
        assert again.stop_reason == "end_turn" and "Later." in client.text(sid)
    assert not (project / "written.txt").exists()
