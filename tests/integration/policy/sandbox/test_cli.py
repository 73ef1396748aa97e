"""The sandbox through the real ``keel`` binary: settings turn it on, the model's Bash calls run in
it (asks become sandboxed runs, deny rules still deny), its denials reach the model, and
``keel sandbox status`` reports it; without bubblewrap keel warns once or refuses to start."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env
from sandbox_harness import bwrap_works

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")


def _results(server: FakeLLMServer) -> list[str]:
    out: list[str] = []
    for m in server.cursor.requests[-1]["body"]["messages"]:
        if m["role"] == "user" and isinstance(m["content"], list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    c = b["content"]
                    out.append(c if isinstance(c, str) else " ".join(x.get("text", "") for x in c))
    return out


def _settings(tmp_path: Path, sandbox: dict[str, Any], **extra: Any) -> Path:
    f = tmp_path / "sandbox-settings.json"
    f.write_text(json.dumps({"sandbox": sandbox, **extra}))
    return f


def _bash_calls(*commands: str) -> dict[str, Any]:
    return {"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": c}}]} for c in commands] + ["Done."]}


@needs_bwrap
def test_a_call_that_would_ask_runs_sandboxed_and_its_denial_reaches_the_model(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    home = Path(os.environ["HOME"])
    (home / ".bashrc").write_text("# rc\n")
    # the engine cannot see the second call's target (a protected path written by python, not a
    # redirect): it would only ask, so it runs sandboxed, and the sandbox stops it
    escape = f"{sys.executable} -c \"import os; open(os.path.expanduser('~/.bashrc'), 'a').write('pwned')\""
    server = fake_llm(_bash_calls("touch made-in-sandbox", escape))
    settings = _settings(tmp_path, {"enabled": True})
    run = keel("-p", "go", "--settings", str(settings), env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert (project / "made-in-sandbox").exists()  # headless default mode would have denied it unsandboxed
    assert (home / ".bashrc").read_text() == "# rc\n"
    first, second = _results(server)
    assert "[Sandbox denial:" not in first
    assert "Read-only file system" in second
    assert "[Sandbox denial:" in second
    assert "dangerouslyDisableSandbox" in second


@needs_bwrap
def test_deny_and_ask_rules_still_hold_when_sandboxed(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / "keep").mkdir()
    server = fake_llm(_bash_calls("rm -rf keep", "git push --force", "touch .keel-marker"))
    settings = _settings(tmp_path, {"enabled": True}, permissions={"deny": ["Bash(rm *)"], "ask": ["Bash(git push *)"]})
    run = keel("-p", "go", "--settings", str(settings), env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert (project / "keep").is_dir()
    denied, asked, ran = _results(server)
    assert "denied by rule Bash(rm *)" in denied
    assert "not granted" in asked  # an ask rule still asks; headless, nobody answers
    assert (project / ".keel-marker").exists()
    assert "Sandbox denial" not in ran


@needs_bwrap
def test_without_auto_allow_the_normal_flow_asks(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    server = fake_llm(_bash_calls("touch made"))
    settings = _settings(tmp_path, {"enabled": True, "autoAllowBashIfSandboxed": False})
    assert keel("-p", "go", "--settings", str(settings), env=wire_env(server, "anthropic")).code == 0
    assert not (project / "made").exists()
    assert "not granted" in _results(server)[0]


def test_fail_if_unavailable_refuses_to_start_without_bubblewrap(
    tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    server = fake_llm(_bash_calls("true"))
    settings = _settings(tmp_path, {"enabled": True, "failIfUnavailable": True})
    env = {**wire_env(server, "anthropic"), "KEEL_BWRAP": str(tmp_path / "no-bwrap")}
    run = keel("-p", "go", "--settings", str(settings), env=env)
    assert run.code == 2
    assert "failIfUnavailable" in run.stderr
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert not server.cursor.requests  # nothing ran


def test_without_bubblewrap_keel_warns_once_and_uses_the_normal_flow(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    server = fake_llm(_bash_calls("touch a", "touch b"))
    settings = _settings(tmp_path, {"enabled": True})
    env = {**wire_env(server, "anthropic"), "KEEL_BWRAP": str(tmp_path / "no-bwrap")}
    run = keel("-p", "go", "--settings", str(settings), "--allowedTools", "Bash(touch a)", env=env)
    assert run.code == 0, run.stderr
    assert run.stderr.count("the sandbox cannot run") == 1
    assert (project / "a").exists()  # allowed by its rule, unsandboxed
    assert not (project / "b").exists()  # would ask: headless, denied
    assert "Sandbox denial" not in " ".join(_results(server))


def test_sandbox_status_reports_tools_enforcement_and_unknown_keys(
    project: Path, tmp_path: Path, keel: Callable[..., KeelRun]
) -> None:
    settings = _settings(tmp_path, {"enabled": True, "bogus": 1, "network": {"allowedDomains": ["pypi.org"]}})
    report = json.loads(keel("sandbox", "status", "--json", "--settings", str(settings)).stdout)
    assert report["enabled"] is True
    assert report["active"] is bwrap_works()
    assert report["warnings"] == ["settings: unknown key 'sandbox.bogus' ignored"]
    if report["active"]:
        assert str(project) in report["enforced"]["writable"][0]
    missing = keel("sandbox", "status", "--settings", str(settings), env={"KEEL_BWRAP": str(tmp_path / "x")})
    assert missing.code == 0
    assert "sandbox: off - bubblewrap (bwrap) is not installed" in missing.stdout


@needs_bwrap
def test_a_subagents_bash_runs_in_the_sessions_sandbox(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """The gate a subagent's calls go through lets an ask-level command run because it is sandboxed
    (autoAllowBashIfSandboxed): the subagent's Bash must then run in the sandbox too."""
    outside = tmp_path / "written-by-a-subagent"
    escape = f"{sys.executable} -c \"open('{outside}', 'w').write('x')\""
    task = {"description": "w", "prompt": "write it", "subagent_type": "general-purpose"}
    server = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "Task", "input": task}]},
                {"tool_calls": [{"name": "Bash", "input": {"command": escape}}]},
                "child done",
                "Done.",
            ]
        }
    )
    settings = _settings(tmp_path, {"enabled": True})
    run = keel("-p", "go", "--settings", str(settings), env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert not outside.exists()
    child_results = [
        json.dumps(m["content"])
        for m in server.cursor.requests[2]["body"]["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
    ]
    assert any("[Sandbox denial:" in r for r in child_results), child_results
