"""Subagent rules: nesting and concurrency limits, lifecycle hooks, the child's permission mode,
size-limited results, background agents and `keel agents`, definitions and plugins that are wrong."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.agents.defs import load_agents
from agentkeel.config.settings import SettingsLayer
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.plugins.loader import find_plugins
from agents_fixtures import (
    child_transcripts,
    claude_project,
    metas,
    result_text,
    system_text,
    tool_names,
    tool_results,
)
from kit import KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]


def _task(prompt: str, agent: str = "general-purpose", **extra: Any) -> dict[str, Any]:
    return {"name": "Task", "input": {"description": prompt, "prompt": prompt, "subagent_type": agent, **extra}}


def test_children_cannot_nest_past_the_limit(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    server = fake_llm([{"tool_calls": [_task("one")]}, "child", "parent"])
    env = {**wire_env(server, "anthropic"), "KEEL_SUBAGENT_MAX_DEPTH": "1"}
    assert keel("-p", "go", env=env).code == 0
    child = server.cursor.requests[1]["body"]
    assert "Task" not in tool_names(child) and "Agent" not in tool_names(child)  # (default 3: test_nested_agents_cli)

    server = fake_llm([{"tool_calls": [_task("one")]}, {"tool_calls": [_task("two")]}, "grandchild", "child", "ok"])
    env = {**wire_env(server, "anthropic"), "KEEL_SUBAGENT_MAX_DEPTH": "2"}
    run = keel("-p", "go", env=env)
    assert run.code == 0, run.stderr
    assert "Task" in tool_names(server.cursor.requests[1]["body"])
    assert "Task" not in tool_names(server.cursor.requests[2]["body"])
    assert sorted(m["depth"] for m in metas(_home(project)))[-2:] == [1, 2]


def _home(project: Path) -> Path:
    return project.parent / "keelhome"


def test_the_concurrency_limit_holds(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    slow = {"text": "done", "delay_s": 1.5}  # long enough for the second to start while the first runs
    server = fake_llm([{"tool_calls": [_task(f"job {i}") for i in range(4)]}, slow, slow, slow, slow, "ok"])
    env = {**wire_env(server, "anthropic"), "KEEL_SUBAGENT_CONCURRENCY": "2"}
    assert keel("-p", "go", env=env).code == 0
    spans = [(m["started"], m["finished"]) for m in metas(_home(project))]
    assert len(spans) == 4
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most == 2  # two at a time: never three, and not one after another


def test_subagent_start_and_stop_hooks(project: Path, tmp_path: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    seen = tmp_path / "seen.jsonl"
    start = tmp_path / "start.py"
    start.write_text(
        "import json, sys\n"
        f"open({str(seen)!r}, 'a').write(sys.stdin.read() + '\\n')\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'SubagentStart',"
        " 'additionalContext': 'Remember: tabs, not spaces.'}}))\n"
    )
    stop = tmp_path / "stop.py"
    stop.write_text(
        "import json, sys\n"
        "data = json.load(sys.stdin)\n"
        f"open({str(seen)!r}, 'a').write(json.dumps(data) + '\\n')\n"
        "if not data.get('stop_hook_active'):\n"
        "    print(json.dumps({'decision': 'block', 'reason': 'also check the tests'}))\n"
    )
    hooks = {
        "SubagentStart": [
            {"matcher": "reviewer", "hooks": [{"type": "command", "command": f"{sys.executable} {start}"}]}
        ],
        "SubagentStop": [{"hooks": [{"type": "command", "command": f"{sys.executable} {stop}"}]}],
    }
    settings = tmp_path / "hooks.json"
    settings.write_text(json.dumps({"hooks": hooks}))
    server = fake_llm([{"tool_calls": [_task("review", "reviewer")]}, "first report", "tests checked", "ok"])
    run = keel("-p", "go", "--settings", str(settings), env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    child_first, child_second = (server.cursor.requests[i]["body"] for i in (1, 2))
    system = child_first["system"]
    assert "Remember: tabs, not spaces." in json.dumps(system)
    assert child_second["messages"][-1]["content"][0]["text"] == "also check the tests"
    events = [json.loads(line) for line in seen.read_text().splitlines()]
    names = [e["hook_event_name"] for e in events]
    assert names == ["SubagentStart", "SubagentStop", "SubagentStop"]
    assert events[0]["agent_type"] == "reviewer" and events[1]["last_assistant_message"] == "first report"
    [transcript] = child_transcripts(_home(project))
    assert events[1]["agent_transcript_path"] == str(transcript) and events[2]["stop_hook_active"] is True
    [result] = tool_results(server.cursor.requests[3]["body"])
    assert result_text(result).startswith("tests checked")


def test_plan_mode_agents_cannot_write(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    (project / ".claude" / "agents" / "planner.md").write_text(
        "---\nname: planner\ndescription: plans\npermissionMode: plan\n---\nPlan it.\n"
    )
    target = project / "out.txt"
    write = {"tool_calls": [{"id": "toolu_w", "name": "Write", "input": {"file_path": str(target), "content": "x"}}]}
    server = fake_llm([{"tool_calls": [_task("plan", "planner")]}, write, "planned", "ok"])
    run = keel("-p", "go", "--permission-mode", "bypassPermissions", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert not target.exists()
    [denied] = tool_results(server.cursor.requests[2]["body"])
    assert denied["is_error"] and "plan mode: read-only tools" in result_text(denied)


def test_results_are_size_limited(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    server = fake_llm([{"tool_calls": [_task("big")]}, "x" * 60_000, "ok"])
    assert keel("-p", "go", env=wire_env(server, "anthropic")).code == 0
    [result] = tool_results(server.cursor.requests[2]["body"])
    text = result_text(result)
    assert len(text) < 45_000 and "[result truncated: 20000 more characters in the agent's transcript]" in text


def test_unknown_agent_type_is_a_clear_tool_error(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    server = fake_llm([{"tool_calls": [_task("x", "nobody")]}, "ok"])
    assert keel("-p", "go", env=wire_env(server, "anthropic")).code == 0
    [result] = tool_results(server.cursor.requests[1]["body"])
    assert result["is_error"] and "Agent type 'nobody' not found. Available agents: general-purpose" in result_text(
        result
    )


def test_background_agents_and_the_agents_command(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    server = fake_llm(
        [
            {"tool_calls": [_task("long job", run_in_background=True)]},
            {"text": "background report", "delay_s": 0.5},  # the child and the parent race for these two:
            {"text": "background report", "delay_s": 0.5},  # either order fits
            "used the report",
        ]
    )
    env = wire_env(server, "anthropic")
    run = keel("-p", "go", env=env)
    assert run.code == 0, run.stderr
    parent_second = next(r["body"] for r in server.cursor.requests[1:] if len(r["body"]["messages"]) == 3)
    [first] = tool_results(parent_second)
    assert "started in the background" in result_text(first)
    [meta] = metas(_home(project))
    assert meta["status"] == "success" and meta["result"] == "background report"
    # the parent stopped with the agent still running: -p waited for it and went on with its result
    last = server.cursor.requests[-1]["body"]["messages"][-1]
    text = "".join(b.get("text", "") for b in last["content"])
    assert f'<background-agent id="{meta["agent_id"]}" type="general-purpose" status="success">' in text
    assert run.stdout.strip() == "used the report"
    listing = keel("agents", "list", env=env)
    assert listing.code == 0 and meta["agent_id"] in listing.stdout and "success" in listing.stdout
    logs = keel("agents", "logs", meta["agent_id"][:8], env=env)
    assert logs.code == 0 and "[assistant] background report" in logs.stdout and "[user] long job" in logs.stdout
    waited = keel("agents", "wait", meta["agent_id"], env=env)
    assert waited.code == 0 and waited.stdout.strip() == "background report"
    missing = keel("agents", "logs", "zzz", env=env)
    assert missing.code != 0 and "no subagent matching 'zzz'" in missing.stdout


def test_bad_definitions_are_warnings_naming_the_file(tmp_path: Path) -> None:
    project = tmp_path / "p"
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "broken.md").write_text("---\nname: [unclosed\n---\nbody\n")
    (agents / "odd.md").write_text(
        "---\nname: odd\ndescription: odd\npermissionMode: yolo\nmaxTurns: -1\ntools: Bash(git:*), Read\n---\nx\n"
    )
    catalog = load_agents(project, tmp_path / "home")
    assert any(str(agents / "broken.md") in w and "not valid" in w for w in catalog.warnings)
    assert any("permissionMode must be one of" in w for w in catalog.warnings)
    assert any("maxTurns must be a whole number" in w for w in catalog.warnings)
    odd = catalog.get("odd")
    assert odd is not None and odd.permission_mode is None and odd.tools == ("Bash(git:*)", "Read")
    assert catalog.get("explore") is catalog.get("Explore")


def test_plugin_problems_are_one_line_each(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    (bad / ".claude-plugin").mkdir(parents=True)
    (bad / ".claude-plugin" / "plugin.json").write_text("{not json")
    layer = SettingsLayer(tmp_path / "s.json", "user", {"enabledPlugins": {"x@nowhere": True, "off@nowhere": False}})
    plugins, warnings = find_plugins([tmp_path / "missing", bad], [layer])
    assert plugins == []
    assert len(warnings) == 3 and all("\n" not in w for w in warnings)
    assert "does not exist; check --plugin-dir" in warnings[0] and "not valid JSON" in warnings[1]
    assert "no marketplace 'nowhere'" in warnings[2]


def test_a_project_agent_cannot_grant_itself_bypass(project: Path, tmp_path: Path, fake_llm: Start, keel: Keel) -> None:
    """A cloned repository's .claude/agents may not widen permissions; the user's own definitions may."""
    claude_project(project)
    yolo = "---\nname: yolo\ndescription: does anything\npermissionMode: bypassPermissions\n---\nGo.\n"
    (project / ".claude" / "agents" / "yolo.md").write_text(yolo)
    user_agents = tmp_path / "userhome" / ".claude" / "agents"
    user_agents.mkdir(parents=True)
    (user_agents / "mine.md").write_text(yolo.replace("name: yolo", "name: mine"))
    first, second = project / "first.txt", project / "second.txt"

    def touch(path: Path) -> dict[str, Any]:
        return {"tool_calls": [{"name": "Bash", "input": {"command": f"touch {path}"}}]}

    server = fake_llm([{"tool_calls": [_task("go", "yolo")]}, touch(first), "tried", "ok"])
    assert keel("-p", "go", env=wire_env(server, "anthropic")).code == 0
    assert not first.exists()
    [denied] = tool_results(server.cursor.requests[2]["body"])
    assert denied["is_error"] and "without anyone to ask" in result_text(denied)

    server = fake_llm([{"tool_calls": [_task("go", "mine")]}, touch(second), "done", "ok"])
    assert keel("-p", "go", env=wire_env(server, "anthropic")).code == 0
    assert second.exists()


def test_a_definitions_model_is_used_or_reported(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    agents = project / ".claude" / "agents"
    (agents / "quick.md").write_text("---\nname: quick\ndescription: fast\nmodel: haiku\n---\nBe quick.\n")
    (agents / "odd.md").write_text("---\nname: odd\ndescription: odd\nmodel: no-such-model-xyz\n---\nOdd.\n")
    server = fake_llm(
        [{"tool_calls": [_task("q", "quick")]}, "quick done", {"tool_calls": [_task("o", "odd")]}, "odd done", "ok"]
    )
    assert keel("-p", "go", env=wire_env(server, "anthropic")).code == 0
    parent, quick, _, odd = (server.cursor.requests[i]["body"] for i in range(4))
    assert "haiku" in quick["model"] and quick["model"] != parent["model"]
    assert odd["model"] == parent["model"]
    [odd_log] = [p for p in child_transcripts(_home(project)) if "no-such-model-xyz" in p.read_text()]
    assert "is not usable" in odd_log.read_text()


def test_an_interrupt_does_not_wait_for_background_agents(project: Path, fake_llm: Start) -> None:
    import os
    import signal
    import subprocess
    import time

    from agentkeel.session.load import load_session
    from kit import KEEL, descendants, wait_until

    claude_project(project)
    sleep = {"tool_calls": [{"name": "Bash", "input": {"command": "sleep 120"}}]}
    # the parent's next request and the child's first one race: both get a long Bash call
    server = fake_llm([{"tool_calls": [_task("long", run_in_background=True)]}, sleep, sleep, "x", "x"])
    env = {**os.environ, **wire_env(server, "anthropic")}
    proc = subprocess.Popen(
        [KEEL, "-p", "go", "--permission-mode", "bypassPermissions"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    # the parent and the child are each in their `sleep 120`
    wait_until(lambda: [a for _, a in descendants(proc.pid)].count(["sleep", "120"]) == 2, what="both Bash calls")
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert time.monotonic() - sent < 60  # not KEEL_BACKGROUND_WAIT_S, not the 120 s sleep (loose: a loaded machine)
    [meta] = metas(_home(project))
    assert meta["status"] == "interrupted"
    for log in child_transcripts(_home(project)):
        loaded = load_session(log)
        uses = {b.id for m in loaded.messages for b in m.tool_uses()}
        answered = {b.tool_use_id for m in loaded.messages for b in m.content if type(b).__name__ == "ToolResultBlock"}
        assert loaded.report.clean and uses == answered


def test_agents_given_in_code(project: Path, tmp_path: Path, fake_llm: Start) -> None:
    """RuntimeOptions.agents: the SDK's ``agents`` option, in process against the fake model over HTTP."""
    import asyncio

    from agentkeel.app.runtime import Runtime, RuntimeOptions

    claude_project(project)
    server = fake_llm([{"tool_calls": [_task("check", "checker")]}, "checked", "ok"])
    env = {**wire_env(server, "anthropic"), "KEEL_HOME": str(tmp_path / "keelhome")}
    agents = {"checker": {"description": "checks things", "prompt": "You check things.", "tools": ["Grep"]}, "bad": 3}
    rt = Runtime.create(RuntimeOptions(cwd=project, env=env, home=tmp_path / "userhome", agents=agents))

    async def go() -> str:
        try:
            return (await rt.run("check")).result
        finally:
            await rt.aclose()

    assert asyncio.run(go()) == "ok"
    child = server.cursor.requests[1]["body"]
    assert system_text(child).startswith("You check things.") and tool_names(child) == ["Grep"]
    assert any("agents.bad: needs an object" in w for w in rt.settings.warnings)


def _guarded(project: Path, tmp_path: Path) -> Path:
    """A project agent with its own hooks: PreToolUse denies its Bash; its Stop (a SubagentStop) blocks once."""
    seen = tmp_path / "agent-hooks.jsonl"
    pre = tmp_path / "pre.py"
    pre.write_text(
        "import json, sys\n"
        "data = json.load(sys.stdin)\n"
        f"open({str(seen)!r}, 'a').write(json.dumps(data) + '\\n')\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse', 'permissionDecision': 'deny',"
        " 'permissionDecisionReason': 'no shell for the guarded agent'}}))\n"
    )
    stop = tmp_path / "stop.py"
    stop.write_text(
        "import json, sys\n"
        "data = json.load(sys.stdin)\n"
        f"open({str(seen)!r}, 'a').write(json.dumps(data) + '\\n')\n"
        "if not data.get('stop_hook_active'):\n"
        "    print(json.dumps({'decision': 'block', 'reason': 'check it once more'}))\n"
    )
    (project / ".claude" / "agents" / "guarded.md").write_text(
        "---\n"
        "name: guarded\n"
        "description: An agent with hooks of its own\n"
        "hooks:\n"
        "  PreToolUse:\n"
        "    - matcher: Bash\n"
        "      hooks:\n"
        f"        - {{type: command, command: '{sys.executable} {pre}'}}\n"
        "  Stop:\n"
        "    - hooks:\n"
        f"        - {{type: command, command: '{sys.executable} {stop}'}}\n"
        "---\n"
        "You are guarded.\n"
    )
    return seen


def _bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "Bash", "input": {"command": command}}]}


def test_an_agents_own_hooks_apply_while_it_runs(project: Path, tmp_path: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    seen = _guarded(project, tmp_path)
    (project / ".claude" / "settings.json").write_text("{}")
    assert keel("trust", str(project)).code == 0  # a project's definitions run commands only in a trusted folder
    script = [
        {"tool_calls": [_task("guard", "guarded")]},
        _bash("echo from-child"),
        "first report",
        "second report",
        _bash("echo from-parent"),
        "done",
    ]
    server = fake_llm(script)
    run = keel("-p", "go", "--allowedTools", "Bash", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    [denied] = tool_results(server.cursor.requests[2]["body"])
    assert denied["is_error"] and "no shell for the guarded agent" in result_text(denied)
    # the definition's Stop is a SubagentStop: it blocked once, and the child went on
    assert server.cursor.requests[3]["body"]["messages"][-1]["content"][0]["text"] == "check it once more"
    [child] = tool_results(server.cursor.requests[4]["body"])
    assert result_text(child).startswith("second report")
    # scoped to the agent's lifetime: the parent's own Bash afterwards runs, and no hook saw it
    [parent_bash] = tool_results(server.cursor.requests[5]["body"])[-1:]
    assert not parent_bash["is_error"] and "from-parent" in result_text(parent_bash)
    events = [json.loads(line) for line in seen.read_text().splitlines()]
    assert [e["hook_event_name"] for e in events] == ["PreToolUse", "SubagentStop", "SubagentStop"]
    assert events[0]["tool_input"]["command"] == "echo from-child"
    assert events[1]["agent_type"] == "guarded" and events[2]["stop_hook_active"] is True
    [transcript] = child_transcripts(_home(project))
    assert events[0]["transcript_path"] == str(transcript)  # bound to the child


def test_an_untrusted_projects_agent_hooks_stay_inert(
    project: Path, tmp_path: Path, fake_llm: Start, keel: Keel
) -> None:
    claude_project(project)
    seen = _guarded(project, tmp_path)
    server = fake_llm([{"tool_calls": [_task("guard", "guarded")]}, _bash("echo from-child"), "report", "done"])
    run = keel("-p", "go", "--allowedTools", "Bash", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    [ran] = tool_results(server.cursor.requests[2]["body"])
    assert not ran["is_error"] and "from-child" in result_text(ran)
    assert not seen.exists()
    assert "agent guarded: its hooks are inert in an untrusted folder" in run.stderr
