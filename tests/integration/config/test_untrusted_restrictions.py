"""A project's settings that only take a power away hold before the folder is trusted.

``permissions.disableBypassPermissionsMode: "disable"`` in an untrusted project's
``.claude/settings.json`` was dropped with the permission-widening keys, so ``--permission-mode
bypassPermissions`` (or an editor's mode switch over ``keel acp``) ran with every check off there
(found by review: the user-level setting held, the untrusted project's did not).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env

Keel = Callable[..., KeelRun]
FakeLLM = Callable[[Any], FakeLLMServer]


def test_an_untrusted_projects_disable_bypass_holds(project: Path, fake_llm: FakeLLM, keel: Keel) -> None:
    (project / ".claude").mkdir()
    settings = {"permissions": {"disableBypassPermissionsMode": "disable"}}
    (project / ".claude" / "settings.json").write_text(json.dumps(settings))
    write = {"tool_calls": [{"name": "Write", "input": {"file_path": str(project / "x.txt"), "content": "x"}}]}
    server = fake_llm({"steps": [write, "done"]})
    run = keel("-p", "go", "--permission-mode", "bypassPermissions", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert "bypassPermissions is disabled by settings" in run.stderr
    assert not (project / "x.txt").exists()  # default mode, headless: the write was not allowed
