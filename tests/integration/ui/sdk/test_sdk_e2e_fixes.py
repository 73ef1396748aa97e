"""What the official Python SDK's e2e-tests (tests/integration/sdk_e2e) found, pinned one fix each.

Each test drives the real ``keel`` binary in stream-json mode (the SDKs' only mode) with the
scripted model, and checks the lines keel prints against what Claude Code 2.1.328 printed for the
same input (the command that recorded it is in each docstring; the capture harness is
tests/integration/sdk_e2e, run with ``SDK_E2E_CLI=<claude>``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]
STREAM = ("--output-format", "stream-json", "--verbose", "--input-format", "stream-json")


def user(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": None, "session_id": ""}


def initialize(**body: Any) -> dict[str, Any]:
    return {"type": "control_request", "request_id": "req_init", "request": {"subtype": "initialize", **body}}


def stream(keel: Keel, server: FakeLLMServer, *lines: dict[str, Any], args: tuple[str, ...] = ()) -> list[Any]:
    stdin = "".join(json.dumps(line) + "\n" for line in lines)
    run = keel(*STREAM, *args, env=wire_env(server, "anthropic"), stdin=stdin)
    assert run.stderr == "" or "Traceback" not in run.stderr, run.stderr
    return run.lines()


def inits(lines: list[Any]) -> list[dict[str, Any]]:
    return [x for x in lines if x.get("type") == "system" and x.get("subtype") == "init"]


def results(lines: list[Any]) -> list[dict[str, Any]]:
    return [x for x in lines if x.get("type") == "result"]


def _project_definitions(project: Path) -> None:
    claude = project / ".claude"
    (claude / "commands").mkdir(parents=True)
    (claude / "commands" / "projcmd.md").write_text("---\ndescription: a project command\n---\nDo it.\n")
    (claude / "agents").mkdir()
    (claude / "agents" / "projagent.md").write_text(
        "---\nname: projagent\ndescription: a project agent\n---\nYou help.\n"
    )
    (claude / "skills" / "projskill").mkdir(parents=True)
    (claude / "skills" / "projskill" / "SKILL.md").write_text(
        "---\nname: projskill\ndescription: a project skill\n---\nDo the skill.\n"
    )


def test_setting_sources_user_leaves_out_the_projects_commands_agents_and_skills(
    fake_llm: Start, keel: Keel, project: Path
) -> None:
    """``--setting-sources user`` reads none of the project's .claude folders; ``user,project`` does.

    Claude Code 2.1.328 (vendored test_setting_sources_user_only, passing with
    ``SDK_E2E_CLI=~/.cache/keel-peers/node_modules/.bin/claude pytest tests/integration/sdk_e2e/vendored
    -k setting_sources``): the project's ``testcmd`` is not in ``slash_commands``."""
    _project_definitions(project)
    server = fake_llm({"steps": ["4", "4"]})
    (only_user,) = inits(stream(keel, server, user("What is 2 + 2?"), args=("--setting-sources", "user")))
    assert "projcmd" not in only_user["slash_commands"]
    assert "projagent" not in only_user["agents"]
    assert "projskill" not in only_user["skills"]
    (both,) = inits(stream(keel, server, user("What is 2 + 2?"), args=("--setting-sources", "user,project")))
    assert "projcmd" in both["slash_commands"] and "projagent" in both["agents"] and "projskill" in both["skills"]


def test_init_reports_the_output_style_the_settings_name(fake_llm: Start, keel: Keel, project: Path) -> None:
    """``outputStyle`` from .claude/settings.local.json is echoed in the init message and in
    initialize's answer.

    Claude Code 2.1.328 (vendored test_setting_sources_default / _project_included, passing on
    it with the harness above): ``"output_style": "local-test-style"``."""
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.local.json").write_text('{"outputStyle": "local-test-style"}')
    server = fake_llm({"steps": ["4"]})
    lines = stream(keel, server, initialize(), user("What is 2 + 2?"))
    (init,) = inits(lines)
    assert init["output_style"] == "local-test-style"
    (answer,) = [x for x in lines if x.get("type") == "control_response"]
    assert answer["response"]["response"]["output_style"] == "local-test-style"
    assert "local-test-style" in answer["response"]["response"]["available_output_styles"]
