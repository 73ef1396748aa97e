"""The coordinator: a scripted plan of 5 tasks on two dependency levels runs in order, in parallel where allowed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.agents.coordinator import PlanError, parse_plan
from agentkeel.fakellm.server import FakeLLMServer
from agents_fixtures import claude_project, expect_carveout, metas
from conftest import KeelRun, session_files, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]

PLAN = {
    "tasks": [
        {"id": "a", "prompt": "task a", "depends_on": []},
        {"id": "b", "prompt": "task b", "depends_on": []},
        {"id": "c", "prompt": "task c", "depends_on": []},
        {"id": "d", "prompt": "task d", "depends_on": ["a", "b"]},
        {"id": "e", "prompt": "task e", "depends_on": ["c"]},
    ]
}


def test_a_five_task_graph_runs_in_order_with_parallelism(
    project: Path, tmp_path: Path, fake_llm: Start, keel: Keel
) -> None:
    claude_project(project)
    slow = {"text": "report", "delay_s": 0.6}
    server = fake_llm(["```json\n" + json.dumps(PLAN) + "\n```", slow, slow, slow, slow, slow])
    run = keel("-p", "/coordinate build the app", env=wire_env(server, "anthropic"), timeout=120)
    assert run.code == 0, run.stderr
    assert run.stdout.startswith("Coordinated 5 tasks:")
    home = tmp_path / "keelhome"
    spans = {m["description"]: (m["started"], m["finished"]) for m in metas(home) if m["description"] in "abcde"}
    assert sorted(spans) == ["a", "b", "c", "d", "e"]
    assert spans["d"][0] >= max(spans["a"][1], spans["b"][1])  # after both of its dependencies
    assert spans["e"][0] >= spans["c"][1]

    def overlap(x: str, y: str) -> bool:
        return spans[x][0] < spans[y][1] and spans[y][0] < spans[x][1]

    assert overlap("a", "b") and overlap("b", "c")  # the first level ran in parallel
    # each task's prompt carries the reports of what it builds on
    prompts = [r["body"]["messages"][0]["content"][0]["text"] for r in server.cursor.requests[1:]]
    [d_prompt] = [p for p in prompts if p.startswith("task d")]
    assert '<task id="a">' in d_prompt and '<task id="b">' in d_prompt and '<task id="c">' not in d_prompt
    # progress events on the bus, kept in the session's transcript
    [log] = session_files(home)
    progress = [json.loads(line) for line in log.read_text().splitlines() if '"coordinator"' in line]
    statuses = [p["status"] for p in progress]
    assert statuses[0] == "planned" and statuses[-1] == "done"
    assert statuses.count("started") == 5 and statuses.count("finished") == 5


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ({"tasks": [{"id": "a", "prompt": "x", "depends_on": ["zz"]}]}, "unknown task"),
        (
            {
                "tasks": [
                    {"id": "a", "prompt": "x", "depends_on": ["b"]},
                    {"id": "b", "prompt": "y", "depends_on": ["a"]},
                ]
            },
            "cycle",
        ),
        ({"tasks": []}, 'no "tasks"'),
        ({"tasks": [{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}]}, "share an id"),
    ],
)
def test_bad_plans_are_one_clear_error(plan: dict[str, Any], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        parse_plan(json.dumps(plan))


def test_a_bad_plan_is_reported_not_run(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    server = fake_llm(["no json here"])
    run = keel("-p", "/coordinate build", env=wire_env(server, "anthropic"))
    assert run.code != 0
    assert "/coordinate: the plan is not valid JSON" in run.stderr and "Traceback" not in run.stderr


def test_writing_tasks_run_in_worktrees_and_are_merged(
    project: Path, fake_llm: Start, keel: Keel, request: pytest.FixtureRequest
) -> None:
    expect_carveout(request)  # the writers' worktrees are under .keel/worktrees: the sandbox branch's carve-out
    from agents_fixtures import git

    claude_project(project)
    plan = {
        "tasks": [
            {"id": "w1", "prompt": "write one", "writes": True},
            {"id": "w2", "prompt": "write two", "writes": True},
            {"id": "check", "prompt": "check both", "depends_on": ["w1", "w2"]},
        ]
    }

    def write(name: str) -> dict[str, Any]:
        return {"tool_calls": [{"name": "Bash", "input": {"command": f"echo {name} > {name}.txt && sleep 1.5"}}]}

    server = fake_llm([json.dumps(plan), write("one"), write("two"), "wrote", "wrote", "checked"])
    run = keel(
        "-p", "/coordinate two files", "--permission-mode", "bypassPermissions", env=wire_env(server, "anthropic")
    )
    assert run.code == 0, run.stderr
    assert (project / "one.txt").read_text() == "one\n" and (project / "two.txt").read_text() == "two\n"
    assert git(project, "status", "--porcelain").strip() == ""
    assert not [b for b in git(project, "branch").split() if b.startswith("keel/")]
    assert "Merged branch keel/agent-" in run.stdout
