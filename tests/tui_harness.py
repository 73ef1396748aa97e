"""Helpers for the TUI tests: the app on a real Runtime against the fake model server (real HTTP
on loopback), the screen as text, and waiting for a condition while Textual runs."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.fakellm.server import FakeLLMServer
from agentkeel.runtime import RuntimeOptions

FAKE_KEY = "sk-ant-test-not-a-real-key"


def make_options(
    project: Path, server: FakeLLMServer, *, session_id: str | None = None, **extra: Any
) -> Callable[[], RuntimeOptions]:
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": FAKE_KEY,
        "ANTHROPIC_BASE_URL": server.url,
    }

    def make() -> RuntimeOptions:
        return RuntimeOptions(cwd=project, env=dict(env), home=Path(os.environ["HOME"]), session_id=session_id, **extra)

    return make


def screen_text(app: Any) -> str:
    """What the terminal shows now (the top screen), one line per row, trailing blanks cut."""
    strips = app.screen._compositor.render_strips()
    return "\n".join(strip.text.rstrip() for strip in strips)


async def wait_for(pilot: Any, condition: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        if condition():
            return
    raise AssertionError(f"timed out waiting for {what or condition}:\n{screen_text(pilot.app)}")


async def type_text(pilot: Any, text: str) -> None:
    for ch in text:
        await pilot.press("space" if ch == " " else ch)
