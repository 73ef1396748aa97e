"""A hook's ``additionalContext`` for a tool call reaches the model as Claude Code 2.1.328 sends it:
a ``<system-reminder>`` text block of its own after the call's result, PreToolUse's then
PostToolUse's, never inside the result the tool returned.

Recorded (2026-11-28) with a PreToolUse and a PostToolUse hook on Read printing
``{"hookSpecificOutput":{"hookEventName":...,"additionalContext":"CTX-PRE"|"CTX-POST"}}``::

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-fake-0000 HOME=$(mktemp -d) \\
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude --model claude-sonnet-4-5 -p "read a.txt" --allowedTools Read

The request after the Read held one user message: the tool_result ("1\\thello..."), then
``<system-reminder>\\nPreToolUse:Read hook additional context: CTX-PRE\\n</system-reminder>``, then
``<system-reminder>\\nPostToolUse:Read hook additional context: CTX-POST\\n</system-reminder>`` (each a
text block). keel appended both to the tool_result's text (``[PostToolUse hook] CTX-POST``).
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


HOOK = """import json, os, sys
event, ctx = sys.argv[1], sys.argv[2]
if ctx == "ANSI":  # terminal colours and a zero-width character, as a linter's output may carry
    ctx = "\\u001b[31mred\\u001b[0m hid\\u200bden"
name = os.path.basename(json.load(sys.stdin)["tool_input"]["file_path"])
print(json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": f"{ctx} {name}"}}))
"""


def _hooks(project: Path, keel: Keel) -> None:
    """A PreToolUse and a PostToolUse hook on Read whose context names the file the call read."""
    script = project / ".claude" / "ctx_hook.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(HOOK)

    def group(event: str, ctx: str) -> dict[str, Any]:
        command = f"{sys.executable} {script} {event} {ctx}"
        return {"matcher": "Read", "hooks": [{"type": "command", "command": command}]}

    hooks = {"PreToolUse": [group("PreToolUse", "CTX-PRE")], "PostToolUse": [group("PostToolUse", "CTX-POST")]}
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    assert keel("trust", str(project)).code == 0


def _reminder(event: str, ctx: str) -> dict[str, Any]:
    text = f"<system-reminder>\n{event}:Read hook additional context: {ctx}\n</system-reminder>"
    return {"type": "text", "text": text}


def _plain(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]


def test_context_blocks_follow_the_result(project: Path, fake_llm: FakeLLM, keel: Keel) -> None:
    (project / "a.txt").write_text("hello\n")
    _hooks(project, keel)
    read = {"text": "Reading.", "tool_calls": [{"name": "Read", "input": {"file_path": str(project / "a.txt")}}]}
    server = fake_llm({"steps": [read, "done"]})
    run = keel("-p", "read a.txt", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    blocks = _plain(server.cursor.requests[1]["body"]["messages"][-1]["content"])
    assert blocks[0]["type"] == "tool_result" and "CTX" not in json.dumps(blocks[0])
    assert blocks[1:] == [_reminder("PreToolUse", "CTX-PRE a.txt"), _reminder("PostToolUse", "CTX-POST a.txt")]


def test_parallel_calls_keep_every_result_and_resume_the_same(project: Path, fake_llm: FakeLLM, keel: Keel) -> None:
    """Two Reads in one turn: both results first (in call order), then the four reminders; the
    turn is not closed by the first call's context (no "missing tool_result" filler), and a resumed
    session sends the same message."""
    for name in ("a.txt", "b.txt"):
        (project / name).write_text(f"{name} body\n")
    _hooks(project, keel)
    calls = [{"name": "Read", "input": {"file_path": str(project / n)}} for n in ("a.txt", "b.txt")]
    server = fake_llm({"steps": [{"text": "Reading both.", "tool_calls": calls}, "done", "again"]})
    run = keel("-p", "read both", "--output-format", "json", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    blocks = _plain(server.cursor.requests[1]["body"]["messages"][-1]["content"])
    assert [b["type"] for b in blocks] == ["tool_result", "tool_result", "text", "text", "text", "text"]
    assert ["a.txt body" in json.dumps(blocks[0]), "b.txt body" in json.dumps(blocks[1])] == [True, True]
    assert "missing" not in json.dumps(blocks).lower()
    texts = sorted(b["text"] for b in blocks[2:])
    assert texts == sorted(
        _reminder(e, f"{c} {n}")["text"]
        for e, c in (("PreToolUse", "CTX-PRE"), ("PostToolUse", "CTX-POST"))
        for n in ("a.txt", "b.txt")
    )
    session_id = json.loads(run.stdout)["session_id"]
    run = keel("-p", "more", "--resume", session_id, env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    resumed = server.cursor.requests[-1]["body"]["messages"]
    assert _plain(resumed[2]["content"]) == blocks


def test_context_is_cleaned_as_a_result_is(project: Path, fake_llm: FakeLLM, keel: Keel) -> None:
    """Escapes and invisible characters in a hook's context are taken out, as in a tool's result."""
    (project / "a.txt").write_text("hello\n")
    _hooks(project, keel)
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    post = settings["hooks"]["PostToolUse"][0]["hooks"][0]
    post["command"] = post["command"].replace("CTX-POST", "ANSI")
    (project / ".claude" / "settings.json").write_text(json.dumps(settings))
    assert keel("trust", str(project)).code == 0
    read = {"tool_calls": [{"name": "Read", "input": {"file_path": str(project / "a.txt")}}]}
    server = fake_llm({"steps": [read, "done"]})
    assert keel("-p", "read a.txt", env=wire_env(server, "anthropic")).code == 0
    blocks = _plain(server.cursor.requests[1]["body"]["messages"][-1]["content"])
    assert blocks[-1] == _reminder("PostToolUse", "red hidden a.txt")
