"""``keel acp`` driven by the official TypeScript client (``@agentclientprotocol/sdk``) under node.

The SDK (pinned) is installed by scripts/setup into the venv's node folder (tests/kit.py node_modules)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from kit import KEEL, call, node_modules


def test_the_typescript_client_reads_and_edits_through_keel_acp(
    project: Path, tmp_path: Path, fake_llm: Any, acp_env: Any
) -> None:
    (project / "a.txt").write_text("one\n")
    server = fake_llm(
        [
            call("Read", file_path="a.txt"),
            call("Edit", file_path="a.txt", old_string="one", new_string="two"),
            "Done.",
        ]
    )
    sdk = node_modules("@agentclientprotocol/sdk")
    node = shutil.which("node")
    assert node is not None
    runner = tmp_path / "ts"
    runner.mkdir()
    (runner / "node_modules").symlink_to(sdk)  # ESM resolves packages beside the script
    shutil.copy(Path(__file__).with_name("ts_client.mjs"), runner / "client.mjs")
    done = subprocess.run(
        [node, str(runner / "client.mjs"), KEEL, str(project), "make it two"],
        env=acp_env(server),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["init"]["agentCapabilities"]["loadSession"] is True
    assert got["answer"]["stopReason"] == "end_turn"
    assert (project / "a.txt").read_text() == "two\n"
    starts = [u for u in got["updates"] if u["sessionUpdate"] == "tool_call"]
    assert [(s["kind"], s["title"]) for s in starts] == [("read", "Read a.txt"), ("edit", "Edit a.txt")]
    ends = [u for u in got["updates"] if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"]
    diff = next(c for u in ends for c in u.get("content") or [] if c["type"] == "diff")
    assert (diff["oldText"], diff["newText"]) == ("one\n", "two\n")
    assert [a["toolCall"]["toolCallId"] for a in got["asked"]] == [starts[1]["toolCallId"]]
