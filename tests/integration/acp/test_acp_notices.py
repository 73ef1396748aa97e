"""keel's warnings reach the editor redacted: a malformed telemetry header does not put its secret
value in the session (ACP clients show and may log what the agent sends)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.acp.conftest import RecordingClient, keel_acp, prompt

SECRET = "9f8e7d6c5b4a39281706f5e4d3c2b1a0"  # an obviously fake token


async def test_a_telemetry_notice_reaches_the_editor_without_the_secret(
    project: Path, fake_llm: Any, acp_env: Any
) -> None:
    server = fake_llm(["hello"])
    env = {
        **acp_env(server),
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_METRICS_EXPORTER": "console",
        "OTEL_EXPORTER_OTLP_HEADERS": f"x-api-key {SECRET},x-other: {SECRET}",
    }
    client = RecordingClient()
    async with keel_acp(client, project, env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        result = await conn.prompt(session_id=sid, prompt=prompt("hi"))
    assert result.stop_reason == "end_turn"
    text = client.text(sid)
    assert "OTEL_EXPORTER_OTLP_HEADERS" in text and "hello" in text
    assert SECRET not in text
    assert SECRET not in repr(client.incoming)
