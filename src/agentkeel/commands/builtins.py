"""keel's built-in slash commands: each one decorated ``async def NAME(session, args) -> str``.

/compact /context /cost /memory belong to the context subsystem, /mcp to the MCP client, /sandbox
to the CLI, /rewind and /fork to the session history; they are named by ``"module:function"``
strings (``BUILTIN.elsewhere``), imported at first use.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentkeel.commands.registry import Command, CommandFailed, CommandRegistry, CommandTable
from agentkeel.config.settings import LoadedSettings
from agentkeel.config.trust import TrustState
from agentkeel.core.handle import SessionHandle
from agentkeel.core.types import TextBlock, ToolResultBlock, ToolUseBlock
from agentkeel.models.catalog import ModelConfigError, ModelInfo, resolve_model
from agentkeel.policy.permissions import PermissionEngine

BUILTIN = CommandTable()  # every built-in command, in /help's order within its kind


def _engine(session: SessionHandle) -> PermissionEngine:
    return session.agent.services.get(PermissionEngine)


INIT_PROMPT = """Please analyse this codebase and create an AGENTS.md file in the repository root, which will be given \
to future coding agents working in this repository.

What to add:
1. The commands that are commonly used: how to build, lint and run the tests, including how to run a single test.
2. The high-level architecture and structure: the big picture that takes reading several files to understand.

Usage notes:
- If there is already an AGENTS.md (or CLAUDE.md), suggest improvements to it instead of starting over.
- Do not repeat yourself and do not list every file or obvious generic practices.
- Include the important parts of README.md, .cursor/rules, .github/copilot-instructions.md if they exist.
- Begin the file with: "# AGENTS.md" and one line saying it guides coding agents working in this repository."""

REVIEW_PROMPT = """You are an expert code reviewer. Review the current changes in this repository{target}:
1. Run `git status` and `git diff` (and `git diff --staged`) to see the changes.
2. Read the changed files where the diff is not enough to judge.
3. Report, most important first: bugs and regressions, security problems, missing tests, unclear code.
Be concise and specific (file:line). Do not change any file."""


@BUILTIN.command("help", "Show the slash commands", aliases=("?",))
async def help_(session: SessionHandle, args: str) -> str:
    registry = session.agent.services.get(CommandRegistry)
    lines = ["Slash commands:"]
    for command in registry:
        hint = f" {command.argument_hint}" if command.argument_hint else ""
        alias = f" (also /{', /'.join(command.aliases)})" if command.aliases else ""
        tag = "" if command.kind == "builtin" else f" [{command.source}]"
        lines.append(f"  /{command.name}{hint}  {command.description}{alias}{tag}")
    return "\n".join(lines)


@BUILTIN.command("exit", "Leave keel (the session is kept: keel -c resumes it)", aliases=("quit",))
async def exit_(session: SessionHandle, args: str) -> str:
    """The TUI and the line mode leave on ``/exit`` before any command runs; listed for /help."""
    return "/exit and /quit leave an interactive session (the TUI, the line mode); here there is nothing to leave."


@BUILTIN.command("clear", "Start a fresh context (the transcript keeps the history)", aliases=("reset",))
async def clear(session: SessionHandle, args: str) -> str:
    from agentkeel.session.history import cleared

    session.agent.append(cleared())
    return "Conversation cleared: the next prompt starts a fresh context (the transcript keeps the history)."


@BUILTIN.command("model", "Show or switch the model", argument_hint="[model]")
async def model(session: SessionHandle, args: str) -> str:
    agent = session.agent
    if not args:
        return f"Model: {agent.config.model}"
    try:
        info = resolve_model(args.strip(), {**os.environ, **agent.context.env})
    except ModelConfigError as e:
        raise CommandFailed(str(e)) from None
    provider = session.agent.services.get(ModelInfo).provider
    if info.provider != provider:
        raise CommandFailed(f"/model can switch within {provider} only; start keel with --model {args}")
    agent.config.model = info.model
    return f"Model set to {info.model}"


@BUILTIN.command("permissions", "Show the permission mode and rules", aliases=("allowed-tools",))
async def permissions(session: SessionHandle, args: str) -> str:
    """Mode, working directories, then deny, ask, allow with their sources (as `keel permissions list`)."""
    engine = _engine(session)
    lines = [
        f"Permission mode: {engine.mode}",
        "Working directories: " + ", ".join([engine.cwd, *engine.additional_dirs]),
    ]
    for kind in ("deny", "ask", "allow"):
        rules = engine.rules_of(kind)
        lines.append(f"{kind.capitalize()} rules ({len(rules)}):")
        lines += [f"  {r.text:<40} {r.source}" for r in rules] or ["  (none)"]
    for channel, rules in engine.channel_rules.items():
        lines.append(f"Channel {channel}: " + ", ".join(f"{r.kind} {r.text}" for r in rules))
    if engine.groups:
        lines.append("Groups: " + ", ".join(f"{g}={v}" for g, v in engine.groups.items()))
    lines += [f"warning: {w}" for w in engine.warnings]
    return "\n".join(lines)


@BUILTIN.command("hooks", "Show the configured hooks")
async def hooks(session: SessionHandle, args: str) -> str:
    lines = []
    for layer in session.agent.services.get(LoadedSettings).layers:
        configured = layer.data.get("hooks")
        if isinstance(configured, dict):
            for event, entries in configured.items():
                count = len(entries) if isinstance(entries, list) else 1
                lines.append(f"  {event}: {count} matcher group(s)  ({layer.path})")
    return "Hooks:\n" + "\n".join(lines) if lines else "No hooks configured (see `keel hooks`)."


@BUILTIN.command("agents", "List the subagent types")
async def agents(session: SessionHandle, args: str) -> str:
    from agentkeel.agents.spawner import SubagentSpawner

    spawner = session.agent.services.find(SubagentSpawner)
    if spawner is None:
        return "Subagents are off in this session."
    lines = ["Agents (Task subagent_type):"]
    lines += [f"  {a.name} [{a.source}]  {a.description[:100]}" for a in spawner.catalog]
    return "\n".join(lines)


@BUILTIN.command("skills", "List the skills")
async def skills(session: SessionHandle, args: str) -> str:
    from agentkeel.skills.loader import SkillCatalog

    catalog = session.agent.services.get(SkillCatalog)
    if not len(catalog):
        return "No skills (add .claude/skills/<name>/SKILL.md or .keel/skills/<name>/SKILL.md)."
    lines = ["Skills:"]
    for s in catalog:
        mode = " (fork)" if s.fork else ""
        lines.append(f"  /{s.name}{mode} [{s.source}]  {s.description[:100]}")
    return "\n".join(lines)


@BUILTIN.command("status", "Show the session's status")
async def status(session: SessionHandle, args: str) -> str:
    agent = session.agent
    return "\n".join(
        [
            f"Session: {session.session_id}",
            f"Transcript: {session.session_path}",
            f"Model: {agent.config.model}",
            f"Working directory: {agent.context.cwd}",
            f"Permission mode: {_engine(session).mode}",
            f"Trusted folder: {'yes' if session.agent.services.get(TrustState).trusted else 'no'}",
            f"Tools: {len(agent.tools.visible(agent.ext.hides))}",
            f"Turns so far: {agent.prompts} prompt(s), cost ${agent.cost_usd:.4f}",
        ]
    )


@BUILTIN.command("todos", "Show the todo list")
async def todos(session: SessionHandle, args: str) -> str:
    from agentkeel.tools.todo import TodoState

    items = session.agent.services.get(TodoState).todos
    if not items:
        return "No todos."
    marks = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}
    return "\n".join(f"{marks.get(t.get('status', ''), '[ ]')} {t.get('content', '')}" for t in items)


@BUILTIN.command("resume", "List sessions to resume")
async def resume(session: SessionHandle, args: str) -> str:
    from agentkeel.session.load import list_sessions

    sessions = list_sessions(session.session_path.parent)[:10]
    lines = ["Recent sessions (resume one with `keel -r ID`):"]
    lines += [f"  {s.id}  {s.first_prompt[:60]}" for s in sessions]
    return "\n".join(lines)


@BUILTIN.command("export", "Export the conversation as Markdown", argument_hint="[file]")
async def export(session: SessionHandle, args: str) -> str:
    target = Path(args.strip() or f"keel-session-{session.session_id[:8]}.md").expanduser()
    if not target.is_absolute():
        target = session.agent.context.cwd / target
    lines = [f"# keel session {session.session_id}\n"]
    for message in session.agent.messages:
        lines.append(f"## {message.role}\n")
        for block in message.content:
            if isinstance(block, TextBlock):
                lines.append(block.text + "\n")
            elif isinstance(block, ToolUseBlock):
                lines.append(f"```tool_use {block.name}\n{json.dumps(block.input, indent=1)}\n```\n")
            elif isinstance(block, ToolResultBlock):
                content = block.content if isinstance(block.content, str) else "[content blocks]"
                lines.append(f"```tool_result\n{content[:4000]}\n```\n")
    try:
        target.write_text("\n".join(lines), encoding="utf-8")
    except OSError as e:
        raise CommandFailed(f"cannot write {target}: {e.strerror or e}") from None
    return f"Conversation exported to {target}"


@BUILTIN.command("plan", "Switch to plan mode (read-only tools)")
async def plan(session: SessionHandle, args: str) -> str:
    _engine(session).mode = "plan"
    return "Plan mode: only read-only tools run until you change the mode."


COMMIT_PROMPT = """Create a git commit of the current changes:
1. Run `git status`, `git diff` and `git diff --staged`, and `git log -5 --oneline` for the message style.
2. Stage the files that belong to this change (never secrets such as .env or credentials).
3. Write a concise message that says why, in the repository's style, and commit.
4. Run `git status` to show the result. Do not push."""


@BUILTIN.command("commit", "Commit the current changes", argument_hint="[notes]", expands=True)
async def commit_prompt(session: SessionHandle, args: str) -> str:
    return COMMIT_PROMPT + (f"\n\nAlso: {args}" if args else "")


@BUILTIN.command("config", "Show the settings files in effect")
async def config(session: SessionHandle, args: str) -> str:
    lines = ["Settings files in effect (lowest precedence first):"]
    lines += [f"  [{layer.scope}] {layer.path}" for layer in session.agent.services.get(LoadedSettings).layers] or [
        "  (none)"
    ]
    lines.append(f"Model: {session.agent.config.model}   Permission mode: {_engine(session).mode}")
    return "\n".join(lines)


@BUILTIN.command("init", "Draft AGENTS.md for this repository", argument_hint="[notes]", expands=True)
async def init_prompt(session: SessionHandle, args: str) -> str:
    return INIT_PROMPT + (f"\n\nAlso: {args}" if args else "")


@BUILTIN.command("review", "Review the current changes", argument_hint="[what]", expands=True)
async def review_prompt(session: SessionHandle, args: str) -> str:
    return REVIEW_PROMPT.format(target=f" ({args})" if args else "")


@BUILTIN.command(
    "coordinate",
    "Plan a task as a graph of subtasks and run them in parallel subagents",
    argument_hint="<task>",
)
async def coordinate(session: SessionHandle, args: str) -> str:
    from agentkeel.agents.coordinator import coordinate_command

    return await coordinate_command(session, args)


BUILTIN.elsewhere(
    "compact", "agentkeel.context.commands:compact", "Summarise the conversation to free context", "[instructions]"
)
BUILTIN.elsewhere("context", "agentkeel.context.commands:context", "Show what fills the context window")
BUILTIN.elsewhere("cost", "agentkeel.context.commands:cost", "Show the session's token use and cost")
BUILTIN.elsewhere("memory", "agentkeel.context.commands:memory", "Show or edit memory and instruction files")
BUILTIN.elsewhere(
    "sandbox",
    "agentkeel.ui.cli.sandbox:slash",
    "Show the Bash sandbox's status; turn sandbox mode on or off for this session",
    "[on|off]",
)
BUILTIN.elsewhere(
    "rewind",
    "agentkeel.commands.rewind:rewind_command",
    "Go back to before an earlier turn: code, conversation or both",
    "[N [code|conversation|both] [--force]]",
)
BUILTIN.elsewhere(
    "fork", "agentkeel.commands.rewind:fork_command", "Copy this session into a new one to branch it", "[N]"
)
BUILTIN.elsewhere(
    "mcp",
    "agentkeel.mcp.command:mcp",
    "Show the MCP servers; reconnect, enable or disable one",
    "[reconnect|enable|disable <server>]",
)


def builtin_commands() -> list[Command]:
    return BUILTIN.commands()


def register_builtins(registry: CommandRegistry) -> None:
    for command in builtin_commands():
        registry.register(command)
