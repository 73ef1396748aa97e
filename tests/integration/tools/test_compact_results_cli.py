"""Through ``keel -p``: what the model is sent for Read, Edit and Grep is the compact form
(#35 item 5), and what a PostToolUse hook receives as ``tool_response`` is what it always was."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

LOGGER = "import os, sys; open(os.environ['HOOK_LOG'], 'a').write(sys.stdin.read().replace(chr(10), ' ') + chr(10))"


def _results(server: FakeLLMServer) -> list[str]:
    last = server.cursor.requests[-1]["body"]["messages"]
    out = []
    for m in last:
        if m["role"] != "user" or not isinstance(m["content"], list):
            continue
        for b in m["content"]:
            if b.get("type") == "tool_result":
                c = b["content"]
                out.append(c if isinstance(c, str) else "".join(x.get("text", "") for x in c))
    return out


def test_model_gets_compact_results_and_hooks_get_the_old_shapes(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    src = project / "src"
    src.mkdir()
    app = src / "app.py"
    app.write_text("".join(f"x{i} = {i}\n" for i in range(1, 13)))
    hook = {"type": "command", "command": f"{sys.executable} -c {json.dumps(LOGGER)}"}
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PostToolUse": [{"hooks": [hook]}]}}))
    assert keel("trust", str(project)).code == 0
    calls = [
        {"name": "Read", "input": {"file_path": str(app), "offset": 9, "limit": 2}},
        {"name": "Edit", "input": {"file_path": str(app), "old_string": "x10 = 10\n", "new_string": "x10 = 100\n"}},
        {"name": "Grep", "input": {"pattern": "x1[01] =", "output_mode": "content", "-n": True}},
    ]
    server = fake_llm({"steps": [{"tool_calls": [c]} for c in calls] + ["done"]})
    log = tmp_path / "hooks.log"
    run = keel(
        "-p",
        "go",
        "--allowedTools",
        "Read",
        "Edit",
        "Grep",
        env={**wire_env(server, "anthropic"), "HOOK_LOG": str(log)},
    )
    assert run.code == 0, run.stderr
    read, edit, grep = _results(server)
    assert read.startswith("9\tx9 = 9\n10\tx10 = 10\n\n[Showing lines 9-10 of 12.")
    assert edit == f"The file {app} has been updated (line 10)."
    assert grep == "src/app.py:10:x10 = 100\nsrc/app.py:11:x11 = 11"
    responses = {p["tool_name"]: p["tool_response"] for p in map(json.loads, log.read_text().splitlines())}
    assert responses["Read"]["file"]["content"].startswith("     9\tx9 = 9\n    10\tx10 = 10\n")
    assert responses["Edit"]["newString"] == "x10 = 100\n" and responses["Edit"]["structuredPatch"]
    assert responses["Grep"]["output"] == f"{app}:10:x10 = 100\n{app}:11:x11 = 11"
