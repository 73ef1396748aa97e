"""The harness that runs the official Python Agent SDK's own e2e-tests (vendored/, unchanged) on keel.

What it does for every test, and nothing else (see SOURCES.md):

- **keel is the CLI.** The SDK prefers the ``claude`` binary bundled in its wheel; the one shim
  here replaces its CLI discovery (``SubprocessCLITransport._find_cli``) with the venv's ``keel``
  (or ``$SDK_E2E_CLI``, to run the same tests on Claude Code as the oracle).
- **A scripted model per test.** A loopback ``agentkeel.models.fake`` server answers every request
  with the test's responder from ``scripts.py`` (by test name), as a real model would answer the
  test's prompt; ``ANTHROPIC_BASE_URL`` points at it and ``ANTHROPIC_API_KEY`` is an obviously fake
  value. The server's request log is the ``sdk_model`` fixture, for keel-side companion checks.
- **A sealed machine.** A temporary HOME (and KEEL_HOME, from tests/conftest.py), a temporary
  working directory holding a small project (``PROJECT_FILES``: the tree the structured-output
  prompts ask about), ``tempfile``'s directory inside the test's tmp_path, and
  ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.script import ScriptCursor, Step, parse_step
from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, fake_llm_server, stop

from .scripts import responder, turn_of

FAKE_KEY = "sk-ant-fake-0000-not-a-real-key"
CLI = os.environ.get("SDK_E2E_CLI") or KEEL

PROJECT_FILES = {
    "src/claude_agent_sdk/__init__.py": '"""The package."""\n',
    "src/claude_agent_sdk/client.py": "class Client:\n    pass\n",
    "src/claude_agent_sdk/query.py": "def query() -> None:\n    pass\n",
    "tests/test_client.py": "import pytest\n\n\ndef test_client() -> None:\n    assert True\n",
    "README.md": "# a project\n",
}


class ResponderCursor(ScriptCursor):
    """The fake server's cursor, answering each request with the test's responder."""

    def __init__(self, server: FakeLLMServer, test_name: str) -> None:
        super().__init__(server.cursor.script)
        self.respond = responder(test_name)

    def next(self, request: dict[str, Any] | None = None, raw: str = "") -> Step:
        with self._lock:
            if request is not None:
                self.requests.append(request)
            n = len(self.requests)
        body = (request or {}).get("body") or {}
        reply = self.respond(turn_of(body))
        if isinstance(reply, dict):
            calls = [{**c, "id": f"toolu_e2e_{n:04d}_{i}"} for i, c in enumerate(reply.get("tool_calls") or [])]
            reply = {**reply, "tool_calls": calls} if calls else reply
        return parse_step(reply, n)


@pytest.fixture(scope="session", autouse=True)
def _fake_api_key() -> Iterator[None]:
    """The vendored conftest's session-scoped ``api_key`` fixture reads the key from os.environ."""
    old = os.environ.get("ANTHROPIC_API_KEY")
    os.environ["ANTHROPIC_API_KEY"] = FAKE_KEY
    yield
    if old is None:
        os.environ.pop("ANTHROPIC_API_KEY", None)
    else:
        os.environ["ANTHROPIC_API_KEY"] = old


@pytest.fixture(autouse=True)
def sdk_model(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeLLMServer]:
    from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

    server = fake_llm_server({"steps": []})
    name = request.node.name
    server.cursor = ResponderCursor(server, name.split("__", 1)[1] if "__" in name else name)
    home = tmp_path / "home"
    work = tmp_path / "work"
    scratch = tmp_path / "tmp"
    for folder in (home, work, scratch):
        folder.mkdir(exist_ok=True)
    for rel, text in PROJECT_FILES.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.chdir(work)
    # the one shim: the SDK spawns keel (or $SDK_E2E_CLI) instead of the claude binary in its wheel
    monkeypatch.setattr(SubprocessCLITransport, "_find_cli", lambda self: CLI)
    yield server
    stop(server)
    if os.environ.get("SDK_E2E_DEBUG"):  # what the model was asked and answered, to debug a script
        for r in server.cursor.requests:
            t = turn_of(r["body"])
            print(f"request: prompt={t.prompt[:80]!r} k={t.k} called={t.called} tools={len(t.tools)}")
            if os.environ.get("SDK_E2E_DEBUG") == "2":
                print(json.dumps(r["body"]["messages"])[:6000])
