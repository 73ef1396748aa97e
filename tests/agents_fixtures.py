"""A Claude Code project fixture: agents, skills, commands and a plugin, as a real project keeps them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

REVIEWER = """---
name: reviewer
description: Reviews code for bugs. Use after a change.
tools: Read, Grep
model: inherit
maxTurns: 5
skills: style
---
You are a strict code reviewer. Report bugs only, with file:line.
"""

RELEASE = """---
name: release
description: Cut a release of the project
argument-hint: <version>
---
Release version $ARGUMENTS now.
Last commit: !`git log -1 --format=%s`
"""

FIX_ISSUE = """---
description: Fix a GitHub issue
argument-hint: <number>
---
Fix issue #$ARGUMENTS following our coding standards, then run the tests.
"""

PLUGIN_MANIFEST = {"name": "shipit", "version": "1.0.0", "description": "release helpers"}
PLUGIN_COMMAND = """---
description: Say hello from the plugin
---
Plugin hello to $0 (root ${CLAUDE_PLUGIN_ROOT}).
"""
PLUGIN_AGENT = """---
name: helper
description: The plugin's helper agent
tools: [LS]
---
You are the shipit helper agent.
"""
PLUGIN_SKILL = """---
name: tips
description: Shipping tips from the plugin
---
Tip: ship small changes ($ARGUMENTS).
"""
PLUGIN_HOOKS = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}]}}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


STYLE = """---
description: House style
user-invocable: false
---
Prefer early returns.
"""


def claude_project(project: Path) -> None:
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "reviewer.md").write_text(REVIEWER)
    (project / ".claude" / "skills" / "release").mkdir(parents=True)
    (project / ".claude" / "skills" / "release" / "SKILL.md").write_text(RELEASE)
    (project / ".claude" / "skills" / "style").mkdir(parents=True)
    (project / ".claude" / "skills" / "style" / "SKILL.md").write_text(STYLE)
    (project / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "fix-issue.md").write_text(FIX_ISSUE)
    (project / "a.py").write_text("def f():\n    return 1\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "add the first feature")


def plugin(root: Path) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(PLUGIN_MANIFEST))
    (root / "commands").mkdir()
    (root / "commands" / "hello.md").write_text(PLUGIN_COMMAND)
    (root / "agents").mkdir()
    (root / "agents" / "helper.md").write_text(PLUGIN_AGENT)
    (root / "skills" / "tips").mkdir(parents=True)
    (root / "skills" / "tips" / "SKILL.md").write_text(PLUGIN_SKILL)
    (root / "hooks").mkdir()
    (root / "hooks" / "hooks.json").write_text(json.dumps(PLUGIN_HOOKS))
    return root


def marketplace_settings(tmp: Path, plugin_root: Path) -> Path:
    """A settings file enabling the plugin from a local marketplace folder."""
    market = tmp / "market"
    (market / ".claude-plugin").mkdir(parents=True)
    rel = Path("..") / plugin_root.relative_to(tmp)
    listing = {"name": "local", "plugins": [{"name": "shipit", "source": str(rel)}]}
    (market / ".claude-plugin" / "marketplace.json").write_text(json.dumps(listing))
    settings = tmp / "plugin-settings.json"
    settings.write_text(
        json.dumps(
            {
                "enabledPlugins": {"shipit@local": True},
                "extraKnownMarketplaces": {"local": {"source": {"source": "directory", "path": str(market)}}},
            }
        )
    )
    return settings


def sessions_dir(keel_home: Path) -> Path:
    [folder] = list((keel_home / "projects").iterdir())
    return folder


def child_transcripts(keel_home: Path) -> list[Path]:
    return sorted((keel_home / "projects").glob("*/*/subagents/agent-*.jsonl"))


def metas(keel_home: Path) -> list[dict[str, Any]]:
    out = []
    for p in sorted((keel_home / "projects").glob("*/*/subagents/agent-*.meta.json")):
        out.append(json.loads(p.read_text()))
    return out


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system", "")
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system)
    return str(system)


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["name"] for t in body.get("tools", [])]


def first_user_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for message in body["messages"]:
        if isinstance(message["content"], list):
            out += [b for b in message["content"] if b.get("type") == "tool_result"]
    return out


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content)
    return str(content)
