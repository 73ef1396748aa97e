"""Hostile or broken input on the wire: ``keel acp`` answers it with one JSON-RPC error and goes on
serving every session (a deeply nested line, session/list parameters it cannot use)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from kit import wait_until_async
from tests.integration.acp.conftest import RecordingClient, keel_acp, prompt


async def test_a_deeply_nested_line_is_a_parse_error_and_the_session_goes_on(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    server = fake_llm({"steps": ["still serving"], "loop": True})
    client = RecordingClient()
    async with keel_acp(client, project, acp_env(server)) as (conn, proc):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        assert proc.stdin is not None
        proc.stdin.write(b"[" * 200_000 + b"]" * 200_000 + b"\n")
        await proc.stdin.drain()

        def errors() -> list[Any]:
            return [m["error"] for m in client.incoming if "error" in m and m.get("id") is None]

        await wait_until_async(lambda: len(errors()) == 1, 30, "the parse error")
        assert errors()[0]["code"] == -32700
        result = await conn.prompt(session_id=sid, prompt=prompt("are you there?"))
        assert result.stop_reason == "end_turn" and "still serving" in client.text(sid)
        assert proc.returncode is None


@pytest.mark.parametrize(
    "params",
    [{"cursor": "99999999999999999999999999"}, {"cwd": "/\x00"}, {"cursor": "\u0661"}],
    ids=["huge-cursor", "nul-in-cwd", "non-ascii-digit"],
)
async def test_session_list_bad_params_are_invalid_params_in_one_line(
    project: Path, fake_llm: Any, acp_env: Any, params: dict[str, str]
) -> None:
    server = fake_llm(["unused"])
    client = RecordingClient()
    async with keel_acp(client, project, acp_env(server)) as (conn, proc):
        with pytest.raises(RequestError) as bad:
            await conn.list_sessions(**params)
        assert bad.value.code == -32602
        text = str(bad.value.data or bad.value)
        assert "\n" not in text.strip() and "Error" not in text and "Traceback" not in text
        listed = await conn.list_sessions()  # and the agent goes on
        assert listed.sessions == [] or listed.sessions is not None
        assert proc.returncode is None


async def test_a_request_over_the_line_limit_gets_its_error_by_id(project: Path, fake_llm: Any, acp_env: Any) -> None:
    server = fake_llm({"steps": ["still serving"], "loop": True})
    client = RecordingClient()
    async with keel_acp(client, project, acp_env(server)) as (conn, proc):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        assert proc.stdin is not None
        big = b'{"jsonrpc":"2.0","id":7777,"method":"session/prompt","params":{"sessionId":"x","prompt":"'
        proc.stdin.write(big + b"a" * (51 * 1024 * 1024) + b'"}}\n')
        await proc.stdin.drain()

        def answered() -> list[Any]:
            return [m for m in client.incoming if m.get("id") == 7777 and "error" in m]

        await wait_until_async(answered, 60, "the error for request 7777")
        assert answered()[0]["error"]["code"] == -32700
        result = await conn.prompt(session_id=sid, prompt=prompt("still there?"))
        assert result.stop_reason == "end_turn"
