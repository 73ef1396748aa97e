"""The TUI shows the files a rewind would overwrite (changed by hand since keel left them) and asks:
"no" changes nothing, "yes" rewinds. Textual's Pilot, a real Runtime, the fake model on loopback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.ui.tui.app import KeelApp
from agentkeel.ui.tui.dialogs import ChooserScreen
from tui_harness import make_options, screen_text, type_text, wait_for


def _idle(app: KeelApp) -> bool:
    return app.running is not None and app.running.done() and app.status == "idle"


async def _send(pilot: Any, text: str) -> None:
    await type_text(pilot, text)
    await pilot.press("enter")


async def _next_dialog(pilot: Any, app: KeelApp, after: Any = None) -> ChooserScreen:
    await wait_for(pilot, lambda: isinstance(app.screen, ChooserScreen) and app.screen is not after, what="a dialog")
    assert isinstance(app.screen, ChooserScreen)
    return app.screen


async def _rewind_code(pilot: Any, app: KeelApp) -> ChooserScreen:
    await _send(pilot, "/rewind")
    turns = await _next_dialog(pilot, app)
    await pilot.press("1")
    modes = await _next_dialog(pilot, app, turns)
    await pilot.press("o")  # code only
    return await _next_dialog(pilot, app, modes)


async def test_the_tui_asks_before_overwriting_a_hand_edit(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    code = project / "app.py"
    code.write_text("x = 1\n")
    write = {"name": "Write", "input": {"file_path": str(code), "content": "x = 2\n"}}
    read = {"name": "Read", "input": {"file_path": str(code)}}
    server = fake_llm(
        {"steps": [{"text": "Reading.", "tool_calls": [read]}, {"text": "W.", "tool_calls": [write]}, "Done."]}
    )
    app = KeelApp(make_options(project, server, permission_mode="bypassPermissions"), home=tmp_path / "keelhome")
    async with app.run_test(size=(120, 40)) as pilot:
        await _send(pilot, "change app.py")
        await wait_for(pilot, lambda: _idle(app), what="the Write turn")
        assert code.read_text() == "x = 2\n"
        code.write_text("x = 2  # and my own note\n")  # by hand, after keel

        ask = await _rewind_code(pilot, app)
        assert "changed since keel last changed them" in ask.dialog_title and str(code) in ask.dialog_title
        await pilot.press("n")
        await wait_for(pilot, lambda: "not rewound" in screen_text(app), what="the refusal")
        assert code.read_text() == "x = 2  # and my own note\n"

        await _rewind_code(pilot, app)
        await pilot.press("y")
        await wait_for(pilot, lambda: "Rewound" in screen_text(app), what="the forced rewind")
        assert code.read_text() == "x = 1\n"
