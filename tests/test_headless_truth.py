"""Issue 31 (items 4, 7, 8, 10) and issue 30 item 15: a headless run never loses a result silently,
always ends, and its output says what happened (denied calls, closed output, limits, API status).

Every test runs the real ``keel -p`` against keel's scripted model server (``fake_llm``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.fakellm.server import FakeLLMServer
from conftest import KEEL, KeelRun, session_files, wait_until


def _env(server: FakeLLMServer) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key", "ANTHROPIC_BASE_URL": server.url}


def _requests(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r for r in server.cursor.requests if "body" in r]


def _tool_use_ids(body: dict[str, Any]) -> list[str]:
    return [
        block["id"]
        for message in body.get("messages", [])
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]


# --- item 4: a deleted KEEL_HOME -------------------------------------------------------------------


def test_keel_home_deleted_mid_session_stops_the_run_with_one_line(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    """KEEL_HOME is removed while a slow Bash call runs. The transcript is gone with it, so the run
    must not go on and exit 0 as if it had been recorded: it stops with one line naming the lost
    session file and exit 1, and no traceback."""
    marker = project / "started"
    server = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "Bash", "input": {"command": f"touch {marker}; sleep 2; echo slow-done"}}]},
                {"tool_calls": [{"name": "Bash", "input": {"command": "echo second"}}]},
                "all done",
            ]
        }
    )
    home = Path(os.environ["KEEL_HOME"])
    proc = subprocess.Popen(
        [KEEL, "-p", "go", "--allowedTools", "Bash"],
        cwd=project,
        env={**os.environ, **_env(server)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(marker.exists, what="the slow Bash call to start")
        assert session_files(home), "the session file exists while the run is going"
        shutil.rmtree(home)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, (proc.returncode, out, err)
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "session file" in lines[0] and "deleted" in lines[0], lines[0]
    assert "all done" not in out  # the run did not go on to its answer
    assert len(_requests(server)) == 1  # nor ask the model again with nothing recorded
