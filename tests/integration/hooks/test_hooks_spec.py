"""Hook events are one table (``extensions/protocol/hook_events.py``): the configuration reader, the
dispatcher (payload, environment, matcher), the output parser and ``keel hooks`` all read it.

The demo of the issue's acceptance: a new hook event is one entry in the table plus the code that
fires it (here a tool of the test's own, firing through the session's ``LifecyclePoint`` as a
subsystem does); nothing else in keel changes."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentkeel.app.runtime import Runtime, RuntimeOptions
from agentkeel.core.extensions import Extension, LifecyclePoint
from agentkeel.core.tools import Tool, ToolContext, ToolOutput
from agentkeel.protocol import hook_events as hookspec
from agentkeel.protocol.hook_events import SPECS, EventSpec
from conftest import KeelRun

REFERENCE = json.loads((Path(__file__).parents[2] / "data" / "claude-code-2.1.328-hook-payloads.json").read_text())
COMMON = {"session_id", "transcript_path", "cwd", "hook_event_name", "prompt_id", "permission_mode", "effort"}
# a command hook that logs its stdin and blocks (exit 2) a deploy to prod
HOOK = """
import json, os, sys
data = json.load(sys.stdin)
with open(os.environ["HOOK_LOG"], "a") as f:
    f.write(json.dumps(data) + "\\n")
if data["target"] == "prod":
    sys.stderr.write("not on a Friday")
    sys.exit(2)
"""


def test_the_table_says_what_claude_code_sends_for_every_captured_event() -> None:
    for event, captured in REFERENCE.items():
        spec = SPECS[event]
        assert set(captured["fields"]) - COMMON <= set(spec.fields), event
        assert ("permission_mode" in captured["fields"]) == spec.mode, event
        assert ("effort" in captured["fields"]) == spec.effort, event
        assert ("CLAUDE_EFFORT" in captured["env"]) == spec.effort, event
        assert ("CLAUDE_ENV_FILE" in captured["env"]) == spec.env_file, event


class DeployInput(msgspec.Struct):
    target: str


async def test_a_new_event_is_one_table_entry_and_the_code_that_fires_it(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the one entry a new event needs (a throwaway event: what a Claude Code release may add)
    monkeypatch.setitem(
        SPECS,
        "PreDeploy",
        EventSpec("PreDeploy", "a deploy, before it runs", ("target",), matcher="target", block="skip"),
    )

    # ...and the code that fires it, where the moment happens: the subsystem asks the session's LifecyclePoint
    async def deploy(args: DeployInput, ctx: ToolContext) -> ToolOutput:
        pre = await ctx.services.get(LifecyclePoint).fire("PreDeploy", {"target": args.target})
        if pre.blocked:
            return ToolOutput(f"deploy to {args.target} skipped: {pre.reason}", is_error=True)
        return ToolOutput(f"deployed to {args.target}")

    tool = Tool("Deploy", "Deploy the project.", DeployInput, deploy)
    log = tmp_path / "hooks.log"
    (tmp_path / "hook.py").write_text(HOOK)
    command = f"{sys.executable} {tmp_path / 'hook.py'}"
    hooks = {
        "PreDeploy": [
            {"matcher": "prod|staging", "hooks": [{"type": "command", "command": command}]},
            {"matcher": "nowhere", "hooks": [{"type": "command", "command": "touch never-runs"}]},
        ]
    }
    script = tmp_path / "script.json"
    calls = [{"tool_calls": [{"name": "Deploy", "input": {"target": t}}]} for t in ("staging", "prod", "dev")]
    script.write_text(json.dumps({"steps": [*calls, "done"]}))
    opts = RuntimeOptions(
        cwd=project,
        model=f"scripted:{script}",
        hooks=hooks,
        extensions=[Extension("deployer", tools=[tool])],
        env={**os.environ, "HOOK_LOG": str(log)},
        allowed_tools=["Deploy"],
        trust_project=True,
    )
    rt = Runtime.create(opts)
    try:
        result = await rt.run("deploy it")
    finally:
        await rt.aclose()
    transcript = rt.session_path.read_text()
    assert result.subtype == "success", transcript
    assert not [w for w in rt.settings.warnings if "PreDeploy" in w]  # the configuration accepts the event

    payloads = [json.loads(line) for line in log.read_text().splitlines()]
    # the matcher is matched against the field the table names: dev matched no group
    assert [p["target"] for p in payloads] == ["staging", "prod"]
    assert set(payloads[0]) == {"session_id", "transcript_path", "cwd", "prompt_id", "hook_event_name", "target"}
    assert payloads[0]["hook_event_name"] == "PreDeploy"
    assert not (project / "never-runs").exists()
    # exit 2 blocked the prod deploy with the hook's reason, as the table's ``block`` says
    assert "deploy to prod skipped: not on a Friday" in transcript
    assert "deployed to staging" in transcript and "deployed to dev" in transcript


def test_keel_hooks_test_matches_as_the_session_does(project: Path, keel: Callable[..., KeelRun]) -> None:
    """`keel hooks test` reads the matcher field from the table too (it had its own list, which
    lacked ConfigChange, InstructionsLoaded, FileChanged and the skill events: every group ran)."""
    hooks = {"ConfigChange": [{"matcher": "project_settings", "hooks": [{"type": "command", "command": "exit 2"}]}]}
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    assert keel("trust", str(project)).code == 0
    user = keel("hooks", "test", "ConfigChange", "--input", '{"source": "user_settings"}')
    assert user.code == 0, user.stderr
    assert "No ConfigChange hook matches" in user.stdout
    mine = keel("hooks", "test", "ConfigChange", "--input", '{"source": "project_settings"}')
    assert mine.stdout.splitlines()[-1].startswith("keel would: keep the current settings")
    listed = json.loads(keel("hooks", "events", "--json").stdout)["events"]
    assert [e["event"] for e in listed] == list(SPECS)
    assert {e["event"]: e["matcher"] for e in listed}["FileChanged"] == "file_path"
    assert hookspec.spec("FileChanged").match_value({"file_path": "/a/b/.envrc"}) == ".envrc"


async def test_every_payload_a_session_sends_is_what_its_table_entry_says(project: Path, tmp_path: Path) -> None:
    """The table is the payload's truth: each event's payload holds the common fields its entry asks
    for, its ``fields`` and nothing but its ``extra`` besides."""
    (project / "a.txt").write_text("alpha\n")
    seen: list[dict[str, Any]] = []

    def log(payload: dict[str, Any]) -> None:
        seen.append(payload)

    loop_events = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure")
    events = (*loop_events, "PostToolBatch", "Stop", "SessionEnd", "AgentIterationStart", "AgentIterationEnd")
    hooks = {e: [{"hooks": [{"type": "python", "callable": log}]}] for e in events}
    calls = [{"name": "Read", "input": {"file_path": "a.txt"}}, {"name": "Read", "input": {"file_path": "nope.txt"}}]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"tool_calls": calls}, "done"]}))
    opts = RuntimeOptions(cwd=project, model=f"scripted:{script}", hooks=hooks, trust_project=True)
    rt = Runtime.create(opts)
    try:
        await rt.run("read them")
    finally:
        await rt.aclose()
    assert {p["hook_event_name"] for p in seen} == set(events)
    for payload in seen:
        spec = SPECS[payload["hook_event_name"]]
        common = {"session_id", "transcript_path", "cwd", "hook_event_name"}
        common |= {"permission_mode"} if spec.mode else set()
        common |= {"effort"} if spec.effort else set()
        common |= {"prompt_id"} if spec.prompt_id else set()
        assert set(payload) - set(spec.extra) == common | set(spec.fields), payload["hook_event_name"]
