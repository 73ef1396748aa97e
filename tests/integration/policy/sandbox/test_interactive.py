"""``/sandbox`` in interactive mode (a real pseudo-terminal): it shows the session's sandbox as
``keel sandbox status`` does, and turns sandbox mode off and on for the session; the model's Bash
calls follow (asked and unsandboxed when off, sandboxed without asking when on)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect
import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, wire_env
from sandbox_harness import bwrap_works
from tests.integration.policy.sandbox.test_cli import _results

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")


def _writes(target: Path) -> str:
    # a write the permission engine cannot see (no redirect): it asks in default mode
    return f"{sys.executable} -c \"open('{target}', 'w').write('x')\""


def test_slash_sandbox_shows_status_and_toggles_sandbox_mode_for_the_session(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    first, second = tmp_path / "outside-1", tmp_path / "outside-2"
    server = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "Bash", "input": {"command": _writes(first)}}]},
                "first done",
                {"tool_calls": [{"name": "Bash", "input": {"command": _writes(second)}}]},
                "second done",
            ]
        }
    )
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"sandbox": {"enabled": True}}))
    env = {**os.environ, **wire_env(server, "anthropic"), "TERM": "dumb"}
    child = pexpect.spawn(
        KEEL,
        ["--settings", str(settings)],
        cwd=str(project),
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(60, 250),
    )
    try:
        child.expect("/help for commands")
        child.expect("> ")
        child.sendline("/sandbox")
        child.expect("bubblewrap: ")
        child.expect("sandbox: on")
        child.expect("writable: ")
        child.expect(r"/sandbox on\|off")
        child.expect("> ")
        child.sendline("/sandbox off")
        child.expect("sandbox: off - turned off for this session")
        child.expect("Sandbox mode is off for this session")
        child.expect("> ")
        child.sendline("write the first file")
        child.expect(r"\[y\] yes once")  # unsandboxed: the normal permission flow asks
        child.sendline("y")
        child.expect("first done")
        child.expect("> ")
        child.sendline("/sandbox on")
        child.expect("sandbox: on")
        child.expect("Sandbox mode is on for this session")
        child.expect("> ")
        child.sendline("write the second file")
        index = child.expect(["second done", r"\[y\] yes once"])  # sandboxed: no question
        assert index == 0
        child.expect("> ")
        child.send("\x04")
        child.expect(pexpect.EOF, timeout=120)  # a loaded machine: exit closes the session, the proxy, the shells
    finally:
        child.close()
    assert first.read_text() == "x"
    assert not second.exists()
    assert "[Sandbox denial:" in _results(server)[-1]
