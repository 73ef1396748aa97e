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
