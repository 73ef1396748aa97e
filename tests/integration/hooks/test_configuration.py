"""Hook configuration: matchers, layers and their switches, trust, and the handler types that
talk to something other than a local process (http, prompt, entry points)."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agentkeel.config.settings import SettingsLayer
from agentkeel.config.trust import TrustStore
from agentkeel.hooks import EVENTS, FIRED, load_hooks, parse_hooks
from agentkeel.hooks.matchers import compile_matcher, matcher_error
from kit import KeelRun
from tests.unit.hooks.test_output_semantics import Session, _group, bash


def test_matchers_follow_claude_codes_rules() -> None:
    assert compile_matcher("*")("Anything") and compile_matcher("")("Bash")
    both = compile_matcher("Edit|Write")
    assert both("Edit") and both("Write") and not both("MultiEdit") and not both("Edi")
    assert compile_matcher("Edit, Write")("Write")
    assert not compile_matcher("Notebook")("NotebookEdit")  # exact names, not prefixes
    mcp = compile_matcher("mcp__memory__.*")
    assert mcp("mcp__memory__search") and not mcp("mcp__git__log")
    assert compile_matcher("Notebook.*")("NotebookEdit")
    assert compile_matcher("startup|resume")("resume")
    assert not compile_matcher("[unclosed")("[unclosed")
    assert matcher_error("[unclosed") is not None and matcher_error("Edit|Write") is None


def _layer(tmp: Path, scope: str, data: dict[str, Any]) -> SettingsLayer:
    return SettingsLayer(tmp / f"{scope}.json", scope, data)  # type: ignore[arg-type]


def _cmd(text: str) -> dict[str, Any]:
    return {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": text}]}]}}


def test_layers_disable_all_hooks_and_managed_only(tmp_path: Path) -> None:
    layers = [_layer(tmp_path, s, _cmd(f"echo {s}")) for s in ("user", "project", "local", "cli", "managed")]
    assert [h.scope for h in load_hooks(layers).hooks] == ["user", "project", "local", "cli", "managed"]
    assert next(h.handler.command for h in load_hooks(layers).hooks) == "echo user"
    off = [*layers[:2], _layer(tmp_path, "local", {**_cmd("echo local"), "disableAllHooks": True}), *layers[3:]]
    assert [h.scope for h in load_hooks(off, {"Stop": [{"hooks": [{"command": "x"}]}]}).hooks] == ["managed", "sdk"]
    managed_off = [*layers[:4], _layer(tmp_path, "managed", {**_cmd("m"), "disableAllHooks": True})]
    assert load_hooks(managed_off, {"Stop": [{"hooks": [{"command": "x"}]}]}).hooks == []
    only = [*layers[:4], _layer(tmp_path, "managed", {**_cmd("m"), "allowManagedHooksOnly": True})]
    assert [h.scope for h in load_hooks(only).hooks] == ["managed"]
    # a project cannot switch managed-only on for itself
    assert len(load_hooks([*layers[:4], _layer(tmp_path, "project", {"allowManagedHooksOnly": True})]).hooks) == 4


def test_every_spec_event_is_accepted_and_bad_entries_are_one_warning_each() -> None:
    everything = {e: [{"hooks": [{"type": "command", "command": "true"}]}] for e in EVENTS}
    parsed = parse_hooks(everything, "s.json", "project")
    assert parsed.warnings == [] and len(parsed.hooks) == len(EVENTS)
    assert set(EVENTS) == FIRED  # every SPEC 4 event fires (the lifecycle ones through the LifecyclePoint)
    bad = parse_hooks(
        {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command"}, {"type": "shell", "command": "x"}]},
                {"matcher": 3, "hooks": []},
                "not a group",
            ],
            "Stop": [{"hooks": [{"type": "http", "url": "ftp://x"}, {"command": "x", "timeout": -1}]}],
            "Stopp": [],
            "SessionEnd": {"hooks": []},
            "SubagentStop": [{"hooks": [{"type": "agent"}, {"type": "agent", "prompt": "check", "maxTurns": 0}]}],
        },
        "s.json",
        "project",
    )
    assert bad.hooks == []
    assert len(bad.warnings) == 10, bad.warnings
    assert all(w.startswith("s.json: ") and "\n" not in w for w in bad.warnings)
    assert any("unknown hook event 'Stopp'" in w for w in bad.warnings)
    assert any("an agent handler needs 'prompt'" in w for w in bad.warnings)
    assert any("'maxTurns' must be a whole number from 1 to 50" in w for w in bad.warnings)


def test_project_hooks_are_inert_until_trusted_and_a_change_asks_again(
    project: Path, tmp_path: Path, keel: Callable[..., KeelRun], fake_llm: Callable[[Any], Any]
) -> None:
    from kit import wire_env

    marker = tmp_path / "ran"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(_cmd(f"touch {marker}")))
    server = fake_llm({"steps": ["a", "b", "c"], "loop": True})
    run = keel("-p", "hi", env=wire_env(server, "anthropic"))
    assert run.code == 0 and not marker.exists() and "not trusted" in run.stderr
    assert keel("trust", str(project)).code == 0
    assert keel("-p", "hi", env=wire_env(server, "anthropic")).code == 0 and marker.exists()
    marker.unlink()
    settings.write_text(json.dumps(_cmd(f"touch {marker}; echo changed")))
    store = TrustStore(Path(os.environ["KEEL_HOME"]))
    assert store.state(project.resolve()).status == "changed"
    run = keel("-p", "hi", env=wire_env(server, "anthropic"))
    assert run.code == 0 and not marker.exists()


class _Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[dict[str, str], Any]]] = []
    answer: ClassVar[dict[str, Any]] = {}

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((dict(self.headers.items()), body))
        data = json.dumps(self.answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def hook_server() -> Iterator[HTTPServer]:
    server = HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


async def test_http_hook_posts_the_payload_with_allowed_env_in_headers(
    project: Path, hook_server: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_TOKEN", "tok-123")
    monkeypatch.setenv("NOT_ALLOWED", "leak")
    _Recorder.seen.clear()
    deny = {"permissionDecision": "deny", "permissionDecisionReason": "remote says no"}
    _Recorder.answer = {"hookSpecificOutput": {"hookEventName": "PreToolUse", **deny}}
    handler = {
        "type": "http",
        "url": f"http://127.0.0.1:{hook_server.server_port}/hook",
        "headers": {"Authorization": "Bearer $HOOK_TOKEN", "X-Other": "${NOT_ALLOWED}"},
        "allowedEnvVars": ["HOOK_TOKEN"],
    }
    s = Session(project, [bash("echo hi"), "done"], {"PreToolUse": [_group(handler, "Bash")]})
    await s.run("go")
    [(headers, body)] = _Recorder.seen
    assert headers["Authorization"] == "Bearer tok-123" and headers["X-Other"] == ""
    assert body["hook_event_name"] == "PreToolUse" and body["tool_input"] == {"command": "echo hi"}
    assert "remote says no" in s.tool_results(1)


async def test_prompt_hook_asks_the_sessions_model(project: Path) -> None:
    steps = [bash("echo risky"), '{"ok": false, "reason": "too risky for a Friday"}', "done"]
    handler = {"type": "prompt", "prompt": "Is this command safe? $ARGUMENTS"}
    s = Session(project, steps, {"PreToolUse": [_group(handler, "Bash")]})
    [result] = await s.run("go")
    assert result.result == "done"
    assert len(s.requests) == 2  # the hook's own model call is not a turn of the session
    assert "too risky for a Friday" in s.tool_results(1)


async def test_python_entry_point(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "site"
    pkg.mkdir()
    (pkg / "myhooks.py").write_text(
        "def guard(payload):\n"
        "    if 'curl' in payload['tool_input']['command']:\n"
        "        return {'decision': 'block', 'reason': 'no network from myhooks'}\n"
    )
    monkeypatch.syspath_prepend(str(pkg))
    handler = {"type": "python", "callable": "myhooks:guard"}
    s = Session(project, [bash("curl http://example.invalid"), "done"], {"PreToolUse": [_group(handler, "Bash")]})
    await s.run("go")
    assert "no network from myhooks" in s.tool_results(1)
    assert sys.modules["myhooks"].__file__ == str(pkg / "myhooks.py")


async def test_notification_and_cwd_changed_with_the_env_file(project: Path) -> None:
    (project / "sub").mkdir()
    seen: list[dict[str, Any]] = []

    def record(payload: dict[str, Any]) -> None:
        seen.append(payload)

    export = {"type": "command", "command": 'echo "export IN_SUB=yes-$(basename $PWD)" >> "$CLAUDE_ENV_FILE"'}
    hooks = {
        "Notification": [_group(record, "keel_warning")],
        "CwdChanged": [_group(record), _group(export)],
        "Stopp": [],  # an unknown event: a warning notice at start, which Notification hooks see
    }
    s = Session(project, [bash("cd sub"), bash("echo $IN_SUB"), "done"], hooks, allowed_tools=["Bash"])
    await s.run("go")
    notes = [p for p in seen if p["hook_event_name"] == "Notification"]
    assert any("unknown hook event 'Stopp'" in p["message"] for p in notes)
    moved = [p for p in seen if p["hook_event_name"] == "CwdChanged"]
    assert len(moved) == 1 and moved[0]["new_cwd"].endswith("/sub") and moved[0]["cwd"].endswith("/sub")
    assert "yes-sub" in s.tool_results(2)
