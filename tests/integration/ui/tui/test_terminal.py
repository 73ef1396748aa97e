"""The TTY path: the real ``keel`` binary in a real terminal (tmux) starts the full-screen UI,
streams an answer from the fake model, and exits on Ctrl-C twice; ``--no-tui`` keeps the line
mode there, and without a terminal keel never starts the TUI."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, wait_until, wire_env

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (scripts/setup installs it)"
)


class Tmux:
    def __init__(self, env: dict[str, str]) -> None:
        self.socket = f"keel-tui-{uuid.uuid4().hex[:8]}"
        self.env = env

    def run(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        return out.stdout

    def start(self, command: str, cwd: Path) -> None:
        self.run("new-session", "-d", "-x", "100", "-y", "30", "-c", str(cwd), command)
        self.run("set-option", "-g", "remain-on-exit", "on")

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "0")

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        shown: str = wait_until(
            lambda: text in (screen := self.screen()) and screen,
            timeout,
            lambda: f"{text!r} on the terminal, which shows:\n{self.screen()}",
            interval=0.2,
        )
        return shown

    def dead(self) -> tuple[bool, str]:
        """Whether the pane's process ended, and how: its exit status, or ``signal N``."""
        fmt = "#{pane_dead} #{pane_dead_status} #{pane_dead_signal}"
        state = self.run("display-message", "-p", "-t", "0", fmt).split()
        if len(state) > 1 and not state[1].isdigit():  # no status: a signal ended it
            return state[0] == "1", f"signal {state[1]}"
        return state[0] == "1", state[1] if len(state) > 1 else ""

    def wait_exit(self, timeout: float = 60.0) -> tuple[bool, str]:
        """``dead()`` once the process has ended and tmux has reaped it.

        tmux marks a pane dead when its terminal closes and learns the status when it reaps the
        process. Built with libutempter (Debian's is), it sets SIGCHLD to SIG_DFL while a helper
        removes the pane's utmp record, right when the terminal closes: a process that exits in
        that window stays a zombie tmux never reaps, and the pane shows no status. A SIGCHLD sent
        to the tmux server makes it reap, and the status it reads is the process's own."""

        def reaped() -> tuple[bool, str] | None:
            state = self.dead()
            if state[0] and state[1]:
                return state
            if state[0]:
                os.kill(int(self.run("display-message", "-p", "#{pid}").strip()), signal.SIGCHLD)
            return None

        return wait_until(reaped, timeout, lambda: f"the pane's process to end and be reaped: {self.dead()}", 0.2)

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], env=self.env, capture_output=True, timeout=10)


@pytest.fixture
def tmux_env(fake_llm: Callable[[Any], FakeLLMServer]) -> Iterator[Callable[[dict[str, Any]], Tmux]]:
    made: list[Tmux] = []

    def make(script: dict[str, Any]) -> Tmux:
        server = fake_llm(script)
        env = {**os.environ, **wire_env(server, "anthropic"), "TERM": "xterm-256color"}
        env.pop("TMUX", None)
        tmux = Tmux(env)
        made.append(tmux)
        return tmux

    yield make
    for tmux in made:
        tmux.kill()


def test_keel_on_a_terminal_starts_the_tui(project: Path, tmux_env: Callable[[dict[str, Any]], Tmux]) -> None:
    tmux = tmux_env({"steps": ["Hello from the **full-screen** UI."]})
    tmux.start(KEEL, project)
    shown = tmux.wait_for("⏵⏵ default")  # the TUI's header, with the permission mode
    assert "ctx" in shown  # the context/cost meter
    tmux.run("send-keys", "-t", "0", "-l", "say hello")
    tmux.run("send-keys", "-t", "0", "Enter")
    tmux.wait_for("Hello from the full-screen UI.")
    tmux.run("send-keys", "-t", "0", "C-c")
    tmux.run("send-keys", "-t", "0", "C-c")
    assert tmux.wait_exit() == (True, "0")


def test_no_tui_keeps_the_line_mode(project: Path, tmux_env: Callable[[dict[str, Any]], Tmux]) -> None:
    tmux = tmux_env({"steps": ["line mode answer"]})
    tmux.start(f"{KEEL} --no-tui", project)
    shown = tmux.wait_for("/help for commands")
    assert "⏵⏵" not in shown
    tmux.run("send-keys", "-t", "0", "-l", "hi")
    tmux.run("send-keys", "-t", "0", "Enter")
    tmux.wait_for("line mode answer")


def test_new_mcp_json_servers_are_asked_about_before_the_screen_starts(
    project: Path, tmux_env: Callable[[dict[str, Any]], Tmux]
) -> None:
    """As the line mode: a trusted folder's new .mcp.json server is approved or rejected once,
    on the plain terminal, and the answer is saved before the full-screen UI starts."""
    import json
    import sys

    fixture = str(Path(__file__).parents[3] / "mcp_fixtures" / "server.py")
    servers = {"alpha": {"command": sys.executable, "args": [fixture, "stdio"]}}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    tmux = tmux_env({"steps": ["unused"]})
    subprocess.run([KEEL, "trust"], cwd=project, env=tmux.env, check=True, capture_output=True, timeout=60)
    tmux.start(KEEL, project)
    tmux.wait_for("New MCP server found in .mcp.json: alpha")
    tmux.run("send-keys", "-t", "0", "-l", "n")
    tmux.run("send-keys", "-t", "0", "Enter")
    tmux.wait_for("⏵⏵ default")
    local = json.loads((project / ".keel" / "settings.local.json").read_text())
    assert local["disabledMcpjsonServers"] == ["alpha"]
    tmux.run("send-keys", "-t", "0", "C-c")
    tmux.run("send-keys", "-t", "0", "C-c")
