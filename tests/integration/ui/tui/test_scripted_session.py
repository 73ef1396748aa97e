"""The TUI drives a whole scripted session (Textual's Pilot, a real Runtime, the fake model over
loopback): a streamed answer, a tool call allowed for the session, an Edit diff accepted, /rewind
to the first turn restoring the file on disk, and Ctrl-C during a long tool call."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.ui.tui.app import KeelApp
from agentkeel.ui.tui.chat import AnswerBlock, ToolBlock
from agentkeel.ui.tui.dialogs import ChooserScreen
from tui_harness import make_options, screen_text, type_text, wait_for


def _idle(app: KeelApp) -> bool:
    return app.running is not None and app.running.done() and app.status == "idle"


async def _send(pilot: Any, app: KeelApp, text: str) -> None:
    await type_text(pilot, text)
    await pilot.press("enter")


async def _dialog(pilot: Any, app: KeelApp) -> ChooserScreen:
    await wait_for(pilot, lambda: isinstance(app.screen, ChooserScreen), what="a dialog")
    assert isinstance(app.screen, ChooserScreen)
    return app.screen


async def test_whole_session(project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]) -> None:
    code = project / "app.py"
    code.write_text("x = 1\n")
    server = fake_llm(
        {
            "steps": [
                "Hello **there**.\n\n```python\nprint('hi')\n```\n",
                {"text": "Touching it.", "tool_calls": [{"name": "Bash", "input": {"command": "touch made.txt"}}]},
                "Touched.",
                {"text": "Reading.", "tool_calls": [{"name": "Read", "input": {"file_path": str(code)}}]},
                {
                    "text": "Editing.",
                    "tool_calls": [
                        {
                            "name": "Edit",
                            "input": {"file_path": str(code), "old_string": "x = 1", "new_string": "x = 2"},
                        }
                    ],
                },
                "Edited.",
                {"text": "Sleeping.", "tool_calls": [{"name": "Bash", "input": {"command": "sleep 30"}}]},
                "After the interrupt.",
            ]
        }
    )
    app = KeelApp(make_options(project, server), home=tmp_path / "keelhome")
    async with app.run_test(size=(120, 40)) as pilot:
        # 1. a prompt and a streamed Markdown answer with a highlighted code block
        await _send(pilot, app, "hello")
        await wait_for(pilot, lambda: _idle(app), what="the first answer")
        answers = list(app.query(AnswerBlock))
        assert answers and answers[0].text.startswith("Hello **there**")
        shown = screen_text(app)
        assert "Hello there." in shown and "print('hi')" in shown

        # 2. a tool call that asks; "yes, and allow for this session"
        await _send(pilot, app, "touch a file")
        dialog = await _dialog(pilot, app)
        assert [c.key for c in dialog.choices] == ["y", "s", "p", "n"]
        assert "touch made.txt" in screen_text(app)
        await pilot.press("s")
        await wait_for(pilot, lambda: _idle(app), what="the Bash turn")
        assert (project / "made.txt").exists()
        block = next(iter(app.query(ToolBlock)))
        assert "exit 0" in str(block.title)

        # 3. an Edit shown as a diff, accepted
        await _send(pilot, app, "edit app.py")
        dialog = await _dialog(pilot, app)
        assert "-x = 1" in dialog.diff and "+x = 2" in dialog.diff
        shown = screen_text(app)
        assert "Apply this edit?" in shown and "+x = 2" in shown
        await pilot.press("y")
        await wait_for(pilot, lambda: _idle(app), what="the Edit turn")
        assert code.read_text() == "x = 2\n"
        edit = next(b for b in app.query(ToolBlock) if b.tool_name == "Edit")
        assert "+x = 2" in edit.diff and "+1 -1" in str(edit.title)  # the chat keeps the diff

        # 4. /rewind to the first turn restores the file on disk
        await _send(pilot, app, "/rewind")
        dialog = await _dialog(pilot, app)
        assert "hello" in dialog.choices[0].label
        await pilot.press("1")
        await wait_for(pilot, lambda: isinstance(app.screen, ChooserScreen) and app.screen is not dialog)
        await pilot.press("b")
        await wait_for(pilot, lambda: _idle(app) and "Rewound" in screen_text(app), what="the rewind")
        assert code.read_text() == "x = 1\n"
        assert app.query_one("#prompt").text == "hello"  # the prompt comes back to edit
        assert app.rt.agent.messages == []  # the conversation is back before turn 0

        # 5. Ctrl-C during a long tool call interrupts it; the session goes on
        app.query_one("#prompt").set_text("")
        await _send(pilot, app, "sleep")
        dialog = await _dialog(pilot, app)
        await pilot.press("y")
        await wait_for(pilot, lambda: "running" in app.status and "running" in screen_text(app), what="the sleep")
        # the progress indicator on the tool block
        await wait_for(pilot, lambda: "· running" in screen_text(app), what="the progress indicator")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: _idle(app), timeout=60, what="the interrupt")
        assert "[interrupted]" in screen_text(app)
        await pilot.pause(2.1)  # a single Ctrl-C later does not exit
        await _send(pilot, app, "still there?")
        await wait_for(pilot, lambda: _idle(app) and "After the interrupt." in screen_text(app))
        await pilot.press("ctrl+c")
        await pilot.press("ctrl+c")  # twice exits
        await wait_for(pilot, lambda: app.return_code is not None or not app.is_running, what="exit")
    assert app.return_code == 0
