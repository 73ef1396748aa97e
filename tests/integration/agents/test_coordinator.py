"""The coordinator: a scripted plan of 5 tasks on two dependency levels runs in order, in parallel where allowed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.agents.coordinator import PlanError, parse_plan
from agentkeel.models.fake.server import FakeLLMServer
from agents_fixtures import claude_project, metas
from kit import KeelRun, session_files, wire_env

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
    slow = {"text": "report", "delay_s": 2}  # long enough for a level's tasks all to start on a loaded machine
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


def test_writing_tasks_run_in_worktrees_and_are_merged(project: Path, fake_llm: Start, keel: Keel) -> None:
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


def _peak(lines: list[dict[str, Any]]) -> int:
    running = peak = 0
    for line in lines:
        running += {"started": 1, "finished": -1, "failed": -1}.get(line["status"], 0)
        peak = max(peak, running)
    return peak


def test_headless_coordinate_runs_a_five_task_graph_with_stream_json(
    project: Path, tmp_path: Path, fake_llm: Start, keel: Keel
) -> None:
    """`keel -p --coordinate GOAL`: the planner and the five children share one server (conversations
    mode: each request is answered by the script its first user message matches, whatever the order)."""
    claude_project(project)
    plan = {
        "tasks": [
            {"id": "a", "prompt": "TASK-A build the api", "depends_on": []},
            {"id": "b", "prompt": "TASK-B build the ui", "depends_on": []},
            {"id": "c", "prompt": "TASK-C write the docs", "depends_on": []},
            {"id": "d", "prompt": "TASK-D wire api and ui", "depends_on": ["a", "b"]},
            {"id": "e", "prompt": "TASK-E publish the docs", "depends_on": ["c"]},
        ]
    }
    conversations = [{"match": "Break the following goal", "steps": ["```json\n" + json.dumps(plan) + "\n```"]}]
    for n in "ABCDE":
        conversations.append({"match": f"TASK-{n}", "steps": [{"text": f"report {n.lower()}", "delay_s": 2}]})
    server = fake_llm({"conversations": conversations})
    run = keel(
        "-p",
        "--coordinate",
        "ship the app",
        "--output-format",
        "stream-json",
        "--verbose",
        env=wire_env(server, "anthropic"),
        timeout=120,
    )
    assert run.code == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert lines[0]["type"] == "system" and lines[0]["subtype"] == "init"
    result = lines[-1]
    assert result["type"] == "result" and result["subtype"] == "success" and not result["is_error"]
    assert result["result"].startswith("Coordinated 5 tasks:") and "report e" in result["result"]
    progress = [line for line in lines if line.get("subtype") == "coordinator"]
    assert progress[0]["status"] == "planned" and progress[-1]["status"] == "done"
    assert all(p["session_id"] == lines[0]["session_id"] for p in progress)
    order = [(p["task_id"], p["status"]) for p in progress if p["status"] in ("started", "finished")]
    at = {event: i for i, event in enumerate(order)}
    assert at[("d", "started")] > max(at[("a", "finished")], at[("b", "finished")])  # after both dependencies
    assert at[("e", "started")] > at[("c", "finished")]
    assert max(at[(t, "started")] for t in "abc") < min(at[(t, "finished")] for t in "abc")  # level one at once
    assert _peak(progress) >= 2
    # the children's own records agree: the first level's spans overlap
    spans = {m["description"]: (m["started"], m["finished"]) for m in metas(tmp_path / "keelhome")}
    assert max(spans[t][0] for t in "abc") < min(spans[t][1] for t in "abc")
    assert spans["d"][0] >= max(spans["a"][1], spans["b"][1]) and spans["e"][0] >= spans["c"][1]
    # d's prompt carries the reports of a and b only
    [d_body] = [r["body"] for r in server.cursor.requests if "TASK-D" in json.dumps(r["body"]["messages"][0])]
    d_prompt = json.dumps(d_body["messages"][0])
    assert "report a" in d_prompt and "report b" in d_prompt and "report c" not in d_prompt


def test_headless_coordinate_text_output_and_usage_errors(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    plan = {"tasks": [{"id": "only", "prompt": "TASK-ONLY do it"}]}
    server = fake_llm(
        {
            "conversations": [
                {"match": "Break the following goal", "steps": [json.dumps(plan)]},
                {"match": "TASK-ONLY", "steps": ["did it"]},
            ]
        }
    )
    run = keel("-p", "--coordinate", "do it", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert run.stdout.startswith("Coordinated 1 tasks:") and "did it" in run.stdout
    assert "keel: coordinator: plan planned: 1 tasks" in run.stderr and "keel: coordinator: only finished" in run.stderr
    for argv, message in [
        (("-p", "--coordinate", ""), "--coordinate needs a goal"),
        (("-p", "--coordinate", "x", "extra prompt"), "--coordinate takes the goal itself"),
    ]:
        bad = keel(*argv, env=wire_env(server, "anthropic"))
        assert bad.code == 2 and message in bad.stderr and "Traceback" not in bad.stderr


def test_headless_coordinate_reports_a_bad_plan_and_failed_tasks(project: Path, fake_llm: Start, keel: Keel) -> None:
    claude_project(project)
    server = fake_llm({"conversations": [{"match": "Break the following goal", "steps": ["no plan, sorry"]}]})
    run = keel("-p", "--coordinate", "do it", env=wire_env(server, "anthropic"))
    assert run.code == 1
    assert run.stderr.strip().endswith("--coordinate: the plan is not valid JSON") and not run.stdout.strip()
    plan = {"tasks": [{"id": "x", "prompt": "TASK-X fail"}, {"id": "y", "prompt": "TASK-Y next", "depends_on": ["x"]}]}
    failing = {"error": {"status": 400, "message": "bad request for x"}}
    server = fake_llm(
        {
            "conversations": [
                {"match": "Break the following goal", "steps": [json.dumps(plan)]},
                {"match": "TASK-X", "steps": [failing]},
            ]
        }
    )
    run = keel("-p", "--coordinate", "do it", "--output-format", "json", env=wire_env(server, "anthropic"))
    assert run.code == 1
    result = json.loads(run.stdout)
    assert result["is_error"] and "## y (skipped)" in result["result"]
