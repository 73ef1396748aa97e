"""The ``result`` line for every way a run ends, as Claude Code 2.1.328 writes it (issue #34 item 1).

Recorded with the real CLI against /work/shared/tools/fakellm.py (``FAKELLM_STEPS=5``)::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \\
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p "do it" --output-format stream-json \\
      --verbose --allowedTools Bash [--max-turns 2 | --max-budget-usd 0.0000001]

- success: ``subtype "success"``, ``terminal_reason "completed"``, no ``errors``;
- ``--max-turns 2``: ``error_max_turns``, ``terminal_reason "max_turns"``,
  ``errors ["Reached maximum number of turns (2)"]``;
- ``--max-budget-usd``: ``error_max_budget_usd``, ``terminal_reason "budget_exhausted"``,
  ``errors ["Reached maximum budget ($1e-7)"]``;
- a 400 ``invalid_request_error`` from the API: ``subtype "success"``, ``is_error true``,
  ``terminal_reason "api_error"``, ``api_error_status 400``, the message in ``result``, no ``errors``;
- a 400 "prompt is too long" (``FAKELLM_WINDOW=10``): the same with ``terminal_reason "prompt_too_long"``;
- an ``interrupt`` control request during a tool call (``--input-format stream-json``):
  ``error_during_execution`` with an ``errors`` array.

The TypeScript Agent SDK throws on a non-success result without ``errors`` (the result is lost).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]
STREAM_OUT = ["--output-format", "stream-json", "--verbose"]
BASH = {"name": "Bash", "input": {"command": "echo hi"}}


def _result(run: KeelRun) -> dict[str, Any]:
    (line,) = [line for line in run.lines() if line["type"] == "result"]
    return line


def _assert_error_result(line: dict[str, Any], subtype: str) -> None:
    assert line["subtype"] == subtype and line["is_error"] is True, line
    errors = line.get("errors")
    assert isinstance(errors, list) and errors and all(isinstance(e, str) and e for e in errors), line


def test_success_says_completed(fake_llm: Start, keel: Keel) -> None:
    server = fake_llm({"steps": ["All done."]})
    line = _result(keel("-p", "hi", *STREAM_OUT, env=wire_env(server, "anthropic")))
    assert line["subtype"] == "success" and line["is_error"] is False
    assert line["terminal_reason"] == "completed"
    assert "errors" not in line


def test_max_turns_carries_errors_and_terminal_reason(fake_llm: Start, keel: Keel) -> None:
    server = fake_llm({"steps": [{"tool_calls": [BASH]}], "loop": True})
    run = keel("-p", "go", "--max-turns", "2", "--allowedTools", "Bash", *STREAM_OUT, env=wire_env(server, "anthropic"))
    assert run.code == 1, run.stderr
    line = _result(run)
    _assert_error_result(line, "error_max_turns")
    assert line["terminal_reason"] == "max_turns"
    assert "maximum number of turns (2)" in line["errors"][0]


def test_max_budget_carries_errors_and_terminal_reason(fake_llm: Start, keel: Keel) -> None:
    usage = {"input_tokens": 100_000, "output_tokens": 1000}
    server = fake_llm({"steps": [{"tool_calls": [BASH], "usage": usage}], "loop": True})
    run = keel(
        "-p", "go", "--max-budget-usd", "0.0000001", "--allowedTools", "Bash", *STREAM_OUT,
        env=wire_env(server, "anthropic"),
    )  # fmt: skip
    line = _result(run)
    _assert_error_result(line, "error_max_budget_usd")
    assert line["terminal_reason"] == "budget_exhausted"


def test_an_api_error_is_success_with_is_error_and_its_http_status(fake_llm: Start, keel: Keel) -> None:
    server = fake_llm(
        {"steps": [{"error": {"status": 400, "message": "messages.0: something is wrong"}}], "loop": True}
    )
    for fmt in ("stream-json", "json"):
        run = keel("-p", "hi", "--output-format", fmt, "--verbose", env=wire_env(server, "anthropic"))
        assert run.code == 1, run.stderr
        line = _result(run) if fmt == "stream-json" else run.json()
        assert line["subtype"] == "success" and line["is_error"] is True, line
        assert line["terminal_reason"] == "api_error"
        assert line["api_error_status"] == 400
        assert "something is wrong" in line["result"]
        assert "errors" not in line


def test_a_prompt_too_long_error_says_prompt_too_long(fake_llm: Start, keel: Keel) -> None:
    server = fake_llm({"steps": ["never reached"], "context_window": 10})
    line = _result(keel("-p", "hi", *STREAM_OUT, env=wire_env(server, "anthropic")))
    assert line["subtype"] == "success" and line["is_error"] is True, line
    assert line["terminal_reason"] == "prompt_too_long"
    assert line["api_error_status"] == 400


def test_an_interrupt_in_stream_json_input_carries_errors(fake_llm: Start, project: Path) -> None:
    """The SDK's ``interrupt()`` during a tool call: a non-success result with ``errors`` (the
    TypeScript SDK threw on keel's, which had none)."""
    slow = {"name": "Bash", "input": {"command": "sleep 20"}}
    server = fake_llm({"steps": [{"tool_calls": [slow]}, "after"]})
    proc = subprocess.Popen(
        [KEEL, "--input-format", "stream-json", *STREAM_OUT, "--allowedTools", "Bash"],
        cwd=project,
        env={**os.environ, **wire_env(server, "anthropic")},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    user = {"type": "user", "session_id": "", "message": {"role": "user", "content": "go"}}
    proc.stdin.write(json.dumps(user) + "\n")
    proc.stdin.flush()
    lines: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lines.append(json.loads(proc.stdout.readline()))
        if lines[-1]["type"] == "assistant":
            break
    time.sleep(0.5)  # the Bash call is running
    interrupt = {"type": "control_request", "request_id": "r1", "request": {"subtype": "interrupt"}}
    proc.stdin.write(json.dumps(interrupt) + "\n")
    proc.stdin.flush()
    while time.monotonic() < deadline:
        lines.append(json.loads(proc.stdout.readline()))
        if lines[-1]["type"] == "result":
            break
    proc.stdin.close()
    proc.wait(timeout=60)
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
    _assert_error_result(lines[-1], "error_during_execution")


def test_every_non_success_result_line_carries_errors() -> None:
    """The shared encoder (the in-process SDK and ``encode(RunFinished)`` use it without the CLI's
    extra fields): an interrupt, a failure and a limit each get an ``errors`` array; a success none."""
    from agentkeel.protocol.stream_json import result_line

    base: dict[str, Any] = {
        "duration_ms": 1, "num_turns": 1, "session_id": "s", "total_cost_usd": 0.0, "usage": {},
    }  # fmt: skip
    for subtype, text, wire in [
        ("interrupted", "interrupted by user", "error_during_execution"),
        ("error_during_execution", "", "error_during_execution"),
        ("error_max_turns", "", "error_max_turns"),
    ]:
        line = result_line(subtype=subtype, is_error=True, result=text, **base)
        _assert_error_result(line, wire)
    ok = result_line(subtype="success", is_error=False, result="fine", **base)
    assert "errors" not in ok and ok["terminal_reason"] == "completed"
