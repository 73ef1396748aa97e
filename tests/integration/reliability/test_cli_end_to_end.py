"""The reliability layer end to end (SPEC 5): each built-in's failure provoked under ``keel -p``
against ``keel dev fake-llm``, and the recovery shown in what the model is sent next."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, session_files, wire_env

Keel = Callable[..., KeelRun]
Fake = Callable[[Any], FakeLLMServer]


def _call(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "input": tool_input}]}


def _settings(project: Path, keel: Keel, data: dict[str, Any]) -> None:
    (project / ".keel").mkdir(exist_ok=True)
    (project / ".keel" / "settings.json").write_text(json.dumps(data))
    assert keel("trust", str(project)).code == 0


def _bodies(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r["body"] for r in server.cursor.requests]


def _last_result(body: dict[str, Any]) -> dict[str, Any]:
    blocks = [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert blocks, body["messages"][-1]
    return dict(blocks[-1])


def _text(block: dict[str, Any]) -> str:
    c = block["content"]
    return c if isinstance(c, str) else " ".join(x.get("text", "") for x in c)


def _transcript() -> str:
    return "\n".join(p.read_text() for p in session_files(Path(os.environ["KEEL_HOME"])))


def _all_text(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


# --- non-interactive-env -----------------------------------------------------------------


def test_vim_is_refused_with_the_non_interactive_way_and_pagers_are_off(
    project: Path, fake_llm: Fake, keel: Keel
) -> None:
    server = fake_llm({"steps": [_call("Bash", command="vim notes.txt"), _call("Bash", command="env"), "done"]})
    run = keel("-p", "edit notes", "--allowedTools", "Bash", env=wire_env(server, "anthropic"), timeout=60)
    assert run.code == 0, run.stderr
    refused = _last_result(_bodies(server)[1])
    assert refused["is_error"] is True and "Edit or Write tool" in _text(refused)
    assert "[non-interactive-env] refused: vim notes.txt" in run.stderr
    env = _text(_last_result(_bodies(server)[2]))
    assert "MANPAGER=cat" in env and "GIT_EDITOR=true" in env and "GH_PAGER=cat" in env


def test_git_add_p_refused_unless_the_builtin_is_disabled(project: Path, fake_llm: Fake, keel: Keel) -> None:
    steps = [_call("Bash", command="git add -p"), "done"]
    server = fake_llm({"steps": steps})
    run = keel("-p", "stage", "--allowedTools", "Bash", env=wire_env(server, "anthropic"))
    assert run.code == 0 and "hunk by hunk" in _text(_last_result(_bodies(server)[1]))

    _settings(project, keel, {"disabled_hooks": ["non-interactive-env"]})
    server = fake_llm({"steps": steps})
    run = keel("-p", "stage", "--allowedTools", "Bash", env=wire_env(server, "anthropic"))
    assert run.code == 0 and "hunk by hunk" not in _text(_last_result(_bodies(server)[1]))  # it ran (and failed)


# --- model fallback --------------------------------------------------------------------------


OVERLOADED = {"error": {"status": 529, "retry_after": 0}}


def test_repeated_529_switches_to_the_fallback_model(project: Path, fake_llm: Fake, keel: Keel) -> None:
    server = fake_llm({"steps": [OVERLOADED, OVERLOADED, _call("Bash", command="echo hi"), "answer from the fallback"]})
    env = {**wire_env(server, "anthropic"), "KEEL_MAX_RETRIES": "1"}
    run = keel("-p", "hello", "--fallback-model", "haiku", "--allowedTools", "Bash", env=env)
    assert run.code == 0, run.stderr
    models = [b["model"] for b in _bodies(server)]
    assert models == ["claude-sonnet-4-5", "claude-sonnet-4-5", "claude-haiku-4-5", "claude-haiku-4-5"]
    assert "[model-fallback] claude-sonnet-4-5 failed (overloaded" in run.stderr


def test_repeated_529_without_a_fallback_ends_the_run(project: Path, fake_llm: Fake, keel: Keel) -> None:
    server = fake_llm({"steps": [OVERLOADED, OVERLOADED, "never reached"]})
    env = {**wire_env(server, "anthropic"), "KEEL_MAX_RETRIES": "1"}
    run = keel("-p", "hello", "--output-format", "json", env=env)
    assert run.code != 0 and run.json()["is_error"] is True
    assert len(_bodies(server)) == 2


def test_fallback_model_setting_and_foreign_provider_warning(project: Path, fake_llm: Fake, keel: Keel) -> None:
    _settings(project, keel, {"fallbackModel": "gpt-4.1"})
    server = fake_llm({"steps": ["hi"]})
    run = keel("-p", "hello", env=wire_env(server, "anthropic"))
    assert run.code == 0 and "fallback model 'gpt-4.1' is a openai model" in run.stderr


# --- session recovery and the error-pattern detector ---------------------------------------

TOO_LONG = {"error": {"status": 400, "message": "prompt is too long: 210000 tokens > 200000 maximum"}}
BIG = "python3 -c \"print('y' * 3000)\""


def test_prompt_too_long_is_shrunk_and_resent(project: Path, fake_llm: Fake, keel: Keel) -> None:
    """With compaction off (it owns a refusal first when on), session recovery shrinks and re-sends."""
    _settings(project, keel, {"context": {"compactOnOverflow": False}})
    server = fake_llm({"steps": [_call("Bash", command=BIG), _call("Bash", command="echo two"), TOO_LONG, "recovered"]})
    run = keel("-p", "go", "--allowedTools", "Bash", "--output-format", "json", env=wire_env(server, "anthropic"))
    assert run.code == 0 and run.json()["result"] == "recovered", run.stderr
    assert "[error-pattern-detector] prompt_too_long" in _transcript()
    assert "[session-recovery] prompt_too_long" in run.stderr and "request sent again" in run.stderr
    failed, resent = _bodies(server)[2], _bodies(server)[3]
    assert "y" * 3000 in _all_text(failed)
    assert "y" * 3000 not in _all_text(resent) and "pruned to fit the context window" in _all_text(resent)
    transcript = session_files(Path(os.environ["KEEL_HOME"]))[0].read_text()
    assert "y" * 3000 in transcript  # the log is never edited


def test_tool_result_missing_400_is_recovered(project: Path, fake_llm: Fake, keel: Keel) -> None:
    missing = {
        "error": {
            "status": 400,
            "message": "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: "
            "toolu_000_0. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        }
    }
    server = fake_llm({"steps": [_call("Bash", command="echo one"), missing, "fine again"]})
    run = keel("-p", "go", "--allowedTools", "Bash", "--output-format", "json", env=wire_env(server, "anthropic"))
    assert run.code == 0 and run.json()["result"] == "fine again", run.stderr
    assert "[session-recovery] tool_result_missing" in run.stderr
    assert len(_bodies(server)) == 3

    _settings(project, keel, {"disabled_hooks": ["session-recovery"]})
    server = fake_llm({"steps": [_call("Bash", command="echo one"), missing, "fine again"]})
    run = keel("-p", "go", "--allowedTools", "Bash", "--output-format", "json", env=wire_env(server, "anthropic"))
    assert run.code != 0 and len(_bodies(server)) == 2
    assert "error-pattern-detector" not in run.stderr  # the run's error is the line; the log names the pattern
    assert "[error-pattern-detector] tool_result_missing" in _transcript()


# --- todo continuation -------------------------------------------------------------------------

TODOS = [
    {"content": "write the module", "status": "completed", "activeForm": "writing"},
    {"content": "write the tests", "status": "pending", "activeForm": "testing"},
]


def test_idle_with_open_todos_gets_a_continuation(project: Path, fake_llm: Fake, keel: Keel) -> None:
    _settings(project, keel, {"reliability": {"todoCountdownSeconds": 0.1}})
    done = [dict(t, status="completed") for t in TODOS]
    steps = [_call("TodoWrite", todos=TODOS), "I'll stop here.", _call("TodoWrite", todos=done), "all done"]
    server = fake_llm({"steps": steps})
    run = keel("-p", "build it", "--output-format", "json", env=wire_env(server, "anthropic"))
    assert run.code == 0 and run.json()["result"] == "all done", run.stderr
    bodies = _bodies(server)
    assert len(bodies) == 4
    reminder = json.dumps(bodies[2]["messages"][-1])
    assert "TODO CONTINUATION" in reminder and "write the tests" in reminder and "write the module" not in reminder


def test_no_progress_after_a_continuation_stops(project: Path, fake_llm: Fake, keel: Keel) -> None:
    _settings(project, keel, {"reliability": {"todoCountdownSeconds": 0}})
    server = fake_llm({"steps": [_call("TodoWrite", todos=TODOS), "stopping", "stopping again", "never"]})
    run = keel("-p", "build it", "--output-format", "json", env=wire_env(server, "anthropic"))
    assert run.code == 0 and run.json()["result"] == "stopping again", run.stderr
    assert len(_bodies(server)) == 3 and "made no progress" in run.stderr


def test_todo_enforcer_disabled(project: Path, fake_llm: Fake, keel: Keel) -> None:
    _settings(project, keel, {"disabled_hooks": ["todo-continuation-enforcer"]})
    server = fake_llm({"steps": [_call("TodoWrite", todos=TODOS), "stopping", "never"]})
    run = keel("-p", "build it", env=wire_env(server, "anthropic"))
    assert run.code == 0 and len(_bodies(server)) == 2


# --- comment checker, context monitor, truncator -------------------------------------------------


def test_comment_checker_flags_narrating_comments(project: Path, fake_llm: Fake, keel: Keel) -> None:
    slop = "# Added error handling as requested\ndef f(x):\n    # Return the result\n    return x\n"
    clean = "def g(x):\n    # x is never negative here: the caller clamps it\n    return x\n"
    steps = [
        _call("Write", file_path=str(project / "a.py"), content=slop),
        _call("Write", file_path=str(project / "b.py"), content=clean),
        "done",
    ]
    server = fake_llm({"steps": steps})
    run = keel("-p", "write", "--permission-mode", "acceptEdits", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    flagged = _text(_last_result(_bodies(server)[1]))
    assert "[comment-checker]" in flagged and "# Added error handling as requested" in flagged
    assert "# Return the result" in flagged
    assert "[comment-checker]" not in _text(_last_result(_bodies(server)[2]))
    assert (project / "a.py").read_text() == slop  # it warns; the file is the model's to fix


def test_context_monitor_warns_and_truncator_cuts_to_the_headroom(project: Path, fake_llm: Fake, keel: Keel) -> None:
    # context.window moves compaction out of the way (at 98% of the real window it would run first)
    # and the budget of a command's output (10,240 characters) out of the truncator's
    bash = {"BASH_MAX_OUTPUT_LENGTH": "30000"}
    _settings(project, keel, {"env": bash, "context": {"window": 1_000_000, "autoCompact": False}})
    full = {**_call("Bash", command="python3 -c \"print('z' * 20000)\""), "usage": {"input_tokens": 196000}}
    server = fake_llm({"steps": [full, "done"]})
    run = keel("-p", "go", "--allowedTools", "Bash", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert re.search(r"\[context-window-monitor\] context window (9[5-9]|100)% full", run.stderr), run.stderr
    assert run.stderr.count("[context-window-monitor]") == 1  # one warning for all three thresholds crossed at once
    result = _text(_last_result(_bodies(server)[1]))
    assert "tool-output-truncator" in result and len(result) < 9000

    off = ["tool-output-truncator", "context-window-monitor"]
    _settings(
        project, keel, {"env": bash, "disabled_hooks": off, "context": {"window": 1_000_000, "autoCompact": False}}
    )
    server = fake_llm({"steps": [full, "done"]})
    run = keel("-p", "go", "--allowedTools", "Bash", env=wire_env(server, "anthropic"))
    assert "context-window-monitor" not in run.stderr
    assert len(_text(_last_result(_bodies(server)[1]))) >= 20000


# --- request validators: thinking, empty content -------------------------------------------------


@pytest.mark.parametrize("disabled", [False, True])
def test_tool_loop_without_thinking_goes_without_thinking(
    project: Path, fake_llm: Fake, keel: Keel, disabled: bool
) -> None:
    if disabled:
        _settings(project, keel, {"disabled_hooks": ["thinking-block-validator"]})
    server = fake_llm({"steps": [_call("Bash", command="echo hi"), "done"]})
    env = {**wire_env(server, "anthropic"), "MAX_THINKING_TOKENS": "2048"}
    run = keel("-p", "go", "--allowedTools", "Bash", env=env)
    assert run.code == 0, run.stderr
    first, second = _bodies(server)
    assert "thinking" in first
    assert ("thinking" in second) is disabled
    assert ("[thinking-block-validator]" in run.stderr) is not disabled


@pytest.mark.parametrize("disabled", [False, True])
def test_whitespace_text_next_to_a_tool_call_is_left_out(
    project: Path, fake_llm: Fake, keel: Keel, disabled: bool
) -> None:
    if disabled:
        _settings(project, keel, {"disabled_hooks": ["empty-message-sanitizer"]})
    server = fake_llm({"steps": [{"text": "  \n ", **_call("Bash", command="echo hi")}, "done"]})
    run = keel("-p", "go", "--allowedTools", "Bash", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assistant = _bodies(server)[1]["messages"][1]
    blank = [b for b in assistant["content"] if b["type"] == "text" and not b["text"].strip()]
    assert bool(blank) is disabled
