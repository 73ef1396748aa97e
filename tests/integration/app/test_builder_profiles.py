"""One registry of built-ins, one builder: the profiles (main, subagent, hook agent, batch task)
choose a session's built-ins from the same table, and ``disabled_hooks`` can name every one."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.app.extensions import BUILTINS, HOOK_AGENT, MAIN, SUBAGENT, enabled, not_shared
from agentkeel.app.runtime import Runtime, RuntimeOptions
from agentkeel.models.fake.server import FakeLLMServer
from conftest import wire_env

Fake = Callable[[Any], FakeLLMServer]


def _runtime(project: Path, server: FakeLLMServer, tmp_path: Path, settings: dict[str, Any]) -> Runtime:
    file = tmp_path / "settings.json"
    file.write_text(json.dumps(settings))
    env = {**os.environ, **wire_env(server, "anthropic")}
    return Runtime.create(RuntimeOptions(cwd=project, env=env, settings_files=[file]))


async def test_disabled_hooks_can_name_the_agents_extension(project: Path, fake_llm: Fake, tmp_path: Path) -> None:
    server = fake_llm({"steps": ["ok"]})
    rt = _runtime(project, server, tmp_path, {"disabled_hooks": ["agents", "loop-detector"]})
    try:
        assert not [w for w in rt.settings.warnings if "disabled_hooks" in w], rt.settings.warnings
        names = [e.name for e in rt.agent.ext]
        assert "agents" not in names and "loop-detector" not in names
        assert "result-guard" in names and "permission-gate" in names
    finally:
        await rt.aclose()
    rt = _runtime(project, server, tmp_path, {})
    try:
        assert "agents" in [e.name for e in rt.agent.ext]
    finally:
        await rt.aclose()


def test_profiles_choose_from_one_table() -> None:
    names = [b.name for b in BUILTINS]
    assert len(names) == len(set(names)), "a built-in named twice"
    # every reliability handler, the hooks, the agents extension: one table
    assert {"agents", "hooks", "session-recovery", "non-interactive-env", "result-guard"} <= set(names)
    # safety is uniform: every profile has the result guard, whatever disabled_hooks says
    for profile in (MAIN, SUBAGENT, HOOK_AGENT):
        assert enabled("result-guard", ["result-guard"], profile)
    assert not enabled("permission-gate", [], HOOK_AGENT)  # the hook agent has its own read-only scope
    # a subagent keeps its own per-conversation state rather than sharing its parent's
    assert {"loop-detector", "memory"} <= not_shared(SUBAGENT)
    assert "result-guard" not in not_shared(SUBAGENT) and "permission-gate" not in not_shared(SUBAGENT)
