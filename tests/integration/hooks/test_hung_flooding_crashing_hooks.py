"""Hooks that hang, flood, crash or cannot run: each is one clear line, the session finishes,
and no process of theirs is left behind (SPEC 4: never wedge the loop)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from agentkeel.hooks import HookConfig, HookContext, HookDispatcher, parse_hooks
from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wait_until, wire_env

MARK = "4242.25"  # a sleep length no other process on the machine uses


def _leftovers() -> list[str]:
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if any(MARK in part for part in cmd):
            out.append(" ".join(cmd))
    return out


def test_hanging_flooding_and_broken_hooks_never_stop_the_session(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    not_exec = tmp_path / "not-executable.sh"
    not_exec.write_text("#!/bin/sh\necho hi\n")
    not_exec.chmod(0o644)
    flood = f"{sys.executable} -c \"import sys; sys.stdout.write('x' * 50_000_000)\""
    hooks = {
        # never reads its stdin (the prompt is far bigger than a pipe buffer) and never ends
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": f"sleep {MARK}", "timeout": 1}]}],
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [
                    # a child that keeps stdout open after its parent is gone
                    {"type": "command", "command": f"(sleep {MARK} &) ; sleep {MARK}", "timeout": 1},
                    {"type": "command", "command": flood, "timeout": 30},
                    {"type": "command", "command": str(not_exec)},
                    {"type": "command", "command": "echo '{not json'"},
                    {"type": "command", "command": "echo crashed >&2; exit 3"},
                ],
            }
        ],
        "Stop": [{"hooks": [{"type": "command", "command": ["/no/such/hook-binary", "arg"]}]}],
    }
    (project / ".keel").mkdir()
    (project / ".keel" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    assert keel("trust", str(project)).code == 0
    server = fake_llm({"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": "echo still-ran"}}]}, "done"]})
    prompt = "go " + "y" * 300_000
    started = time.monotonic()
    run = keel("-p", "--output-format", "json", env=wire_env(server, "anthropic"), stdin=prompt, timeout=120)
    elapsed = time.monotonic() - started
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "done"
    # the non-blocking failures did not block the call (it is allowed: echo needs no approval)
    results = server.cursor.requests[1]["body"]["messages"][-1]["content"]
    assert "still-ran" in json.dumps(results)
    lines = run.stderr.splitlines()

    def line(*words: str) -> str:
        found = [x for x in lines if all(w in x for w in words)]
        assert len(found) == 1, (words, run.stderr)
        return found[0]

    line("UserPromptSubmit hook", "timed out after 1s")
    line("PreToolUse hook", f"sleep {MARK}", "timed out after 1s")
    line("PreToolUse hook", "printed more than 1024 KiB")
    line("PreToolUse hook", "not-executable.sh", "exit 126", "Permission denied")
    line("PreToolUse hook", "not valid JSON")
    line("PreToolUse hook", "exit 3", "crashed")
    line("Stop hook", "/no/such/hook-binary", "cannot run")
    assert "Traceback" not in run.stderr
    assert elapsed < 60  # not the 4242 s the hooks wanted; the bench measures the real cost
    assert _leftovers() == []


async def test_a_hook_that_sleeps_past_its_timeout_costs_about_its_timeout(tmp_path: Path) -> None:
    """The timeout is hard and the whole process group goes (children included)."""
    config = HookConfig(
        parse_hooks(
            {"Stop": [{"hooks": [{"command": f"sleep {MARK} & sleep {MARK}; wait", "timeout": 0.5}]}]}, "test", "sdk"
        ).hooks
    )
    notices: list[Any] = []
    dispatcher = HookDispatcher(
        config, HookContext("s1", tmp_path / "s1.jsonl", tmp_path, notices.append, env=dict(os.environ))
    )
    started = time.monotonic()
    result = await dispatcher.fire("Stop", {"stop_hook_active": False})
    elapsed = time.monotonic() - started
    assert result.outcomes[0].error.endswith("timed out after 0.5s; stopped")
    assert elapsed < 20  # loose: a loaded machine; bench/hooks_bench.py measures it
    # the group was sent SIGKILL; on a loaded machine its members may take a moment to be gone
    wait_until(lambda: _leftovers() == [], 10, "the hook's process group to be gone")
