"""Hook payloads carry the paths of a call absolute, as Claude Code sends them: a model's relative
``file_path`` reaches a PreToolUse, PostToolUse and PostToolBatch hook resolved against the
session's working directory (the tool declares which input fields are paths)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from conftest import KeelRun, wire_env

# a real command hook, as a Claude Code user writes one: it appends the JSON on its stdin to a file
LOGGER = "import os, sys; open(os.environ['HOOK_LOG'], 'a').write(sys.stdin.read().replace(chr(10), ' ') + chr(10))"


def test_a_relative_file_path_reaches_tool_hooks_absolute(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / "notes.txt").write_text("alpha\n")
    hook = {"hooks": [{"type": "command", "command": f"{sys.executable} -c {json.dumps(LOGGER)}"}]}
    hooks = {event: [hook] for event in ("PreToolUse", "PostToolUse", "PostToolBatch")}
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    assert keel("trust", str(project)).code == 0
    server = fake_llm({"steps": [{"tool_calls": [{"name": "Read", "input": {"file_path": "notes.txt"}}]}, "done"]})
    log = tmp_path / "hooks.log"
    run = keel("-p", "read the notes", env={**wire_env(server, "anthropic"), "HOOK_LOG": str(log)})
    assert run.code == 0, run.stderr

    payloads = {p["hook_event_name"]: p for p in map(json.loads, log.read_text().splitlines())}
    assert set(payloads) == {"PreToolUse", "PostToolUse", "PostToolBatch"}
    absolute = str(project.resolve() / "notes.txt")
    assert payloads["PreToolUse"]["tool_input"] == {"file_path": absolute}
    assert payloads["PostToolUse"]["tool_input"] == {"file_path": absolute}
    assert payloads["PostToolBatch"]["tool_calls"][0]["tool_input"] == {"file_path": absolute}
    # the model's own call is left as it sent it: the transcript is the model's, the payload Claude Code's
    sent = server.cursor.requests[1]["body"]["messages"]
    uses = [b for m in sent if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_use"]
    assert uses[0]["input"] == {"file_path": "notes.txt"}
