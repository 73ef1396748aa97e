"""A project set up for Claude Code's hooks runs under ``keel -p`` and sees the same hooks fire,
with the same stdin JSON and the same effect of their exit codes and output (SPEC 4)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, session_files, wire_env

REFERENCE = json.loads((Path(__file__).parents[2] / "data" / "claude-code-2.1.328-hook-payloads.json").read_text())

# One hook script for every event, as a Claude Code user would write it: it logs what it got
# and answers by event (and, for PreToolUse, by the command it is shown).
HOOK = r"""
import json, os, sys
event = sys.argv[1]
data = json.load(sys.stdin)
env = {k: v for k, v in os.environ.items() if k.startswith(("CLAUDE", "KEEL_"))}
with open(os.environ["HOOK_LOG"], "a") as f:
    f.write(json.dumps({"event": event, "payload": data, "env": env}) + "\n")
if event == "SessionStart":
    with open(os.environ["CLAUDE_ENV_FILE"], "a") as f:
        f.write("export HOOK_VAR=from-session-start\n")
    print("SESSION-START-CONTEXT: the build uses make")
elif event == "UserPromptSubmit":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": "PROMPT-CONTEXT"}}))
elif event == "PreToolUse":
    command = data["tool_input"].get("command", "")
    if "forbidden" in command:
        print("no forbidden commands here", file=sys.stderr)
        sys.exit(2)
    if "denyme" in command:
        out = {"permissionDecision": "deny", "permissionDecisionReason": "denied by policy P-7"}
        print(json.dumps({"hookSpecificOutput": {"hookEventName": event, **out}}))
    if "rewrite" in command:
        new = {"command": "touch made-by-hook && echo rewritten-$HOOK_VAR"}
        out = {"permissionDecision": "allow", "updatedInput": new}
        print(json.dumps({"hookSpecificOutput": {"hookEventName": event, **out}}))
elif event == "PostToolUse":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": "POST-CONTEXT"}}))
elif event == "Stop" and not data["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "STOP-CONTINUE: run the tests first"}))
"""

EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "Stop", "SessionEnd"]


def _settings(project: Path, script: Path) -> None:
    def group(event: str, matcher: str | None = None) -> dict[str, Any]:
        g: dict[str, Any] = {"hooks": [{"type": "command", "command": f"{sys.executable} {script} {event}"}]}
        if matcher is not None:
            g["matcher"] = matcher
        return g

    hooks = {e: [group(e, "Bash" if e == "PreToolUse" else ("*" if e.startswith("Post") else None))] for e in EVENTS}
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}, indent=2))


def _texts(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    out = []
    for block in content:
        if block.get("type") == "text":
            out.append(block["text"])
        elif block.get("type") == "tool_result":
            c = block["content"]
            out.append(c if isinstance(c, str) else " ".join(x.get("text", "") for x in c))
    return "\n".join(out)


def _trust(project: Path, keel: Callable[..., KeelRun]) -> None:
    assert keel("trust", str(project)).code == 0


def test_claude_code_hooks_project_runs_under_keel(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    log = tmp_path / "hooks.log"
    _settings(project, script)
    _trust(project, keel)
    bash = lambda command: {"tool_calls": [{"name": "Bash", "input": {"command": command}}]}  # noqa: E731
    server = fake_llm(
        {
            "steps": [
                bash("echo forbidden"),
                bash("echo denyme"),
                bash("echo rewrite"),
                bash("ls no-such-file-here"),
                "first final answer",
                "second final answer",
            ]
        }
    )
    env = {**wire_env(server, "anthropic"), "HOOK_LOG": str(log)}
    run = keel("-p", "do the work", "--output-format", "json", env=env)
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "second final answer"
    requests = [r["body"] for r in server.cursor.requests]
    assert len(requests) == 6

    # SessionStart's plain stdout and UserPromptSubmit's additionalContext reach the first request
    first = _texts(requests[0]["messages"][0])
    assert "do the work" in first and "SESSION-START-CONTEXT" in first and "PROMPT-CONTEXT" in first
    # exit 2 blocks with stderr as the reason; permissionDecision deny blocks with its reason
    assert "no forbidden commands here" in _texts(requests[1]["messages"][-1])
    assert "denied by policy P-7" in _texts(requests[2]["messages"][-1])
    # updatedInput changed what ran (and the hook's allow skipped the ask a write would get
    # headless); the SessionStart export reached Bash; PostToolUse context follows the result
    third = _texts(requests[3]["messages"][-1])
    assert "rewritten-from-session-start" in third and "POST-CONTEXT" in third, third
    assert (project / "made-by-hook").exists()
    # the failing command reached the model as an error; then Stop blocked once: one more turn
    assert requests[4]["messages"][-1]["content"][0]["is_error"] is True
    assert "STOP-CONTINUE: run the tests first" in _texts(requests[5]["messages"][-1])

    entries = [json.loads(line) for line in log.read_text().splitlines()]
    seen = [e["event"] for e in entries]
    assert seen.count("PreToolUse") == 4 and seen.count("PostToolUse") == 1 and seen.count("PostToolUseFailure") == 1
    assert seen[:2] == ["SessionStart", "UserPromptSubmit"] and seen[-1] == "SessionEnd"
    assert seen.count("Stop") == 2
    transcript = session_files(Path(os.environ["KEEL_HOME"]))
    assert len(transcript) == 1
    logged = [json.loads(line) for line in transcript[0].read_text().splitlines()]
    blocks = [b for e in logged if e["type"] == "assistant" for b in e["message"]["content"]]
    tool_ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
    for entry in entries:
        event, payload, env = entry["event"], entry["payload"], entry["env"]
        assert payload["hook_event_name"] == event
        assert payload["transcript_path"] == str(transcript[0])
        assert payload["cwd"] == str(project.resolve())
        assert env["CLAUDE_PROJECT_DIR"] == str(project.resolve())
        if event in REFERENCE:
            missing = set(REFERENCE[event]["fields"]) - set(payload)
            assert not missing, f"{event} lacks {missing}"
        if "permission_mode" in payload:
            assert payload["permission_mode"] == "default"
        if "tool_use_id" in payload:
            assert payload["tool_use_id"] in tool_ids
    by_event = {e["event"]: e for e in entries}
    assert "CLAUDE_ENV_FILE" in by_event["SessionStart"]["env"]
    assert by_event["SessionStart"]["payload"]["source"] == "startup"
    response = by_event["PostToolUse"]["payload"]["tool_response"]
    assert set(REFERENCE["PostToolUse"]["example"]["tool_response"]) <= set(response)
    assert response["stdout"] == "rewritten-from-session-start"
    assert by_event["PostToolUse"]["payload"]["tool_input"]["command"].startswith("touch made-by-hook")
    failure = by_event["PostToolUseFailure"]["payload"]
    assert failure["tool_name"] == "Bash" and "no-such-file-here" in failure["error"]
    stops = [e["payload"] for e in entries if e["event"] == "Stop"]
    assert [s["stop_hook_active"] for s in stops] == [False, True]
    assert stops[0]["last_assistant_message"] == "first final answer"
    assert by_event["UserPromptSubmit"]["payload"]["prompt"] == "do the work"
    assert by_event["SessionEnd"]["payload"]["reason"] == "other"
    # every run is an event of the session
    assert sum(len(e["runs"]) for e in logged if e["type"] == "hook") == len(entries)
