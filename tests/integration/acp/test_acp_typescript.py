"""``keel acp`` driven by the official TypeScript client (``@agentclientprotocol/sdk``) under node.

Optional: it runs where node and the SDK are installed (``npm install @agentclientprotocol/sdk`` in
``~/.cache/keel-acp-ts``, or ``KEEL_ACP_TS_SDK`` naming that folder's ``node_modules``)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kit import KEEL, call

REAL_HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)
SDK = Path(os.environ.get("KEEL_ACP_TS_SDK") or REAL_HOME / ".cache" / "keel-acp-ts" / "node_modules")
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None or not (SDK / "@agentclientprotocol" / "sdk").is_dir(),
    reason="node and @agentclientprotocol/sdk are not installed",
)


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
    runner = tmp_path / "ts"
    runner.mkdir()
    (runner / "node_modules").symlink_to(SDK)  # ESM resolves packages beside the script
    shutil.copy(Path(__file__).with_name("ts_client.mjs"), runner / "client.mjs")
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(runner / "client.mjs"), KEEL, str(project), "make it two"],
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
