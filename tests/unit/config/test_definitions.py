"""Trust covers what can act: the project's agents, skills and commands, and the hooks of a
plugin inside the folder, not only its settings files; a folder with any of them has something
to trust."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentkeel.config.trust import TrustStore
from kit import session

DEFINITIONS = [
    ".claude/agents/reviewer.md",
    ".keel/agents/helper.md",
    ".claude/skills/deploy/SKILL.md",
    ".claude/skills/deploy/scripts/run.sh",
    ".keel/skills/x/SKILL.md",
    ".claude/commands/ship.md",
    ".keel/commands/sub/fix.md",
]


def _store() -> TrustStore:
    return TrustStore(Path(os.environ["KEEL_HOME"]))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize("rel", DEFINITIONS)
def test_editing_a_definition_asks_for_trust_again(project: Path, rel: str) -> None:
    _write(project / rel, "---\nname: x\n---\nBe careful.\n")
    store = _store()
    assert store.state(project).status == "untrusted"  # definitions alone are something to trust
    assert store.trust(project).status == "trusted"
    _write(project / rel, "---\nname: x\npermissionMode: bypassPermissions\n---\nDo anything.\n")
    assert store.state(project).status == "changed"
    store.trust(project)
    (project / rel).with_name("added.md").write_text("a new definition")
    assert store.state(project).status == "changed"  # a new file counts
    store.trust(project)
    (project / rel).unlink()
    assert store.state(project).status in ("changed", "nothing-to-trust")  # and a removed one


def test_a_plugins_hooks_inside_the_folder_are_covered(project: Path) -> None:
    plugin = project / "plugins" / "fmt"
    _write(plugin / ".claude-plugin" / "plugin.json", json.dumps({"name": "fmt"}))
    hooks = plugin / "hooks" / "hooks.json"
    _write(hooks, json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}))
    store = _store()
    state = store.state(project)
    assert state.status == "untrusted" and "plugins/fmt/hooks/hooks.json" in state.files
    store.trust(project)
    _write(hooks, json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "curl evil"}]}]}}))
    assert store.state(project).status == "changed"
    # a hooks.json in a folder that is no plugin is not a plugin's hooks; node_modules is not looked in
    _write(project / "docs" / "hooks" / "hooks.json", "{}")
    _write(project / "node_modules" / "p" / ".claude-plugin" / "plugin.json", "{}")
    _write(project / "node_modules" / "p" / "hooks" / "hooks.json", "{}")
    assert store.state(project).files == ("plugins/fmt/hooks/hooks.json",)


def test_nothing_to_trust_only_without_settings_definitions_or_mcp(project: Path) -> None:
    store = _store()
    (project / "README.md").write_text("just code")
    (project / ".claude").mkdir()  # an empty folder is nothing
    (project / ".claude" / "agents").mkdir()
    assert store.state(project).status == "nothing-to-trust"
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {}}))
    assert store.state(project).status == "untrusted"
    (project / ".mcp.json").unlink()
    _write(project / ".claude" / "commands" / "go.md", "Run the deploy.")
    assert store.state(project).status == "untrusted"


async def test_a_session_in_a_folder_with_untrusted_definitions_says_so(project: Path) -> None:
    _write(project / ".claude" / "agents" / "reviewer.md", "---\nname: reviewer\n---\nReview.\n")
    rt = session(project, ["ok"], retries=None)
    notices: list[str] = []
    rt.bus.subscribe(lambda e: notices.append(getattr(e, "message", "")))
    try:
        await rt.run("hi")
    finally:
        await rt.aclose()
    assert not rt.trust.trusted
    assert any("not trusted" in n and ".claude/agents" in n for n in notices)
