"""An ``"type": "agent"`` hook's agent is a session like any other: its tool results pass the
result guard (redaction) and the output bounds before its model sees them."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.app.runtime import Runtime, RuntimeOptions
from agentkeel.models.fake.server import FakeLLMServer
from conftest import wire_env

Fake = Callable[[Any], FakeLLMServer]

FAKE_SECRET = "sk-ant-api03-" + "FAKEfakeFAKEfake0123456789" * 4 + "-AAAAAA"  # obviously fake, key-shaped


async def _run(project: Path, server: FakeLLMServer, hook: dict[str, Any]) -> str:
    env = {**os.environ, **wire_env(server, "anthropic"), "KEEL_MAX_RETRIES": "0"}
    hooks = {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}
    rt = Runtime.create(RuntimeOptions(cwd=project, env=env, allowed_tools=["Bash"], hooks=hooks))
    try:
        return (await rt.run("go")).result
    finally:
        await rt.aclose()


def _read(path: Path) -> dict[str, Any]:
    return {"tool_calls": [{"name": "Read", "input": {"file_path": str(path)}}]}


async def test_hook_agent_results_are_redacted_and_bounded(project: Path, fake_llm: Fake) -> None:
    (project / "config.env").write_text(f"ANTHROPIC_API_KEY={FAKE_SECRET}\n")
    huge = project / "huge.log"
    huge.write_text(("x" * 1500 + "\n") * 2000)  # Read returns ~3 MB of it
    hook = {"type": "agent", "prompt": "Is this command allowed? $ARGUMENTS", "maxTurns": 4}
    steps = [
        {"tool_calls": [{"name": "Bash", "input": {"command": "echo deploy"}}]},  # the session's model
        _read(project / "config.env"),  # the hook's agent
        _read(huge),
        '{"ok": true}',
        "done",  # the session's model again
    ]
    server = fake_llm({"steps": steps})
    assert await _run(project, server, hook) == "done"
    requests = [r["body"] for r in server.cursor.requests]
    assert len(requests) == 5
    after_secret = json.dumps(requests[2]["messages"])
    assert "FAKEfakeFAKEfake" not in after_secret, "the hook agent's model saw the secret"
    assert "ANTHROPIC_API_KEY=" in after_secret  # the file was read, its key redacted
    after_huge = json.dumps(requests[3]["messages"])
    assert len(after_huge) < 300_000, f"the hook agent's model got {len(after_huge):,} characters of one Read"
