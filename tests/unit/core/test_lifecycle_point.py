"""The LifecyclePoint service: subsystems fire SPEC section 4 events without knowing of hooks."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from agentkeel.config.settings import SettingsLayer
from agentkeel.core.extensions import LifecyclePoint, LifecycleResult
from agentkeel.core.tools import Services
from agentkeel.hooks import HookContext, HookDispatcher, HooksExtension, load_hooks


def test_without_hooks_nobody_listens() -> None:
    services = Services()
    life = services.get(LifecyclePoint)
    assert not life.listens("PreCompact")
    assert asyncio.run(life.fire("PreCompact", {"trigger": "auto"})) == LifecycleResult()


def test_hooks_extension_provides_the_lifecycle_service(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    script = tmp_path / "hook.py"
    script.write_text(
        "import json, sys\n"
        f"open({str(seen)!r}, 'w').write(sys.stdin.read())\n"
        "print(json.dumps({'decision': 'block', 'reason': 'keep going'}))\n"
    )
    layer = SettingsLayer(
        tmp_path / "settings.json",
        "user",
        {"hooks": {"SubagentStop": [{"hooks": [{"type": "command", "command": f"{sys.executable} {script}"}]}]}},
    )
    config = load_hooks([layer], None)
    transcript = tmp_path / "s.jsonl"
    ctx = HookContext(
        session_id="s1",
        transcript_path=transcript,
        project_dir=tmp_path,
        emit=lambda e: None,
        mode=lambda: "default",
        env={},
        env_file=None,
        provider=None,
        model="m",
        home=str(tmp_path),
    )
    services = Services()
    HooksExtension(HookDispatcher(config, ctx), services=services)
    life = services.get(LifecyclePoint)
    assert life.listens("SubagentStop") and not life.listens("PreCompact")
    result = asyncio.run(life.fire("SubagentStop", {"agent_type": "reviewer"}, match="reviewer"))
    assert result.blocked and result.reason == "keep going"
    payload = json.loads(seen.read_text())
    assert payload["hook_event_name"] == "SubagentStop" and payload["agent_type"] == "reviewer"
