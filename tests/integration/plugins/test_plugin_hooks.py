"""Plugin hooks (SPEC 4): ``<plugin>/hooks/hooks.json`` from ``RuntimeOptions.plugin_dirs``, with
``${CLAUDE_PLUGIN_ROOT}`` expanded, inert inside an untrusted project; and a session without hooks
never loads the hook dispatcher."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.app.runtime import Runtime
from agentkeel.core.events import Event, Notice
from agentkeel.models.fake.server import FakeLLMServer
from kit import run_session, session

Fake = Callable[[Any], FakeLLMServer]

GUARD = r"""
import json, os, sys
data = json.load(sys.stdin)
with open(os.environ["PLUGIN_LOG"], "a") as f:
    f.write(json.dumps({"root": os.environ.get("CLAUDE_PLUGIN_ROOT"), "argv": sys.argv[1:]}) + "\n")
if "forbidden" in data["tool_input"].get("command", ""):
    print("the plugin forbids this", file=sys.stderr)
    sys.exit(2)
"""


def _plugin(root: Path) -> Path:
    (root / "hooks").mkdir(parents=True)
    (root / "guard.py").write_text(GUARD)
    command = f"{sys.executable} ${{CLAUDE_PLUGIN_ROOT}}/guard.py ${{CLAUDE_PLUGIN_ROOT}}"
    hooks = {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": command}]}]}
    (root / "hooks" / "hooks.json").write_text(json.dumps({"description": "a guard", "hooks": hooks}))
    return root


async def _run(project: Path, server: FakeLLMServer, plugin: Path, log: Path) -> tuple[list[str], Runtime]:
    env = {"PLUGIN_LOG": str(log)}
    rt = session(project, server=server, retries=None, env=env, allowed_tools=["Bash"], plugin_dirs=(plugin,))
    notices: list[str] = []

    def on(event: Event) -> None:
        if isinstance(event, Notice):
            notices.append(event.message)

    rt.bus.subscribe(on)
    await run_session(rt, "go")
    return notices, rt


async def test_plugin_hooks_run_with_their_root(project: Path, tmp_path: Path, fake_llm: Fake) -> None:
    plugin = _plugin(tmp_path / "plugins" / "guard")
    log = tmp_path / "plugin.log"
    bash = {"tool_calls": [{"name": "Bash", "input": {"command": "echo forbidden"}}]}
    server = fake_llm({"steps": [bash, "done"]})
    await _run(project, server, plugin, log)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert entries == [{"root": str(plugin.resolve()), "argv": [str(plugin.resolve())]}]
    last = json.dumps(server.cursor.requests[1]["body"]["messages"][-1])
    assert "the plugin forbids this" in last


async def test_plugin_inside_an_untrusted_project_is_inert(project: Path, tmp_path: Path, fake_llm: Fake) -> None:
    (project / ".keel").mkdir()
    (project / ".keel" / "settings.json").write_text("{}")  # something to trust, not trusted
    plugin = _plugin(project / "plugins" / "guard")
    log = tmp_path / "plugin.log"
    bash = {"tool_calls": [{"name": "Bash", "input": {"command": "echo forbidden"}}]}
    server = fake_llm({"steps": [bash, "done"]})
    notices, _ = await _run(project, server, plugin, log)
    assert not log.exists()
    assert any("plugin inside this untrusted project are inert" in n for n in notices)


def test_hooks_list_shows_plugin_hooks_with_their_file(project: Path, tmp_path: Path) -> None:
    plugin = _plugin(tmp_path / "plugins" / "guard")
    keel = str(Path(sys.executable).parent / "keel")
    out = subprocess.run(
        [keel, "hooks", "list", "--json", "--plugin-dir", str(plugin)], cwd=project, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    rows = [r for r in json.loads(out.stdout)["hooks"] if r["scope"] != "builtin"]  # not memory's
    assert [(r["event"], r["scope"], r["source"]) for r in rows] == [
        ("PreToolUse", "plugin", str(plugin.resolve() / "hooks" / "hooks.json"))
    ]
    assert rows[0]["handler"].startswith(sys.executable) and "CLAUDE_PLUGIN_ROOT" not in rows[0]["handler"]


async def test_hooks_of_a_plugin_that_settings_enable_run_too(project: Path, tmp_path: Path, fake_llm: Fake) -> None:
    """``enabledPlugins`` with a directory marketplace: that plugin's hooks/hooks.json runs, as a
    ``--plugin-dir`` one's does."""
    plugin = _plugin(tmp_path / "market" / "plugins" / "guard")
    (plugin / ".claude-plugin").mkdir()
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "guard"}))
    market = tmp_path / "market"
    (market / ".claude-plugin").mkdir()
    listing = {"name": "local", "plugins": [{"name": "guard", "source": "./plugins/guard"}]}
    (market / ".claude-plugin" / "marketplace.json").write_text(json.dumps(listing))
    settings = tmp_path / "enable.json"
    marketplaces = {"local": {"source": {"source": "directory", "path": str(market)}}}
    settings.write_text(json.dumps({"enabledPlugins": {"guard@local": True}, "extraKnownMarketplaces": marketplaces}))
    server = fake_llm({"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": "echo forbidden"}}]}, "ok"]})
    log = tmp_path / "plugin.log"
    env = {"PLUGIN_LOG": str(log)}
    rt = session(project, server=server, retries=None, env=env, allowed_tools=["Bash"], settings_files=[settings])
    await run_session(rt, "go")
    assert json.loads(log.read_text().splitlines()[0])["root"] == str(plugin.resolve())
    assert "the plugin forbids this" in json.dumps(server.cursor.requests[1]["body"]["messages"])
