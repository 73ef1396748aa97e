"""Context end to end: a long session against the scripted server with a small window compacts
again and again, never sends a request over the window, keeps what matters, and resumes with -c."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from integration.context.compacting import COMPACT
from kit import KeelRun, session_files, wire_env

FACTS = {
    "agents": "FACT-AGENTS-zebra-make",
    "import": "FACT-IMPORT-blue-heron",
    "rule": "FACT-RULE-tabs-not-spaces",
    "todo": "FACT-TODO-ship-the-kiwi",
    "decision": "FACT-DECISION-sqlite-over-postgres",
}
CARRY = "<keel-context-carryover"


def plant(project: Path) -> None:
    (project / ".git").mkdir()
    (project / "AGENTS.md").write_text(f"# Project\n\nThe build tool: {FACTS['agents']}.\nSee @docs/extra.md\n")
    (project / "docs").mkdir()
    (project / "docs" / "extra.md").write_text(f"Imported: {FACTS['import']}\n")
    rules = project / ".claude" / "rules"
    rules.mkdir(parents=True)
    (rules / "python.md").write_text(f'---\npaths:\n  - "src/**/*.py"\n---\nPython rule: {FACTS["rule"]}\n')
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("x = 1\n")
    data = project / "data"
    data.mkdir()
    for i in range(40):
        (data / f"f{i:02d}.txt").write_text("\n".join(f"row {i}-{n} " + "lorem ipsum " * 8 for n in range(60)))


def long_script(project: Path, reads: int) -> dict[str, Any]:
    todos = [{"content": FACTS["todo"], "status": "pending", "activeForm": "shipping"}]
    steps: list[Any] = [
        {"text": "Planning.", "tool_calls": [{"name": "TodoWrite", "input": {"todos": todos}}]},
        {
            "text": f"Decision: {FACTS['decision']} because it needs no server.\nEditing.",
            "tool_calls": [
                {"name": "Read", "input": {"file_path": str(project / "src" / "app.py")}},
            ],
        },
        {
            "text": "Edit.",
            "tool_calls": [
                {
                    "name": "Edit",
                    "input": {
                        "file_path": str(project / "src" / "app.py"),
                        "old_string": "x = 1",
                        "new_string": "x = 2",
                    },
                }
            ],
        },
    ]
    for i in range(reads):
        steps.append(
            {
                "text": f"Reading {i}.",
                "tool_calls": [{"name": "Read", "input": {"file_path": str(project / "data" / f"f{i % 40:02d}.txt")}}],
            }
        )
    steps.append("All done.")
    return {
        "steps": steps,
        "context_window": 40_000,
        "match": [{"contains": COMPACT, "steps": ["Summary: the user asked for a long reading job; files were read."]}],
    }


def settings(tmp_path: Path, **context: Any) -> None:
    home = tmp_path / "keelhome"
    home.mkdir(exist_ok=True)
    # the scenario leaves todos open on purpose (they must survive compaction): no continuation turn
    data = {
        "maxTokens": 2000,
        "context": {"window": 40_000, **context},
        "disabled_hooks": ["todo-continuation-enforcer"],
    }
    (home / "settings.json").write_text(json.dumps(data))


def main_requests(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r for r in server.cursor.requests if "matched" not in r]


def compactions(tmp_path: Path) -> list[dict[str, Any]]:
    [log] = session_files(tmp_path / "keelhome")
    return [e for line in log.read_text().splitlines() if (e := json.loads(line))["type"] == "compaction"]


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
def test_long_session_compacts_never_overflows_retains_and_resumes(
    wire: str, project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    plant(project)
    settings(tmp_path)
    server = fake_llm(long_script(project, 200))
    run = keel(
        "-p",
        "read every data file",
        "--output-format",
        "json",
        "--permission-mode",
        "bypassPermissions",
        "--max-turns",  # 204 turns: past -p's default bound of 200
        "300",
        env=wire_env(server, wire),
        timeout=600,
    )
    assert run.code == 0, run.stderr
    assert run.json()["subtype"] == "success" and run.json()["num_turns"] == 204
    ctx = run.json()["context"]  # --output-format json carries the context accounting
    assert ctx["window"] == 40_000 and ctx["compactions"] >= 4 and ctx["state"] in ("safe", "warning")
    assert ctx["breakdown"]["tools"] > 0 and ctx["tokens"] < ctx["usable"]

    requests = server.cursor.requests
    assert all(not r["over_window"] for r in requests), [r["input_tokens"] for r in requests if r["over_window"]]
    assert max(r["input_tokens"] for r in requests) <= 40_000
    events = compactions(tmp_path)
    assert len(events) >= 4, len(events)
    stages = [e["stage"] for e in events]
    print(
        f"{wire}: {len(requests)} requests, {len(events)} compactions {stages}, "
        f"largest request {max(r['input_tokens'] for r in requests)} tokens"
    )
    summaries = [r for r in requests if "matched" in r]
    assert summaries, "the summariser was never asked"

    # retention: every request that carries a compaction's carry-over holds all five facts
    carried = [r for r in main_requests(server) if CARRY in json.dumps(r["body"]["messages"][:2])]
    assert len(carried) >= 20
    for r in carried:
        text = json.dumps(r["body"])
        missing = [k for k, fact in FACTS.items() if fact not in text]
        assert not missing, (missing, requests.index(r))

    # -c resumes from the last compaction, not from the start of the log
    resume = fake_llm({"steps": ["resumed fine"], "context_window": 40_000})
    again = keel("-c", "-p", "go on", "--output-format", "json", env=wire_env(resume, wire), timeout=120)
    assert again.code == 0, again.stderr
    # the resumed context may sit near the threshold before the estimator is calibrated: a summary
    # request may come first
    [first] = [r for r in resume.cursor.requests if "matched" not in r]
    body = json.dumps(first["body"])
    messages = [m for m in first["body"]["messages"] if m["role"] != "system"]
    assert compactions(tmp_path)  # -c appended nothing wrong to the log
    assert CARRY in json.dumps(messages[0]) and len(messages) < 300  # the whole log holds over 400 messages
    assert all(b.get("text") != "read every data file" for m in messages for b in m["content"] if isinstance(b, dict))
    assert all(m.get("content") != "read every data file" for m in messages)
    assert first["input_tokens"] < 40_000 and all(f in body for f in FACTS.values())
