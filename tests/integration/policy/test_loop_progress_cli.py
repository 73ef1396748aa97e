"""End to end through ``keel -p``: the same test command run three times with files changed in
between all runs (an Edit, or another shell command changing a file); three identical runs with
nothing between are still stopped on the third (#35 item 7)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

REFUSED = "same input 3 times"


def _results(server: FakeLLMServer) -> list[str]:
    last = server.cursor.requests[-1]["body"]["messages"]
    return [
        json.dumps(b.get("content"))
        for m in last
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


def test_tests_rerun_after_edits_all_run(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / "calc.py").write_text("VALUE = 1\n")
    run_tests = {"name": "Bash", "input": {"command": "cat calc.py"}}
    steps: list[Any] = [{"tool_calls": [{"name": "Read", "input": {"file_path": str(project / "calc.py")}}]}]
    for n in range(1, 4):
        steps.append({"tool_calls": [run_tests]})
        edit = {"file_path": str(project / "calc.py"), "old_string": f"VALUE = {n}", "new_string": f"VALUE = {n + 1}"}
        steps.append({"tool_calls": [{"name": "Edit", "input": edit}]})
    steps += [{"tool_calls": [{"name": "Bash", "input": {"command": "sed -i s/4/5/ calc.py"}}]}]
    steps += [{"tool_calls": [run_tests]}, "done"]
    server = fake_llm({"steps": steps})
    run = keel("-p", "fix it", "--allowedTools", "Bash", "Edit", "Read", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    results = _results(server)
    assert not any(REFUSED in r for r in results), results
    assert (project / "calc.py").read_text() == "VALUE = 5\n"
    assert "VALUE = 5" in results[-1]  # the fifth run of the same command ran after the sed


def test_identical_runs_with_nothing_between_are_still_refused(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / "calc.py").write_text("VALUE = 1\n")
    run_tests = {"name": "Bash", "input": {"command": "cat calc.py"}}
    server = fake_llm({"steps": [{"tool_calls": [run_tests]}] * 3 + ["done"]})
    run = keel("-p", "check", "--allowedTools", "Bash", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    results = _results(server)
    assert [REFUSED in r for r in results] == [False, False, True]
