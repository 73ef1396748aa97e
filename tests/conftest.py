"""Shared fixtures: an isolated HOME and KEEL_HOME, the fake model server, the real CLI in a project.

The helpers behind them (and everything else a test drives keel with) are in tests/kit.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from agentkeel.models.fake.server import FakeLLMServer

# The helpers live in the testing façade, tests/kit.py (tests import them from there); these names
# stay importable from conftest until every test file has moved to kit.
from kit import KEEL, KeelRun, descendants, fake_llm_server, run_keel, session_files, stop, wait_until, wire_env

__all__ = ["KEEL", "KeelRun", "descendants", "session_files", "wait_until", "wire_env"]

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
    """Start a scripted model on loopback (``kit.fake_llm_server``); every one is stopped after the test."""
    servers: list[FakeLLMServer] = []

    def start(script: Any) -> FakeLLMServer:
        servers.append(fake_llm_server(script))
        return servers[-1]

    yield start
    for server in servers:
        stop(server)


@pytest.fixture
def keel(project: Path) -> Callable[..., KeelRun]:
    """The ``keel`` binary, run in the test's project unless ``cwd`` says otherwise."""

    def run(
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 60,
        stdin: str | None = None,
    ) -> KeelRun:
        return run_keel(*args, cwd=cwd or project, env=env, timeout=timeout, stdin=stdin)

    return run
