"""The real-world-shaped Claude Code project of the compatibility check, and its scripted plan.

Built the same way for the recording of Claude Code 2.1.328 (``record_claude.py``) and for keel
(``test_real_project.py``). Sources and licences: tests/data/compat/SOURCES.md.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "data"

PROMPT = "compat check: review and note"

# a project command shaped as disler/claude-code-hooks-mastery `.claude/commands/plan.md`: it shares
# its name with a keel built-in, and its argument-hint is not strict YAML
PLAN_COMMAND = """---
description: Creates a concise engineering implementation plan based on user requirements
argument-hint: [user prompt] [orchestration prompt]
model: opus
---
# Plan

Create a plan for: $ARGUMENTS
Save it to specs/<name>.md. Budget: $1.00 per step.
"""

# an agent shaped as the official plugins' agents (anthropics/claude-code plugins/*/agents):
# a description with `: ` and <example> blocks inside, which is not strict YAML
REVIEWER_AGENT = (
    "---\n"
    "name: code-reviewer\n"
    "description: Use this agent when code needs review. Examples: <example>Context: The user wrote a function."
    ' user: "Review it" assistant: "I\'ll use the code-reviewer agent"</example>\n'
    "tools: Read, Grep, Glob\n"
    "model: inherit\n"
    "---\n"
    "You are a code reviewer. Report issues with file:line references.\n"
)

# hooks shaped as disler/claude-code-hooks-mastery: each event's hook appends its stdin payload
HOOK = (
    'python3 -c "import json,sys,os; p=json.load(sys.stdin); '
    "open(os.environ['CLAUDE_PROJECT_DIR']+'/hooks.jsonl','a').write(json.dumps(p)+chr(10))\""
)
EVENTS = ("UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")


def build(project: Path) -> None:
    """Lay the fixture out in ``project`` (an empty folder)."""
    skill = project / ".claude" / "skills" / "requesting-code-review"
    skill.mkdir(parents=True)
    shutil.copy(DATA / "expand" / "requesting-code-review" / "SKILL.md.txt", skill / "SKILL.md")
    commands = project / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "plan.md").write_text(PLAN_COMMAND)
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "code-reviewer.md").write_text(REVIEWER_AGENT)
    hooks: dict[str, Any] = {}
    for event in EVENTS:
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": HOOK}]}
        if event in ("PreToolUse", "PostToolUse"):
            entry["matcher"] = "Write|Edit|Skill"
        hooks[event] = [entry]
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}, indent=2) + "\n")


def plan(project: Path) -> list[Any]:
    """The scripted model's steps: load the skill, write a file, answer."""
    return [
        {"text": "Loading the skill.", "tool_calls": [{"name": "Skill", "input": {"skill": "requesting-code-review"}}]},
        {
            "text": "Writing the note.",
            "tool_calls": [
                {"name": "Write", "input": {"file_path": str(project / "notes.txt"), "content": "reviewed\n"}}
            ],
        },
        "Done.",
    ]
