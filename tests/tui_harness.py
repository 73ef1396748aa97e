"""Helpers for the TUI tests: the app on a real Runtime against the fake model server (real HTTP
on loopback), the screen as text, and waiting for a condition while Textual runs."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.app.runtime import RuntimeOptions
from agentkeel.models.fake.server import FakeLLMServer
from kit import wait_until_async

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

    async def met() -> bool:
        await pilot.pause(0.05)
        return condition()

    await wait_until_async(met, timeout, lambda: f"{what or condition}:\n{screen_text(pilot.app)}", interval=0)


async def type_text(pilot: Any, text: str) -> None:
    for ch in text:
        await pilot.press("space" if ch == " " else ch)
