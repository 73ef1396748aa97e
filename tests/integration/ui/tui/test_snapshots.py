"""Snapshot tests: the main screens at 80x24 and 160x48, as text, against files under
tests/snapshots/tui/ (KEEL_UPDATE_SNAPSHOTS=1 rewrites them). The session id, the model's usage
and the tool durations are fixed or normalised, so a snapshot changes only when the screen does."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.ui.tui.app import KeelApp
from agentkeel.ui.tui.dialogs import ChooserScreen
from tui_harness import make_options, screen_text, type_text, wait_for

SNAPSHOTS = Path(__file__).parents[3] / "snapshots" / "tui"
SESSION_ID = "00000000-0000-4000-8000-000000000001"
USAGE = {"input_tokens": 12000, "output_tokens": 300, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
TODOS = [
    {"content": "Read the code", "status": "completed"},
    {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
    {"content": "Run the tests", "status": "pending"},
]


def _normalise(text: str, project: Path) -> str:
    text = text.replace(str(project), "<project>")
    return re.sub(r"\b\d+\.\ds\b", "N.Ns", text)


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("KEEL_UPDATE_SNAPSHOTS") == "1" or not path.exists():
        if os.environ.get("CI") and not path.exists():
            pytest.fail(f"snapshot {path} is missing (run with KEEL_UPDATE_SNAPSHOTS=1 and commit it)")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
        return
    expected = path.read_text(encoding="utf-8").rstrip("\n")
    assert text == expected, f"screen {name} changed; if on purpose, KEEL_UPDATE_SNAPSHOTS=1\n{text}"


def save_svg(app: KeelApp, name: str) -> None:
    """With KEEL_UPDATE_SNAPSHOTS=1, the 160x48 screens are also saved as the README's pictures."""
    if os.environ.get("KEEL_UPDATE_SNAPSHOTS") == "1":
        docs = Path(__file__).parents[4] / "docs"
        docs.mkdir(exist_ok=True)
        app.save_screenshot(f"tui-{name}.svg", str(docs))


def _script(project: Path) -> dict[str, Any]:
    return {
        "steps": [
            {"text": "Planning.", "tool_calls": [{"name": "TodoWrite", "input": {"todos": TODOS}}], "usage": USAGE},
            {
                "text": "Checking the folder.",
                "tool_calls": [{"name": "Bash", "input": {"command": "echo hello; echo world"}}],
                "usage": USAGE,
            },
            {
                "text": "Reading.",
                "tool_calls": [{"name": "Read", "input": {"file_path": str(project / "calc.py")}}],
                "usage": USAGE,
            },
            {
                "text": "The fix:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\nApplying it now.",
                "tool_calls": [
                    {
                        "name": "Write",
                        "input": {
                            "file_path": str(project / "calc.py"),
                            "content": "def add(a, b):\n    return a + b\n",
                        },
                    }
                ],
                "usage": USAGE,
            },
            {"text": "Done: `calc.py` adds.", "usage": USAGE},
        ]
    }


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
async def test_main_screens(
    size: tuple[int, int], project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    (project / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    server = fake_llm(_script(project))
    settings = tmp_path / "settings.json"  # open todos on screen, and no continuation prompt after the script
    settings.write_text('{"disabled_hooks": ["todo-continuation-enforcer"]}')
    options = make_options(project, server, session_id=SESSION_ID, settings_files=[settings])
    app = KeelApp(options, home=tmp_path / "keelhome")
    tag = f"{size[0]}x{size[1]}"
    async with app.run_test(size=size) as pilot:
        await type_text(pilot, "fix calc.py")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ChooserScreen), what="the Write dialog")
        await app.drain()
        await pilot.pause(0.3)
        check_snapshot(f"permission-{tag}", _normalise(screen_text(app), project))
        if size == (160, 48):
            save_svg(app, "permission")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.running is not None and app.running.done() and app.status == "idle")
        await app.drain()
        await pilot.pause(0.3)
        check_snapshot(f"main-{tag}", _normalise(screen_text(app), project))
        if size == (160, 48):
            save_svg(app, "main")
        await type_text(pilot, "/re")
        await pilot.pause(0.3)
        check_snapshot(f"completion-{tag}", _normalise(screen_text(app), project))
    assert (project / "calc.py").read_text().endswith("a + b\n")
