"""The output budget: what a command printed reaches the model as its first and last 128 lines
(through the real CLI against the scripted model server), the whole of it in the file the result
names; other tools' limits, and ``BASH_MAX_OUTPUT_LENGTH`` (#35)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.core.extensions import ToolCall
from agentkeel.core.tools import ToolOutput
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.tools.output import OutputBudget
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


# --- the budget itself (the after_tool extension), each limit ---------------------------------


async def test_output_budget_spills_to_file(tmp_path: Path) -> None:
    budget = OutputBudget(tmp_path / "spill", default=1000)
    big = "".join(f"line {i}\n" for i in range(2000))
    out = await budget(ToolCall("toolu_1", "Grep", {}, None), ToolOutput(big))
    spilled = Path(out.metadata["spilled_to"])
    assert spilled.read_text() == big
    assert len(out.text()) < 1500 and str(spilled) in out.text()
    assert out.text().startswith("line 0\n") and out.text().rstrip().endswith("line 1999")
    small = await budget(ToolCall("toolu_2", "Grep", {}, None), ToolOutput("short"))
    assert small.text() == "short"


async def test_a_commands_output_keeps_its_first_and_last_128_lines_and_the_rest_is_one_read_away(
    tmp_path: Path,
) -> None:
    """Codex CLI's budget for what a command printed (256 lines, 10 KiB), not Claude Code's
    30,000 characters: 2,000 short lines (19 kB, under Claude Code's limit) reach the model as
    their first and last 128 lines, the file and how much was left out."""
    budget = OutputBudget(tmp_path / "spill")
    big = "".join(f"line {i}\n" for i in range(2000))
    out = (await budget(ToolCall("toolu_1", "Bash", {}, None), ToolOutput(big))).text()
    shown = [row for row in out.splitlines() if row.startswith("line ")]
    assert shown == [f"line {i}" for i in [*range(128), *range(1872, 2000)]]
    assert "1744 lines (" in out and "(2000 lines, 18890 characters) is saved at" in out
    assert Path(tmp_path / "spill" / "toolu_1.txt").read_text() == big
    exactly = "".join(f"line {i}\n" for i in range(256))  # at the limit: whole, no file
    assert (await budget(ToolCall("toolu_2", "BashOutput", {}, None), ToolOutput(exactly))).text() == exactly
    assert not (tmp_path / "spill" / "toolu_2.txt").exists()
    wide = "".join(f"{n:03d}" + "x" * 196 + "\n" for n in range(100))  # 20 kB in 100 lines: characters decide
    cut = (await budget(ToolCall("toolu_3", "Bash", {}, None), ToolOutput(wide))).text()
    head, _, tail = cut.partition("\n\n… [")
    assert len(head) == 5120 and len(tail.split("] …\n\n", 1)[1]) == 5120  # half and half, as over 256 lines
    assert head.startswith("000x") and cut.endswith("099" + "x" * 196 + "\n")
    progress = "".join(f"{i}\rprogress {i}%\n" for i in range(300))  # a \r is not a line break
    shown = (await budget(ToolCall("toolu_5", "Bash", {}, None), ToolOutput(progress))).text()
    assert shown.count("\n") - 4 == 256 and "(300 lines, " in shown and "[44 lines (" in shown
    barely = "".join(f"line {i}\n" for i in range(258))  # two lines over: the note would cost more
    assert (await budget(ToolCall("toolu_6", "Bash", {}, None), ToolOutput(barely))).text() == barely
    assert (await budget(ToolCall("toolu_4", "Read", {}, None), ToolOutput(big))).text() == big  # a file is read whole


async def test_bash_max_output_length_sets_the_commands_budget_in_characters(tmp_path: Path) -> None:
    budget = OutputBudget.from_env(tmp_path / "spill", {"BASH_MAX_OUTPUT_LENGTH": "30000"})
    big = "".join(f"line {i}\n" for i in range(2000))  # 18,890 characters: under it, whole
    assert (await budget(ToolCall("toolu_1", "Bash", {}, None), ToolOutput(big))).text() == big
    bigger = big * 2
    out = (await budget(ToolCall("toolu_2", "Bash", {}, None), ToolOutput(bigger))).text()
    assert "saved at" in out and len(out) < 30_000
    for junk in ("", "lots", "-5", "0", "²"):  # not a positive number: the default budget
        default = OutputBudget.from_env(tmp_path / "spill", {"BASH_MAX_OUTPUT_LENGTH": junk})
        assert default.lines["Bash"] == 256 and default.per_tool["Bash"] == 10_240
    tiny = OutputBudget.from_env(tmp_path / "spill", {"BASH_MAX_OUTPUT_LENGTH": "3"})  # 100 at least
    out = (await tiny(ToolCall("toolu_3", "Bash", {}, None), ToolOutput(bigger))).text()
    assert "saved at" in out and len(out) < 500
