"""Hooks and plugins that misbehave cost the session nothing (#31 items 7 and 8): a hook whose child
keeps its stdout does not hold keel until the hook's timeout; SessionStart hooks run under their own
timeouts; a kill -9 of keel ends the hooks it was running; a hook's megabyte of output is not a
megabyte of prompt; a plugin whose files are not UTF-8, nested too deep or invalid is one warning,
and a plugin's MCP servers start (or say why not)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, KeelRun, wait_until, wire_env

TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")


def _settings(project: Path, hooks: dict[str, Any]) -> None:
    (project / ".keel").mkdir(exist_ok=True)
    (project / ".keel" / "settings.json").write_text(json.dumps({"hooks": hooks}))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_session_start_hook_whose_child_keeps_stdout_does_not_hold_keel(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    pidfile = tmp_path / "holder.pid"
    # the hook's subshell leaves a sleep behind with the hook's stdout; the hook itself is done at once
    hook = f"(sleep 300 & echo $! > {pidfile}) ; echo 'context from the hook'"
    _settings(project, {"SessionStart": [{"hooks": [{"type": "command", "command": hook}]}]})
    assert keel("trust", str(project)).code == 0
    server = fake_llm({"steps": ["done"]})
    try:
        run = keel("-p", "hi", env=wire_env(server, "anthropic"), timeout=90)  # the hook's timeout is 600 s
        assert run.code == 0, run.stderr
        assert run.stdout.strip() == "done"
        assert "context from the hook" in json.dumps(server.cursor.requests[0]["body"]["messages"])
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_session_start_hooks_run_under_their_own_timeout_and_a_timeout_names_the_hook(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    slow_ok = "sleep 32; echo 'slow but within its timeout'"
    too_slow = "sleep 30 # the-too-slow-hook"
    _settings(
        project,
        {
            "SessionStart": [
                {"hooks": [{"type": "command", "command": slow_ok, "timeout": 60}]},
                {"hooks": [{"type": "command", "command": too_slow, "timeout": 2}]},
            ]
        },
    )
    assert keel("trust", str(project)).code == 0
    server = fake_llm({"steps": ["done"]})
    run = keel("-p", "hi", env=wire_env(server, "anthropic"), timeout=120)
    assert run.code == 0, run.stderr
    assert "slow but within its timeout" in json.dumps(server.cursor.requests[0]["body"]["messages"])
    assert "did not start within" not in run.stderr
    [line] = [x for x in run.stderr.splitlines() if "timed out" in x]
    assert "SessionStart hook" in line and "the-too-slow-hook" in line and "after 2s" in line


def test_kill_9_of_keel_ends_the_hook_it_was_running(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    pidfile = tmp_path / "hook.pid"
    hook = f"sleep 300 & echo $! > {pidfile}; wait"
    _settings(project, {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": hook}]}]})
    env = {
        **os.environ,
        **wire_env(
            fake_llm({"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": "true"}}]}]}), "anthropic"
        ),
    }
    subprocess.run([KEEL, "trust", str(project)], env=env, check=True, capture_output=True)
    proc = subprocess.Popen(
        [KEEL, "-p", "go"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), 60, "the hook to start")
        hook_child = int(pidfile.read_text())
        assert _alive(hook_child)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        wait_until(lambda: not _alive(hook_child), 30, "the watchdog to end the hook's child")
    finally:
        if proc.poll() is None:
            proc.kill()
        if pidfile.exists() and _alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_a_hooks_megabyte_of_context_reaches_the_model_as_a_preview_and_a_file(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    big = f"{sys.executable} -c \"import sys; sys.stdout.write('START ' + 'z' * 1_000_000 + ' END')\""
    _settings(project, {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": big}]}]})
    assert keel("trust", str(project)).code == 0
    server = fake_llm({"steps": ["done"]})
    run = keel("-p", "hi", env=wire_env(server, "anthropic"), timeout=90)
    assert run.code == 0, run.stderr
    sent = json.dumps(server.cursor.requests[0]["body"]["messages"])
    assert "START zzz" in sent and " END" not in sent
    assert len(sent) < 20_000
    [spill] = list((tmp_path / "keelhome").rglob("hook-output/UserPromptSubmit-*.txt"))
    assert spill.read_text().endswith(" END") and str(spill) in sent


def _plugin(root: Path, manifest: bytes | None = None, mcp: str | None = None) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_bytes(manifest or json.dumps({"name": root.name}).encode())
    if mcp is not None:
        (root / ".mcp.json").write_text(mcp)
    return root


def test_broken_plugin_files_are_one_warning_each_and_the_session_runs(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    latin = _plugin(tmp_path / "latin", '{"name": "latin", "description": "caf\xe9"}'.encode("latin-1"))
    deep = _plugin(tmp_path / "deep", b"[" * 200_000 + b"]" * 200_000)
    bad_mcp = _plugin(tmp_path / "badmcp", mcp='{"mcpServers": {"x": {"command": "true"}}')
    server = fake_llm({"steps": ["done"]})
    args = ["-p", "hi", "--plugin-dir", str(latin), "--plugin-dir", str(deep), "--plugin-dir", str(bad_mcp)]
    run = keel(*args, env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "done"
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr
    lines = run.stderr.splitlines()
    assert any("latin/.claude-plugin/plugin.json" in x and "not UTF-8" in x for x in lines), run.stderr
    assert any("deep/.claude-plugin/plugin.json" in x and "nested too deeply" in x for x in lines), run.stderr
    assert any("badmcp/.mcp.json" in x and "not valid JSON" in x for x in lines), run.stderr


def test_a_plugins_mcp_server_starts_with_its_root_expanded(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    plugin = _plugin(tmp_path / "clock", mcp=json.dumps({"time": {"command": "${CLAUDE_PLUGIN_ROOT}/run.sh"}}))
    (plugin / "run.sh").write_text(f"#!/bin/sh\nexec {TIME_SERVER} --local-timezone UTC\n")
    (plugin / "run.sh").chmod(0o755)
    server = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "mcp__plugin_clock_time__get_current_time", "input": {"timezone": "UTC"}}]},
                "done",
            ]
        }
    )
    run = keel(
        "-p",
        "what time is it",
        "--plugin-dir",
        str(plugin),
        "--allowedTools",
        "mcp__plugin_clock_time",
        env={**wire_env(server, "anthropic"), "MCP_TIMEOUT": "120000"},
        timeout=180,
    )
    assert run.code == 0, run.stderr
    names = {t["name"] for t in server.cursor.requests[0]["body"]["tools"]}
    assert "mcp__plugin_clock_time__get_current_time" in names
    assert '"timezone": "UTC"' in json.dumps(server.cursor.requests[1]["body"]["messages"][-1]).replace('\\"', '"')
