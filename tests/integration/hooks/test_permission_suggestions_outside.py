"""PermissionRequest's ``permission_suggestions`` for calls outside the working directory, as Claude
Code 2.1.328 sends them.

Recorded (2026-11-28): a PermissionRequest hook (matcher ``*``) appending its stdin to a log; the
model calls Read ``/OUT/f.txt``, Write ``/OUT/g.txt`` and Bash ``ls /OUT`` (``/OUT`` outside the
project)::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \\
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude --model claude-sonnet-4-5 -p go --allowedTools Skill

Claude Code sent, for Read: ``[{"type":"addRules","rules":[{"toolName":"Read","ruleContent":
"//OUT/**"}],"behavior":"allow","destination":"session"}]``; for Write: ``[{"type":"setMode","mode":
"acceptEdits","destination":"session"},{"type":"addDirectories","directories":["/OUT"],
"destination":"session"}]``. keel sent the Read rule for ``localSettings`` and no ``addDirectories``.
(For ``ls /OUT`` Claude Code suggests the Read rule for the folder; keel suggests the Bash command:
docs/compatibility.md.)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

Keel = Callable[..., KeelRun]
FakeLLM = Callable[[Any], FakeLLMServer]
LOGGER = "import os, sys; open(os.environ['HOOK_LOG'], 'a').write(sys.stdin.read().replace(chr(10), ' ') + chr(10))"


def test_outside_reads_and_writes(project: Path, tmp_path: Path, fake_llm: FakeLLM, keel: Keel) -> None:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "f.txt").write_text("x\n")
    hook = {"type": "command", "command": f"{sys.executable} -c {json.dumps(LOGGER)}"}
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"PermissionRequest": [{"matcher": "*", "hooks": [hook]}]}})
    )
    assert keel("trust", str(project)).code == 0
    steps = [
        {"tool_calls": [{"name": "Read", "input": {"file_path": str(out / "f.txt")}}]},
        {"tool_calls": [{"name": "Write", "input": {"file_path": str(out / "g.txt"), "content": "x"}}]},
        "done",
    ]
    server = fake_llm({"steps": steps})
    log = tmp_path / "perm.jsonl"
    run = keel("-p", "go", "--allowedTools", "Skill", env={**wire_env(server, "anthropic"), "HOOK_LOG": str(log)})
    assert run.code == 0, run.stderr
    by_tool = {p["tool_name"]: p["permission_suggestions"] for p in map(json.loads, log.read_text().splitlines())}
    assert by_tool["Read"] == [
        {
            "type": "addRules",
            "rules": [{"toolName": "Read", "ruleContent": f"/{out}/**"}],
            "behavior": "allow",
            "destination": "session",
        }
    ]
    assert by_tool["Write"] == [
        {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
        {"type": "addDirectories", "directories": [str(out)], "destination": "session"},
    ]
    assert not (out / "g.txt").exists()
