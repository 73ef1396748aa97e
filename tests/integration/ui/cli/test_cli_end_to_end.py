"""The CLI end to end: real `keel` processes, the fake model over loopback HTTP, real SDK clients."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, session_files, wire_env
from scenarios import twenty_step_session


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
def test_twenty_step_session(
    wire: str, project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / ".git").mkdir()
    web = fake_llm({"steps": []})  # any loopback HTTP server will do as WebFetch's target
    server = fake_llm(twenty_step_session(project, web.url + "/_keel/health"))
    run = keel(
        "-p",
        "build calc.py with a test",
        "--output-format",
        "json",
        "--permission-mode",
        "bypassPermissions",
        env=wire_env(server, wire),
    )
    assert run.code == 0, run.stderr
    result = run.json()
    assert result["type"] == "result" and result["subtype"] == "success" and result["is_error"] is False
    assert result["num_turns"] == 20
    assert result["result"].startswith("Done: calc.py has add and sub")
    assert result["usage"]["input_tokens"] > 0 and result["total_cost_usd"] > 0

    # the tools really ran
    assert (
        project / "calc.py"
    ).read_text() == "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    assert "add works (tested)" in (project / "NOTES.md").read_text()

    # the model saw every tool result, in its own wire format
    requests = server.cursor.requests
    assert len(requests) == 20 and all(r["wire"] == wire for r in requests)
    last = requests[-1]["body"]["messages"]
    results = _tool_results(last, wire)
    assert any("ok" in r for r in results)  # python3 test_calc.py printed ok
    assert any("tick 1\ntick 2\ntick 3" in r for r in results)  # BashOutput of the background job
    assert any('"ok": true' in r or '"ok":true' in r for r in results)  # WebFetch of the health endpoint
    assert f"still in {project.parent}" in results  # `cd ..` in one Bash call persisted into the next

    # the session log holds the whole conversation
    [log] = session_files(tmp_path / "keelhome")
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(e["type"] == "assistant" for e in entries) == 20
    assert entries[-1]["type"] == "session_end"
    assert all(e["parentUuid"] == prev["uuid"] for prev, e in itertools.pairwise(entries))


def _tool_results(messages: list[dict[str, Any]], wire: str) -> list[str]:
    out: list[str] = []
    for m in messages:
        if wire == "openai" and m["role"] == "tool":
            out.append(m["content"])
        elif wire == "anthropic" and m["role"] == "user" and isinstance(m["content"], list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    c = b["content"]
                    out.append(c if isinstance(c, str) else " ".join(x.get("text", "") for x in c))
    return out


def test_stream_json_and_text_formats(fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]) -> None:
    server = fake_llm(
        {
            "steps": [
                {"text": "Listing.", "tool_calls": [{"name": "LS", "input": {"path": "."}}]},
                "All listed.",
                "Second answer.",
            ]
        }
    )
    run = keel("-p", "list", "--output-format", "stream-json", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    lines = run.lines()
    assert [x["type"] for x in lines] == ["system", "assistant", "user", "assistant", "result"]
    assert lines[0]["subtype"] == "init" and "Read" in lines[0]["tools"]
    assert lines[1]["message"]["content"][1]["type"] == "tool_use"
    assert lines[2]["message"]["content"][0]["type"] == "tool_result"
    assert lines[-1]["result"] == "All listed."
    text = keel("-p", "again", env=wire_env(server, "anthropic"))
    assert text.code == 0 and text.stdout == "Second answer.\n"


def test_max_turns_and_budget_exit_codes(
    fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    loop = {"steps": [{"tool_calls": [{"name": "LS", "input": {"path": "."}}]}], "loop": True}
    server = fake_llm(loop)
    run = keel("-p", "go", "--max-turns", "3", "--output-format", "json", env=wire_env(server, "openai"))
    assert run.code == 1
    assert run.json()["subtype"] == "error_max_turns" and run.json()["num_turns"] == 3
    run = keel("-p", "go", "--max-budget-usd", "0.0001", "--output-format", "json", env=wire_env(server, "openai"))
    assert run.code == 1 and run.json()["subtype"] == "error_max_budget_usd"


def test_headless_default_mode_denies_writes_with_guidance(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    server = fake_llm(
        {"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": "touch made-by-bash"}}]}, "Could not run it."]}
    )
    run = keel("-p", "make a file", env=wire_env(server, "anthropic"))
    assert run.code == 0
    assert not (project / "made-by-bash").exists()
    denial = _tool_results(server.cursor.requests[-1]["body"]["messages"], "anthropic")[0]
    assert "--allowedTools 'Bash(touch made-by-bash)'" in denial
    # allowed explicitly, the same call runs
    server2 = fake_llm(
        {"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": "touch made-by-bash"}}]}, "Done."]}
    )
    assert keel("-p", "make a file", "--allowedTools", "Bash", "Read", env=wire_env(server2, "anthropic")).code == 0
    assert (project / "made-by-bash").exists()


def test_continue_and_resume(fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]) -> None:
    server = fake_llm({"steps": ["first answer", "second answer", "third answer"]})
    env = wire_env(server, "anthropic")
    first = keel("-p", "remember 42", "--output-format", "json", env=env).json()
    second = keel("-p", "-c", "what number?", "--output-format", "json", env=env).json()
    assert second["session_id"] == first["session_id"]
    sent = server.cursor.requests[1]["body"]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"][0]["text"] == "remember 42"
    third = keel("-p", "-r", first["session_id"][:8], "and now?", "--output-format", "json", env=env).json()
    assert third["session_id"] == first["session_id"]
    listing = keel("sessions", "list", "--json")
    assert [s["session_id"] for s in json.loads(listing.stdout)] == [first["session_id"]]


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (["--model", "nosuch:thing"], {"ANTHROPIC_API_KEY": "x"}, "unknown provider 'nosuch'"),
        (["--model", "mystery-model"], {}, "unknown model 'mystery-model'"),
        ([], {}, "no model provider configured"),
        (["-r", "does-not-exist"], {"ANTHROPIC_API_KEY": "x"}, "no session 'does-not-exist'"),
    ],
)
def test_configuration_errors_are_one_line(
    args: list[str], env: dict[str, str], needle: str, keel: Callable[..., KeelRun]
) -> None:
    run = keel("-p", "hi", *args, env=env)
    assert run.code == 2
    assert needle in run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_unreachable_endpoint(keel: Callable[..., KeelRun]) -> None:
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "KEEL_MAX_RETRIES": "1",
    }
    run = keel("-p", "hi", "--output-format", "json", env=env)
    assert run.code == 1
    result = run.json()
    assert result["subtype"] == "error_during_execution"
    assert "cannot reach http://127.0.0.1:9" in result["result"]
    assert "Traceback" not in run.stderr


def test_malformed_settings(project: Path, keel: Callable[..., KeelRun]) -> None:
    (project / ".keel").mkdir()
    bad = project / ".keel" / "settings.json"
    bad.write_text('{"permissions": {"defaultMode": "yolo"}}')
    run = keel("-p", "hi", env={"ANTHROPIC_API_KEY": "x"})
    assert run.code == 2
    assert str(bad) in run.stderr and "permissions.defaultMode" in run.stderr
    assert "Traceback" not in run.stderr
    bad.write_text('{"permissions": ')
    run = keel("-p", "hi", env={"ANTHROPIC_API_KEY": "x"})
    assert run.code == 2 and "invalid JSON at line 1" in run.stderr


def test_corrupt_session_resumes_without_loss(
    tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    server = fake_llm({"steps": ["one", "two"]})
    env = wire_env(server, "anthropic")
    sid = keel("-p", "first", "--output-format", "json", env=env).json()["session_id"]
    [log] = session_files(tmp_path / "keelhome")
    original = log.read_bytes()
    with log.open("ab") as f:
        f.write(b'{"uuid": "torn", "type": "user", "mess')
    run = keel("-p", "-r", sid, "second", "--output-format", "json", env=env)
    assert run.code == 0, run.stderr
    assert "unreadable line(s) skipped" in run.stderr
    data = log.read_bytes()
    assert data.startswith(original + b'{"uuid": "torn", "type": "user", "mess\n')  # kept, never rewritten
    sent = server.cursor.requests[1]["body"]["messages"]
    assert [m["content"][0]["text"] for m in sent if m["role"] == "user"] == ["first", "second"]


def test_version_does_not_import_sdks(keel: Callable[..., KeelRun]) -> None:
    run = keel("--version")
    assert run.code == 0 and "(keel)" in run.stdout
    probe = (
        "import sys; from agentkeel.ui.cli.main import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('anthropic', 'openai', 'pydantic', 'httpx')]\n"
        "print(bad)"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=dict(os.environ))
    assert out.stdout.strip().endswith("[]"), out.stdout


def test_thinking_budget_from_env(fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]) -> None:
    server = fake_llm({"steps": [{"thinking": "considering", "text": "answer"}]})
    run = keel("-p", "think", env={**wire_env(server, "anthropic"), "MAX_THINKING_TOKENS": "2000"})
    assert run.code == 0 and run.stdout == "answer\n"
    body = server.cursor.requests[0]["body"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    assert body["max_tokens"] > 2000
