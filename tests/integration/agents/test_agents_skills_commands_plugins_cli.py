"""Subagents, skills, slash commands and plugins end to end: real `keel -p`, the fake model over HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.session.load import load_session
from agents_fixtures import (
    child_transcripts,
    claude_project,
    first_user_text,
    marketplace_settings,
    metas,
    plugin,
    result_text,
    sessions_dir,
    system_text,
    tool_names,
    tool_results,
)
from kit import KEEL, KeelRun, descendants, session_files, wait_until, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]


def test_task_and_skill_in_a_claude_code_project(project: Path, tmp_path: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    server = fake_llm(
        [
            {
                "tool_calls": [
                    {
                        "id": "toolu_rev",
                        "name": "Task",
                        "input": {"description": "review a.py", "prompt": "Review a.py", "subagent_type": "reviewer"},
                    }
                ]
            },
            "a.py:2 returns a constant",
            {"tool_calls": [{"id": "toolu_rel", "name": "Skill", "input": {"skill": "release", "args": "1.2.3"}}]},
            "released",
        ]
    )
    run = keel("-p", "review and release", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "released"
    parent1, child, parent2, parent3 = (r["body"] for r in server.cursor.requests)

    # the parent is offered Task (not its Agent alias) and Skill, with the agents and skills listed
    assert "Task" in tool_names(parent1) and "Skill" in tool_names(parent1) and "Agent" not in tool_names(parent1)
    task_tool = next(t for t in parent1["tools"] if t["name"] == "Task")
    assert "- reviewer: Reviews code for bugs" in task_tool["description"]
    assert set(task_tool["input_schema"]["required"]) == {"description", "prompt", "subagent_type"}
    skill_tool = next(t for t in parent1["tools"] if t["name"] == "Skill")
    assert "\n- release: Cut a release of the project\n" in skill_tool["description"]  # Claude Code's listing
    assert "Release version" not in json.dumps(parent1)  # progressive disclosure: no body before use

    # the child: its definition's prompt and tools, its own context (only its task)
    assert system_text(child).startswith("You are a strict code reviewer.")
    assert "You are keel" not in system_text(child)
    assert '<skill name="style">\nPrefer early returns.\n</skill>' in system_text(child)  # the preloaded skill
    assert tool_names(child) == ["Read", "Grep"]
    assert len(child["messages"]) == 1 and first_user_text(child) == "Review a.py"

    # the parent gets the child's report, size-limited, with its id
    [task_result] = [b for b in tool_results(parent2) if b["tool_use_id"] == "toolu_rev"]
    assert result_text(task_result).startswith("a.py:2 returns a constant\n\nagentId: a")

    # the skill's body is expanded: $ARGUMENTS and the output of !`git log -1`
    [skill_result] = [b for b in tool_results(parent3) if b["tool_use_id"] == "toolu_rel"]
    text = result_text(skill_result)
    assert "Release version 1.2.3 now." in text and "Last commit: add the first feature" in text
    assert "!`" not in text

    # the child's transcript exists, under the parent's session folder, linked both ways
    home = tmp_path / "keelhome"
    [parent_log] = session_files(home)
    [child_log] = child_transcripts(home)
    assert child_log.parent.parent.name == parent_log.stem
    [meta] = metas(home)
    assert meta["parent_session_id"] == parent_log.stem and meta["parent_tool_use_id"] == "toolu_rev"
    assert meta["agent_type"] == "reviewer" and meta["status"] == "success"
    assert meta["transcript"] == str(child_log)
    loaded = load_session(child_log)
    assert loaded.report.clean and [m.role for m in loaded.messages] == ["user", "assistant"]
    parent_entries = [json.loads(line) for line in parent_log.read_text().splitlines()]
    [finished] = [e for e in parent_entries if e["type"] == "tool_end" and e["name"] == "Task"]
    assert finished["metadata"]["agent_id"] == meta["agent_id"]


def test_custom_command_runs_under_print(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    server = fake_llm(["on it"])
    run = keel("-p", "/fix-issue 42", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    [request] = [r["body"] for r in server.cursor.requests]
    text = first_user_text(request)
    assert "<command-name>/fix-issue</command-name>" in text and "<command-args>42</command-args>" in text
    assert "Fix issue #42 following our coding standards" in text


def test_builtin_command_needs_no_model(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    server = fake_llm([])
    run = keel("-p", "/agents", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert "reviewer [project]" in run.stdout and "Explore [built-in]" in run.stdout
    assert server.cursor.requests == []
    run = keel("-p", "/skills", env=wire_env(server, "anthropic"))
    assert "/release" in run.stdout
    run = keel("-p", "/usr/bin is a folder", env=wire_env(server, "anthropic"))  # not a command: a message
    assert first_user_text(server.cursor.requests[-1]["body"]).startswith("/usr/bin is a folder")


def test_plugin_command_agent_and_skill(project: Path, tmp_path: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    root = plugin(tmp_path / "plugins" / "shipit")
    settings = marketplace_settings(tmp_path, root)
    server = fake_llm(
        [
            {
                "tool_calls": [
                    {"name": "Task", "input": {"description": "d", "prompt": "help", "subagent_type": "shipit:helper"}},
                ]
            },
            "helped",
            {"tool_calls": [{"id": "toolu_tips", "name": "Skill", "input": {"skill": "shipit:tips", "args": "today"}}]},
            "done",
        ]
    )
    env = wire_env(server, "anthropic")
    run = keel("-p", "/shipit:hello world", "--settings", str(settings), env=env)
    assert run.code == 0, run.stderr
    command_request = server.cursor.requests[0]["body"]
    assert f"Plugin hello to world (root {root.resolve()})." in first_user_text(command_request)
    child = server.cursor.requests[1]["body"]
    assert system_text(child).startswith("You are the shipit helper agent.") and tool_names(child) == ["LS"]
    tips = [b for b in tool_results(server.cursor.requests[3]["body"]) if b["tool_use_id"] == "toolu_tips"]
    assert "Tip: ship small changes (today)." in result_text(tips[0])

    listing = keel("plugins", "list", "--settings", str(settings), env=env)
    assert listing.code == 0, listing.stderr
    assert "shipit 1.0.0" in listing.stdout and "commands, agents, skills, hooks" in listing.stdout


def _start_times(entries: list[dict[str, Any]], name: str) -> list[tuple[float, float]]:
    spans = []
    for e in entries:
        if e["type"] == "tool_end" and e["name"] == name:
            end = datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()
            spans.append((end - e["duration_ms"] / 1000, end))
    return spans


def test_three_tasks_run_concurrently_each_with_its_own_context(
    project: Path, tmp_path: Path, fake_llm: Start, keel: Keel
) -> None:
    claude_project(project)
    tasks = [
        {"id": f"toolu_t{i}", "name": "Task", "input": {"description": f"job {i}", "prompt": f"job number {i}"}}
        for i in range(3)
    ]
    sleep = {"tool_calls": [{"name": "Bash", "input": {"command": "sleep 1.5", "description": "wait"}}]}
    done = ["child done"] * 3
    server = fake_llm([{"tool_calls": tasks}, sleep, sleep, sleep, *done, "all done"])
    run = keel("-p", "three jobs", "--permission-mode", "bypassPermissions", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "all done"
    children = [r["body"] for r in server.cursor.requests[1:4]]
    assert sorted(first_user_text(c) for c in children) == ["job number 0", "job number 1", "job number 2"]
    assert all(len(c["messages"]) == 1 for c in children)  # each child sees only its own task

    home = tmp_path / "keelhome"
    [parent_log] = session_files(home)
    entries = [json.loads(line) for line in parent_log.read_text().splitlines()]
    spans = _start_times(entries, "Task")
    assert len(spans) == 3
    wall = max(e for _, e in spans) - min(s for s, _ in spans)
    total = sum(e - s for s, e in spans)
    assert wall / total < 0.6, (wall, total)  # ~1/3 when concurrent, 1.0 one after another
    assert len(child_transcripts(home)) == 3 and all(m["status"] == "success" for m in metas(home))


def test_a_pretooluse_hook_denies_a_childs_bash_call(
    project: Path, tmp_path: Path, fake_llm: Start, keel: Keel
) -> None:
    claude_project(project)
    hook = tmp_path / "deny.py"
    hook.write_text("import sys\nsys.stderr.write('no shell for subagents')\nsys.exit(2)\n")
    settings = tmp_path / "hooks.json"
    settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [
                        {"matcher": "Bash", "hooks": [{"type": "command", "command": f"{sys.executable} {hook}"}]}
                    ]
                }
            }
        )
    )
    marker = project / "ran.txt"
    bash = {"tool_calls": [{"id": "toolu_sh", "name": "Bash", "input": {"command": f"touch {marker}"}}]}
    server = fake_llm(
        [
            {"tool_calls": [{"name": "Task", "input": {"description": "d", "prompt": "touch it"}}]},
            bash,
            "could not",
            "ok",
        ]
    )
    run = keel(
        "-p",
        "go",
        "--settings",
        str(settings),
        "--permission-mode",
        "bypassPermissions",
        env=wire_env(server, "anthropic"),
    )
    assert run.code == 0, run.stderr
    assert not marker.exists()
    child_second = server.cursor.requests[2]["body"]
    [denied] = [b for b in tool_results(child_second) if b["tool_use_id"] == "toolu_sh"]
    assert denied.get("is_error") and "no shell for subagents" in result_text(denied)


def test_interrupting_the_parent_leaves_every_transcript_valid(project: Path, tmp_path: Path, fake_llm: Start) -> None:
    claude_project(project)
    tasks = [
        {"id": f"toolu_t{i}", "name": "Task", "input": {"description": "d", "prompt": f"job {i}"}} for i in range(2)
    ]
    sleep = {"tool_calls": [{"name": "Bash", "input": {"command": "sleep 30"}}]}
    server = fake_llm([{"tool_calls": tasks}, sleep, sleep])
    env = dict(os.environ, **wire_env(server, "anthropic"))
    proc = subprocess.Popen(
        [KEEL, "-p", "go", "--permission-mode", "bypassPermissions"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    home = tmp_path / "keelhome"

    def running() -> bool:  # both children have logged their Bash call (and so are in it)
        logs = child_transcripts(home)
        return len(logs) == 2 and all("sleep 30" in log.read_text() for log in logs)

    wait_until(running, what="both children's transcripts")
    wait_until(lambda: [a for _, a in descendants(proc.pid)].count(["sleep", "30"]) == 2, what="both Bash calls")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    logs = [*session_files(home), *child_transcripts(home)]
    assert len(logs) == 3
    for log in logs:
        loaded = load_session(log)
        assert loaded.report.clean, loaded.report.summary()
        uses = {b.id for m in loaded.messages for b in m.tool_uses()}
        answered = {b.tool_use_id for m in loaded.messages for b in m.content if type(b).__name__ == "ToolResultBlock"}
        assert uses and uses == answered, log
    assert sorted(m["status"] for m in metas(home)) == ["interrupted", "interrupted"], err.decode()
    assert sessions_dir(home).is_dir()
