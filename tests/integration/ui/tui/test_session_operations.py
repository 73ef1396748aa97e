"""The TUI's session operations on the real session files: /fork continues in a copy, /resume
switches back, the sidebar lists both, and the theme follows the terminal (light or dark)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.ui.cli.tui import _theme
from agentkeel.ui.tui.app import KeelApp
from agentkeel.ui.tui.chat import UserBlock
from agentkeel.ui.tui.side import SessionItem
from tui_harness import make_options, screen_text, type_text, wait_for


def _idle(app: KeelApp) -> bool:
    return app.running is not None and app.running.done() and app.status == "idle"


async def test_fork_and_resume_switch_sessions(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": ["First answer.", "Answer in the fork."]})
    app = KeelApp(make_options(project, server), home=tmp_path / "keelhome")
    async with app.run_test(size=(140, 40)) as pilot:
        await type_text(pilot, "first question")
        await pilot.press("enter")
        await wait_for(pilot, lambda: _idle(app), what="the first answer")
        original = app.rt.session_id
        await type_text(pilot, "/fork")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.rt.session_id != original and _idle(app), what="the fork")
        forked = app.rt.session_id
        assert "Forked session" in screen_text(app)
        assert [b.text for b in app.query(UserBlock)] == ["first question"]  # the conversation came along
        await type_text(pilot, "in the fork")
        await pilot.press("enter")
        await wait_for(pilot, lambda: _idle(app) and "Answer in the fork." in screen_text(app))
        items = [i.entry.session_id for i in app.query(SessionItem)]
        assert original in items and forked in items
        await type_text(pilot, f"/resume {original}")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.rt.session_id == original and _idle(app), what="the resume")
        assert [b.text for b in app.query(UserBlock)] == ["first question"]  # not the fork's prompt
        assert "Answer in the fork." not in screen_text(app)
        await type_text(pilot, "/fork 0")  # a new session holding the turns before turn 0: none
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.rt.session_id not in (original, forked) and _idle(app), what="/fork 0")
        assert list(app.query(UserBlock)) == []


def test_theme_follows_the_terminal() -> None:
    assert _theme({"KEEL_THEME": "light"}) == "textual-light"
    assert _theme({"COLORFGBG": "0;15"}) == "textual-light"  # dark text on a white background
    assert _theme({"COLORFGBG": "15;0"}) == "textual-dark"
    assert _theme({}) == "textual-dark"


async def test_light_theme_renders_light(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": ["ok"]})
    app = KeelApp(make_options(project, server), home=tmp_path / "keelhome", theme="textual-light")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.screen.styles.background.brightness > 0.5, what="the light theme")
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: app.screen.styles.background.brightness < 0.5, what="the dark theme")
        await wait_for(pilot, lambda: "⏵⏵ default" in screen_text(app), what="the mode line")
        await pilot.press("shift+tab")
        assert app.rt.permissions.mode == "acceptEdits"
        await wait_for(pilot, lambda: "accept edits" in screen_text(app), what="the new mode shown")


async def test_background_agents_are_listed_with_their_status(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    """A Task run in the background shows in the sidebar as running, then as done, while the
    parent's turn has already ended (the screen stays usable)."""
    task = {
        "name": "Task",
        "input": {"description": "long job", "prompt": "long job", "run_in_background": True},
    }
    slow = {"text": "background report", "delay_s": 5}  # the child and the parent race for these; the
    # child runs long enough for the sidebar to be seen showing it running, however loaded the machine
    server = fake_llm({"steps": [{"tool_calls": [task]}, slow, slow, "extra"]})
    app = KeelApp(make_options(project, server, permission_mode="bypassPermissions"), home=tmp_path / "keelhome")
    async with app.run_test(size=(140, 40)) as pilot:
        await type_text(pilot, "go")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "◐" in screen_text(app) and "running" in screen_text(app), what="running")
        await wait_for(pilot, lambda: "● " in _agents_line(app) and "done" in _agents_line(app), 60, "done")


def _agents_line(app: KeelApp) -> str:
    text = screen_text(app)
    return text[text.find("Background agents") :]


async def test_ctrl_b_shows_the_sidebar_on_a_small_terminal(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": ["ok"]})
    app = KeelApp(make_options(project, server), home=tmp_path / "keelhome")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        assert "Background agents" not in screen_text(app)  # no room for it at 80 columns
        await pilot.press("ctrl+b")
        await wait_for(pilot, lambda: "Background agents" in screen_text(app), what="the sidebar")
        await pilot.press("ctrl+b")
        await wait_for(pilot, lambda: "Background agents" not in screen_text(app), what="the sidebar hidden")
