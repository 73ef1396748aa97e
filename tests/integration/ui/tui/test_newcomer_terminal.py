"""What a newcomer met in a real terminal (#31 item 11), with the real ``keel`` binary in tmux: the
start screen's hint, a resumed session showing the model's answers and its turn count, and keys
typed right after "/" faster than the completion list follows them running what was typed."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kit import KEEL
from tests.integration.ui.tui.test_terminal import Tmux, tmux_env

__all__ = ["tmux_env"]  # the fixture, used by name

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (scripts/setup installs it)"
)
SID = "00000000-0000-4000-8000-0000000000bb"


def test_a_resumed_session_on_a_terminal(project: Path, tmux_env: Callable[[dict[str, Any]], Tmux]) -> None:
    tmux = tmux_env({"steps": ["First answer from the model.", "Second answer from the model."]})
    for args in (["-p", "hello", "--session-id", SID], ["-p", "and again", "-r", SID]):
        subprocess.run([KEEL, *args], cwd=project, env=tmux.env, check=True, capture_output=True, timeout=60)
    tmux.start(f"{KEEL} -r {SID}", project)
    shown = tmux.wait_for("Second answer from the model.")
    assert "First answer from the model." in shown and "and again" in shown
    assert "turn 2" in shown
    assert "Type a prompt · / commands" in shown  # the start hint
    tmux.run("send-keys", "-t", "0", "-l", "/")
    tmux.wait_for("/agents · List the subagent types")  # the completion list is open
    tmux.run("send-keys", "-t", "0", "c", "o", "s", "t", "Enter")  # one write to the terminal
    shown = tmux.wait_for("Total cost:")
    assert "Slash commands" not in shown and "/help cost" not in shown
    tmux.run("send-keys", "-t", "0", "-l", "/exit")
    tmux.run("send-keys", "-t", "0", "Enter")
    assert tmux.wait_exit() == (True, "0")


def test_the_start_hint_on_a_fresh_terminal(project: Path, tmux_env: Callable[[dict[str, Any]], Tmux]) -> None:
    tmux = tmux_env({"steps": ["unused"]})
    tmux.start(KEEL, project)
    shown = tmux.wait_for("Type a prompt · / commands · @ files · Ctrl-C interrupts · /exit leaves")
    assert "⏵⏵ default" in shown
    tmux.run("send-keys", "-t", "0", "-l", "/quit")
    tmux.run("send-keys", "-t", "0", "Enter")
    assert tmux.wait_exit() == (True, "0")
