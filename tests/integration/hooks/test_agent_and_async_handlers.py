"""Hook handler features beyond the basics (SPEC 4): the ``agent`` handler, ``asyncRewake``,
``suppressOutput``, ``watchPaths`` -> FileChanged, and ConfigChange when a settings file changes."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.app.runtime import Runtime
from agentkeel.models.fake.server import FakeLLMServer
from kit import run_session, session, session_files

Fake = Callable[[Any], FakeLLMServer]

LOGGER = r"""
import json, os, sys
data = json.load(sys.stdin)
with open(os.environ["HOOK_LOG"], "a") as f:
    f.write(json.dumps(data) + "\n")
if len(sys.argv) > 1:
    print(sys.argv[1])
"""


SLOW_FAIL = "import sys, time\ntime.sleep(0.5)\nprint('tests failed: 2 errors', file=sys.stderr)\nsys.exit(2)\n"
EDIT_SETTINGS = "import pathlib; p = pathlib.Path('.claude'); p.mkdir(); (p / 'settings.local.json').write_text('{}')"


def _bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "Bash", "input": {"command": command}}]}


def _hook(event: str, handler: dict[str, Any], matcher: str = "") -> dict[str, Any]:
    return {event: [{"matcher": matcher, "hooks": [handler]}]}


async def _run(
    project: Path, server: FakeLLMServer, hooks: dict[str, Any], log: Path | None = None, mode: Any = None
) -> str:
    env = {"HOOK_LOG": str(log)} if log is not None else {}
    rt = session(project, server=server, env=env, allowed_tools=["Bash"], hooks=hooks, permission_mode=mode)
    return (await run_session(rt, "go")).result


def _sent(server: FakeLLMServer, index: int) -> str:
    return json.dumps(server.cursor.requests[index]["body"]["messages"])


async def test_agent_handler_reads_the_project_and_blocks(project: Path, fake_llm: Fake) -> None:
    (project / "POLICY.md").write_text("Deploys are frozen until Monday.\n")
    agent = {"type": "agent", "prompt": "Does POLICY.md allow this command? $ARGUMENTS", "maxTurns": 3}
    steps = [
        _bash("echo deploy"),  # the session's model
        {"tool_calls": [{"name": "Read", "input": {"file_path": "/etc/hostname"}}]},  # the hook's agent
        {"tool_calls": [{"name": "Read", "input": {"file_path": str(project / "POLICY.md")}}]},
        '{"ok": false, "reason": "POLICY.md: deploys are frozen"}',
        "done",  # the session's model again
    ]
    server = fake_llm({"steps": steps})
    assert await _run(project, server, _hook("PreToolUse", agent, "Bash")) == "done"
    bodies = [r["body"] for r in server.cursor.requests]
    assert len(bodies) == 5
    assert sorted(t["name"] for t in bodies[1]["tools"]) == ["Glob", "Grep", "Read"]  # LS: not offered
    assert "echo deploy" in _sent(server, 1)  # the event's JSON reached the agent
    assert "outside the project" in _sent(server, 2)  # /etc is not the project's
    assert "Deploys are frozen until Monday" in _sent(server, 3)
    assert "POLICY.md: deploys are frozen" in _sent(server, 4)  # the call was blocked with the reason


async def test_agent_handler_that_never_answers_is_bounded(project: Path, fake_llm: Fake) -> None:
    agent = {"type": "agent", "prompt": "check", "maxTurns": 2}
    looping = {"tool_calls": [{"name": "LS", "input": {"path": str(project)}}]}
    server = fake_llm({"steps": [_bash("echo ran-anyway"), looping, looping, "done"]})
    assert await _run(project, server, _hook("PreToolUse", agent, "Bash")) == "done"
    assert "ran-anyway" in _sent(server, 3)  # a failing (non-fail-closed) hook does not block


async def test_async_rewake_block_wakes_the_model(project: Path, tmp_path: Path, fake_llm: Fake) -> None:
    script = tmp_path / "slow.py"
    script.write_text(
        "import sys, time\ntime.sleep(0.5)\nprint('tests failed: 2 errors', file=sys.stderr)\nsys.exit(2)\n"
    )
    hook = {"type": "command", "command": f"{sys.executable} {script}", "asyncRewake": True}
    server = fake_llm({"steps": [_bash("echo hi"), "first stop", "after the wake"]})
    assert await _run(project, server, _hook("PostToolUse", hook)) == "after the wake"
    assert "tests failed: 2 errors" in _sent(server, 2)


async def test_suppress_output_keeps_a_hook_output_out_of_the_transcript(
    project: Path, tmp_path: Path, fake_llm: Fake
) -> None:
    script = tmp_path / "log.py"
    script.write_text(LOGGER)
    quiet = json.dumps({"suppressOutput": True, "systemMessage": ""})
    hooks = {
        "PostToolUse": [
            {"hooks": [{"type": "command", "command": [sys.executable, str(script), "visible-output"]}]},
            {"hooks": [{"type": "command", "command": [sys.executable, str(script), quiet]}]},
        ]
    }
    server = fake_llm({"steps": [_bash("echo hi"), "done"]})
    await _run(project, server, hooks, tmp_path / "hooks.log")
    logged = [json.loads(line) for line in session_files(Path(os.environ["KEEL_HOME"]))[0].read_text().splitlines()]
    runs = [r for e in logged if e["type"] == "hook" for r in e["runs"]]
    outputs = [r.get("output", "").strip() for r in runs]
    assert "visible-output" in outputs and not any("suppressOutput" in o for o in outputs)


async def test_watch_paths_fire_file_changed_and_settings_fire_config_change(
    project: Path, tmp_path: Path, fake_llm: Fake
) -> None:
    script = tmp_path / "log.py"
    script.write_text(LOGGER)
    watch = json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "watchPaths": ["watched.txt"]}})
    log_cmd = [sys.executable, str(script)]
    hooks = {
        **_hook("SessionStart", {"type": "command", "command": [*log_cmd, watch]}),
        **_hook("FileChanged", {"type": "command", "command": log_cmd}, "watched.txt"),
        **_hook("ConfigChange", {"type": "command", "command": log_cmd}, "local_settings"),
        # the user edits their local settings while the session runs (the model may not: protected)
        **_hook("PostToolUse", {"type": "command", "command": [sys.executable, "-c", EDIT_SETTINGS]}),
    }
    steps = [_bash("echo one > watched.txt && echo not-watched > other.txt"), "done"]
    server = fake_llm({"steps": steps})
    log = tmp_path / "hooks.log"
    assert await _run(project, server, hooks, log, mode="bypassPermissions") == "done"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    changed = [e for e in events if e["hook_event_name"] == "FileChanged"]
    assert [(Path(e["file_path"]).name, e["event"]) for e in changed] == [("watched.txt", "add")]
    config = [e for e in events if e["hook_event_name"] == "ConfigChange"]
    assert [(e["source"], Path(e["file_path"]).name) for e in config] == [("local_settings", "settings.local.json")]


def _deny_later(project: Path) -> Any:
    """A PostToolUse handler standing in for the user, who edits local settings mid-session."""

    def edit(payload: dict[str, Any]) -> None:
        path = project / ".keel" / "settings.local.json"
        path.parent.mkdir(exist_ok=True)
        rules = {"deny": ["Bash(echo second*)"], "allow": ["Bash(rm *)"]}
        path.write_text(json.dumps({"permissions": rules}))

    return {"type": "python", "callable": edit, "once": True}


def _results(log: str) -> list[tuple[str, bool]]:
    blocks = [
        b for line in log.splitlines() if '"tool_results"' in line for b in json.loads(line)["message"]["content"]
    ]
    return [(str(b["content"]).split(" (")[0], b["is_error"]) for b in blocks]


async def _config_session(project: Path, hooks: dict[str, Any]) -> tuple[Runtime, list[str], str]:
    steps = [_bash("echo first"), _bash("echo second"), "done"]
    rt = session(project, steps, allowed_tools=["Bash"], hooks=hooks, trust_project=True)
    notices: list[str] = []
    rt.bus.subscribe(lambda e: notices.append(str(getattr(e, "message", ""))))
    await run_session(rt, "go")
    return rt, notices, rt.session_path.read_text()


async def test_a_settings_change_mid_session_applies_its_deny_rules_but_never_widens(project: Path) -> None:
    rt, notices, log = await _config_session(project, _hook("PostToolUse", _deny_later(project)))
    assert _results(log) == [("first", False), ("`echo second` is denied by rule Bash(echo second*)", True)]
    assert any("1 new deny/ask rule(s) apply now" in n for n in notices)
    local = str(project / ".keel" / "settings.local.json")
    assert [r.kind for r in rt.permissions.rules if r.source == local] == ["deny"]  # the allow waits


async def test_config_change_block_keeps_the_old_settings_with_its_reason(project: Path) -> None:
    seen: list[dict[str, Any]] = []

    def refuse(payload: dict[str, Any]) -> dict[str, Any]:
        seen.append(payload)
        return {"decision": "block", "reason": "settings are frozen during deploys"}

    hooks = {
        **_hook("PostToolUse", _deny_later(project)),
        **_hook("ConfigChange", {"type": "python", "callable": refuse}),
    }
    rt, notices, log = await _config_session(project, hooks)
    assert _results(log) == [("first", False), ("second", False)]
    assert [(p["source"], Path(p["file_path"]).name) for p in seen] == [("local_settings", "settings.local.json")]
    assert any("settings are frozen during deploys" in n and "not applied" in n for n in notices)
    local = str(project / ".keel" / "settings.local.json")
    assert [r for r in rt.permissions.rules if r.source == local] == []  # the old settings hold
