"""What a command printed reaches the model as its first and last 128 lines, through the real CLI
against the scripted model server; the whole of it is in the file the result names (#35)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

SEQ = {"text": "Counting.", "tool_calls": [{"name": "Bash", "input": {"command": "seq 1 2000"}}]}


def _result(server: FakeLLMServer) -> str:
    [block] = [
        b
        for b in server.cursor.requests[1]["body"]["messages"][-1]["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    content = block["content"]
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)


def test_a_long_command_output_is_cut_to_its_head_and_tail_and_saved_whole(
    fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    server = fake_llm({"steps": [SEQ, "done"]})
    out = keel("-p", "count", "--permission-mode", "bypassPermissions", env=wire_env(server, "anthropic"))
    assert out.code == 0, out.stderr
    text = _result(server)
    numbers = [int(row) for row in text.splitlines() if row.strip().isdigit()]
    assert numbers == [*range(1, 129), *range(1873, 2001)]
    assert "[1744 lines (7849 characters) omitted." in text, re.findall(r"\[\d+ lines[^]]*", text)
    found = re.search(r"The full output \(2000 lines, 8892 characters\) is saved at (\S+);", text)
    assert found, text[:2000]
    assert Path(found.group(1)).read_text() == "\n".join(str(n) for n in range(1, 2001))


def test_bash_max_output_length_from_settings_lets_it_through_whole(
    fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun], tmp_path: Path
) -> None:
    (tmp_path / "keelhome").mkdir(exist_ok=True)
    (tmp_path / "keelhome" / "settings.json").write_text(json.dumps({"env": {"BASH_MAX_OUTPUT_LENGTH": "30000"}}))
    server = fake_llm({"steps": [SEQ, "done"]})
    out = keel("-p", "count", "--permission-mode", "bypassPermissions", env=wire_env(server, "anthropic"))
    assert out.code == 0, out.stderr
    assert [int(row) for row in _result(server).splitlines() if row.strip().isdigit()] == list(range(1, 2001))
