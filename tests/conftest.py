"""Shared fixtures: an isolated KEEL_HOME, the fake model server, and a way to run the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from agentkeel.fakellm.script import Script
from agentkeel.fakellm.server import FakeLLMServer

KEEL = str(Path(sys.executable).parent / "keel")

# the memory store fixtures (pg_root, backend, store) for every test file: tests/memory_fixtures.py
pytest_plugins = ["memory_fixtures"]

# Property tests check what is computed, never how fast: no per-example deadline (200 ms by default,
# which a loaded machine overshoots: DeadlineExceeded, then Flaky when the rerun is quick) and no
# health check on the speed of generating examples.
settings.register_profile("keel", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("keel")

# No real model is ever reachable from tests: provider env vars are scrubbed.
SCRUB = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "KEEL_MODEL",
    "KEEL_HOME",
    "KEEL_PROVIDER_TRANSPORT",
    "API_TIMEOUT_MS",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_BETAS",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SCRUB:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "userhome"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KEEL_HOME", str(tmp_path / "keelhome"))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    return p


@pytest.fixture
def fake_llm() -> Iterator[Callable[[Any], FakeLLMServer]]:
    servers: list[FakeLLMServer] = []

    def start(script: Any) -> FakeLLMServer:
        server = FakeLLMServer(script if isinstance(script, Script) else Script.from_data(script))
        server.start_background()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


@dataclass
class KeelRun:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def lines(self) -> list[Any]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def wire_env(server: FakeLLMServer, wire: str) -> dict[str, str]:
    if wire == "anthropic":
        return {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key", "ANTHROPIC_BASE_URL": server.url}
    return {"OPENAI_API_KEY": "sk-test-not-a-real-key", "OPENAI_BASE_URL": server.url + "/v1"}


@pytest.fixture
def keel(project: Path) -> Callable[..., KeelRun]:
    def run(
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 60,
        stdin: str | None = None,
    ) -> KeelRun:
        full_env = dict(os.environ)
        full_env.update(env or {})
        proc = subprocess.run(
            [KEEL, *args],
            cwd=cwd or project,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
        return KeelRun(proc.returncode, proc.stdout, proc.stderr)

    return run


def session_files(keel_home: Path) -> list[Path]:
    return sorted((keel_home / "projects").glob("*/*.jsonl"))


def descendants(pid: int) -> list[tuple[int, list[str]]]:
    """The live processes below ``pid`` (children, their children...), each with its argv; a zombie
    (empty argv) or a process that ends mid-scan is left out."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        parents[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    below: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - below
        below |= frontier
    found = []
    for p in sorted(below):
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue
        if argv:
            found.append((p, [a.decode(errors="replace") for a in argv]))
    return found


def wait_until(condition: Callable[[], Any], timeout: float = 60.0, what: str = "the condition") -> Any:
    """Poll ``condition`` until it is truthy and return its value; fail after ``timeout`` seconds
    (a bound on a hang, not an expectation of speed)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)
    return value
