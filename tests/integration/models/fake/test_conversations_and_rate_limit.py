"""The scripted server's stateless conversations mode and its rate limit, through real keel runs."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.conversations import RateLimit, first_user_texts
from agentkeel.models.fake.script import EXHAUSTED, Script, ScriptError
from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, KeelRun, wire_env


def _bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "Bash", "input": {"command": command}}]}


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
def test_concurrent_sessions_each_follow_their_own_conversation(
    wire: str, project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    convs = [
        {
            "match": f"TASK-{i}",
            "steps": [_bash(f"echo out-{i}-a"), _bash(f"echo out-{i}-b"), f"done {i}"],
        }
        for i in range(4)
    ]
    server = fake_llm({"conversations": convs})
    env = {**os.environ, **wire_env(server, wire), "KEEL_MODEL": f"{wire}:fake-model"}
    procs = [
        subprocess.Popen(
            [KEEL, "-p", f"please do TASK-{i}", "--allowedTools", "Bash", "--output-format", "json"],
            cwd=project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        for i in range(4)
    ]
    for i, p in enumerate(procs):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert json.loads(out)["result"] == f"done {i}"
    assert len(server.cursor.requests) == 12
    for i in range(4):  # each session's last request carries its own two tool results, and no other's
        mine = [
            r["body"]
            for r in server.cursor.requests
            if first_user_texts(r["body"])[0].startswith(f"please do TASK-{i}")
        ]
        msgs = mine[-1]["messages"]
        first = next(k for k, m in enumerate(msgs) if m["role"] == "user")
        last = json.dumps(msgs[first + 1 :])  # what came after the first user message: its own turns
        assert f"out-{i}-a" in last and f"out-{i}-b" in last
        assert not any(f"out-{j}-" in last for j in range(4) if j != i)


def test_an_unmatched_conversation_is_exhausted(keel: Callable[..., KeelRun], fake_llm: Any) -> None:
    server = fake_llm({"conversations": [{"match": "ONLY-THIS", "steps": ["hi"]}]})
    run = keel("-p", "something else", env={**wire_env(server, "anthropic"), "KEEL_MODEL": "anthropic:fake-model"})
    assert run.code == 0 and EXHAUSTED in run.stdout


def test_rate_limit_answers_429_with_retry_after_and_keel_waits_it_out(
    keel: Callable[..., KeelRun], fake_llm: Any
) -> None:
    server = fake_llm({"conversations": [{"match": "", "steps": [_bash("true"), _bash("true"), "ok"]}],
                       "rate_limit": {"per_minute": 2, "retry_after": 0.2}})  # fmt: skip
    limit = server.cursor.script.rate_limit
    assert limit is not None
    # the window is a minute: pretend the first two requests were long ago once keel hits the limit
    run = keel(
        "-p",
        "go",
        "--allowedTools",
        "Bash",
        env={**wire_env(server, "anthropic"), "KEEL_MODEL": "anthropic:fake-model"},
    )
    assert limit.rejected >= 1
    statuses = ["429" if r.get("rate_limited") else "ok" for r in server.cursor.requests]
    assert statuses[:2] == ["ok", "ok"] and "429" in statuses
    assert run.code != 0 or "ok" in run.stdout  # either retried into success or reported in one line
    assert "Traceback" not in run.stderr


def test_rate_limit_window_slides() -> None:
    limit = RateLimit(2, 1.0)
    assert limit.admit(0.0) and limit.admit(1.0) and not limit.admit(2.0)
    assert limit.admit(60.5) and not limit.admit(60.9)
    assert limit.rejected == 2


@pytest.mark.parametrize(
    "bad",
    [{"conversations": {}}, {"conversations": [{"match": "x"}]}, {"steps": [], "rate_limit": {"per_minute": 0}}],
)
def test_bad_scripts_are_one_clear_error(bad: Any) -> None:
    with pytest.raises(ScriptError):
        Script.from_data(bad)
