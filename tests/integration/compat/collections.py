"""The collections fixture (tests/data/compat/collections): four public MIT-licensed Claude Code
configurations, and how to read the agent and skill listings out of a request body.

Shared by the recording of Claude Code 2.1.328 (tests/data/compat/record_claude_collections.py)
and keel's side (test_collections.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "data" / "compat"
FIXTURE = DATA / "collections"
RECORDING = DATA / "claude-code-2.1.328-collections.json"
PROMPT = "hello"
MODEL = "claude-sonnet-4-5"
# the two listing budgets recorded: Claude Code's default for this model (8,000 characters: names
# only, at this size) and one large enough for every description
BUDGETS = {"default": None, "whole": "1000000"}
# the agents each agent ships itself; not part of the comparison
OWN_AGENTS = {"general-purpose", "Explore", "Plan", "claude", "statusline-setup"}
AGENTS_HEAD = "Available agent types"
SKILLS_HEAD = "The following skills are available for use with the Skill tool:"


def build(root: Path) -> tuple[Path, Path, Path]:
    """The project, the home folder and the folder of plugins, copied under ``root``."""
    project, home, plugins = root / "project", root / "home", root / "plugins"
    shutil.copytree(FIXTURE / "project", project)
    shutil.copytree(FIXTURE / "home", home)
    shutil.copytree(FIXTURE / "plugins", plugins)
    return project, home, plugins


def texts(body: dict[str, Any]) -> str:
    """Every text the request carries: tool descriptions, system blocks, message text blocks."""
    parts = [str(t.get("description", "")) for t in body.get("tools", [])]
    system = body.get("system") or []
    parts += [system] if isinstance(system, str) else [str(b.get("text", "")) for b in system]
    for message in body.get("messages", []):
        content = message.get("content")
        blocks = [{"text": content}] if isinstance(content, str) else content
        parts += [str(b.get("text", "")) for b in blocks if isinstance(b, dict)]
    return "\n".join(parts)


def _block(text: str, head: str) -> list[str]:
    """The ``- `` lines of the listing that starts at ``head``, up to its first other line (of the
    places ``head`` appears, the one with the longest listing: tool guidance has short ones)."""
    best: list[str] = []
    start = text.find(head)
    while start >= 0:
        out: list[str] = []
        for line in text[start:].splitlines()[1:]:
            if line.startswith("- "):
                out.append(line)
            elif out and line.strip():
                break
        best = out if len(out) > len(best) else best
        start = text.find(head, start + 1)
    return best


def listings(body: dict[str, Any]) -> dict[str, list[str]]:
    """The agent lines (Claude Code's own agents left out) and the skill lines of one request."""
    text = texts(body)
    agents = [line for line in _block(text, AGENTS_HEAD) if _name(line) not in OWN_AGENTS]
    return {"agents": agents, "skills": _block(text, SKILLS_HEAD)}


def _name(line: str) -> str:
    return line[2:].split(": ", 1)[0].split(" (", 1)[0]


def defined(lines: list[str], names: set[str]) -> list[str]:
    """The lines of entries the fixture defines (each agent's bundled skills left out)."""
    return [line for line in lines if _name(line) in names]


# Claude Code's bundled skills (listed after everything else; keel has none of its own)
BUNDLED = {
    "claude-api",
    "code-review",
    "dataviz",
    "fewer-permission-prompts",
    "init",
    "keybindings-help",
    "loop",
    "plugin-authoring",
    "run",
    "security-review",
    "simplify",
    "update-config",
    "workflow-authoring",
}
# differences kept on purpose (docs/compatibility.md): wshobson's pptx-deck-creation lists its agents
# folder as "./agents" in plugin.json, which Claude Code 2.1.328 refuses (the whole plugin is not
# loaded); keel loads it
LENIENT_PLUGINS = ("pptx-deck-creation:",)


def comparable(lines: list[str]) -> list[str]:
    """The lines both agents should write the same. One difference is kept on purpose
    (docs/compatibility.md): an agent with ``tools: []`` runs with no tools under both, but Claude
    Code lists it as "(Tools: All tools)"; keel says "(Tools: no tools)"."""
    return [
        line.replace("(Tools: no tools)", "(Tools: All tools)")
        for line in lines
        if _name(line) not in BUNDLED and _name(line) not in OWN_AGENTS and not _name(line).startswith(LENIENT_PLUGINS)
    ]
