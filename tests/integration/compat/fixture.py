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


# -- the plugin scenario -------------------------------------------------------------------------------

PLUGIN_PROMPT = "/toolkit:commit"

# shaped as github.com/anthropics/claude-code plugins/commit-commands/commands/commit.md (its
# frontmatter and !`cmd` lines; the prose is our own)
COMMIT_COMMAND = """---
allowed-tools: Bash(git add:*), Bash(git status:*), Bash(git commit:*)
description: Create a git commit
---

## Context

- Current git status: !`git status`
- Current branch: !`git branch --show-current`
- Recent commits: !`git log --oneline -10`

## Your task

Stage the changes above and create one git commit. Use only tool calls.
"""

# a plugin agent with no name (plugins may leave it out), shaped as the official plugins' agents
SIMPLIFIER_AGENT = """---
description: Simplifies recently changed code without changing behaviour
model: inherit
---
You simplify code.
"""

FIXED_DATE = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def build_plugin(project: Path, plugins: Path, env: dict[str, str]) -> None:
    """A git project with one commit and an untracked notes.txt; a folder of plugins holding
    ``toolkit`` (a skill, a command, an agent, a PostToolUse hook on Bash)."""
    import subprocess

    git_env = {**env, **FIXED_DATE}
    for args in (
        ["init", "-q"],
        ["config", "user.name", "Test User"],
        ["config", "user.email", "test@example.invalid"],
        ["config", "commit.gpgsign", "false"],
    ):
        subprocess.run(["git", *args], cwd=project, check=True, env=git_env)
    (project / "README.md").write_text("demo\n")
    subprocess.run(["git", "add", "README.md"], cwd=project, check=True, env=git_env)
    subprocess.run(["git", "commit", "-q", "-m", "initial"], cwd=project, check=True, env=git_env)
    (project / "notes.txt").write_text("reviewed\n")
    plugin = plugins / "toolkit"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "toolkit", "version": "0.1.0"}\n')
    skill = plugin / "skills" / "brainstorming"
    skill.mkdir(parents=True)
    shutil.copy(DATA / "compat" / "brainstorming" / "SKILL.md.txt", skill / "SKILL.md")
    (plugin / "commands").mkdir()
    (plugin / "commands" / "commit.md").write_text(COMMIT_COMMAND)
    (plugin / "agents").mkdir()
    (plugin / "agents" / "code-simplifier.md").write_text(SIMPLIFIER_AGENT)
    (plugin / "hooks").mkdir()
    hooks = {"hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": HOOK}]}]}}
    (plugin / "hooks" / "hooks.json").write_text(json.dumps(hooks, indent=2) + "\n")


def plugin_plan() -> list[Any]:
    """Stage, commit, answer: the calls the command's allowed-tools grant."""
    return [
        {"text": "", "tool_calls": [{"name": "Bash", "input": {"command": "git add notes.txt"}}]},
        {"text": "", "tool_calls": [{"name": "Bash", "input": {"command": "git commit -m 'add notes'"}}]},
        "Committed.",
    ]
