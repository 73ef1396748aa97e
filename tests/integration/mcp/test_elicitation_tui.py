"""An MCP server's elicitation in the TUI: a dialog with the server's form (#34 item 10). The server
is @modelcontextprotocol/server-everything 2026.8.31, its trigger-elicitation-request tool (a form of
13 fields, one required-free). What Claude Code 2.1.328 answers for the same form through an SDK
host is in tests/integration/ui/sdk_ts/test_sdk_ts.py; before this, the TUI cancelled every
elicitation, as headless does."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.ui.tui.app import KeelApp
from agentkeel.ui.tui.dialogs import ChooserScreen, ElicitationScreen, form_values
from kit import node_modules, session_files
from tui_harness import make_options, type_text, wait_for

CALL = {"tool_calls": [{"name": "mcp__ev__trigger-elicitation-request", "input": {}}]}


def test_form_values_follow_the_schema() -> None:
    fields = {"n": {"type": "integer"}, "ok": {"type": "boolean"}, "tags": {"type": "array"}, "s": {"type": "string"}}
    assert form_values(fields, set(), {"n": "7", "ok": "yes", "tags": "a, b", "s": ""}) == (
        {"n": 7, "ok": True, "tags": ["a", "b"]},
        "",
    )
    assert form_values(fields, {"s"}, {"s": " "})[1] == "s is required"
    assert form_values(fields, set(), {"n": "seven"})[1] == "n must be a integer"


async def test_the_tui_shows_the_form_and_sends_what_the_user_typed(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    entry = (
        node_modules("@modelcontextprotocol/server-everything")
        / "@modelcontextprotocol/server-everything/dist/index.js"
    )
    config = {"mcpServers": {"ev": {"type": "stdio", "command": "node", "args": [str(entry), "stdio"]}}}
    (tmp_path / "userhome" / ".claude.json").write_text(json.dumps(config))
    server = fake_llm({"steps": [CALL, "done"]})
    app = KeelApp(make_options(project, server), home=tmp_path / "keelhome")
    async with app.run_test(size=(120, 50)) as pilot:
        await type_text(pilot, "elicit")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ChooserScreen), what="the permission ask")
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, ElicitationScreen), what="the elicitation form")
        assert isinstance(app.screen, ElicitationScreen)
        assert app.screen.server == "ev" and list(app.screen.fields)[:2] == ["name", "check"]
        await type_text(pilot, "Ada")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.running is not None and app.running.done(), what="the end of the turn")
    [log] = session_files(tmp_path / "keelhome")
    text = log.read_text()
    assert "User provided the requested information" in text and "Name: Ada" in text
