"""keel's built-in slash commands: ``async def NAME(runtime, args) -> str``.

/compact /context /cost /memory belong to the context subsystem, /mcp to the MCP client; they
are named by ``"module:function"`` strings, imported at first use.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agentkeel.commands.registry import Command, CommandFailed, CommandRegistry

OTHERS = {
    "compact": ("agentkeel.context.commands:compact", "Summarise the conversation to free context", "[instructions]"),
    "context": ("agentkeel.context.commands:context", "Show what fills the context window", ""),
    "cost": ("agentkeel.context.commands:cost", "Show the session's token use and cost", ""),
    "memory": ("agentkeel.context.commands:memory", "Show or edit memory and instruction files", ""),
    "sandbox": (
        "agentkeel.cli.sandbox:slash",
        "Show the Bash sandbox's status; turn sandbox mode on or off for this session",
        "[on|off]",
    ),
    "rewind": (
        "agentkeel.commands.rewind:rewind_command",
        "Go back to before an earlier turn: code, conversation or both",
        "[N [code|conversation|both] [--force]]",
    ),
    "fork": ("agentkeel.commands.rewind:fork_command", "Copy this session into a new one to branch it", "[N]"),
    "mcp": (
        "agentkeel.mcpclient.command:mcp",
        "Show the MCP servers; reconnect, enable or disable one",
        "[reconnect|enable|disable <server>]",
    ),
}

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


async def help_(runtime: Any, args: str) -> str:
    registry = runtime.agent.services.get(CommandRegistry)
    lines = ["Slash commands:"]
    for command in registry:
        hint = f" {command.argument_hint}" if command.argument_hint else ""
        alias = f" (also /{', /'.join(command.aliases)})" if command.aliases else ""
        tag = "" if command.kind == "builtin" else f" [{command.source}]"
        lines.append(f"  /{command.name}{hint}  {command.description}{alias}{tag}")
    return "\n".join(lines)


async def exit_(runtime: Any, args: str) -> str:
    """The TUI and the line mode leave on ``/exit`` before any command runs; listed for /help."""
    return "/exit and /quit leave an interactive session (the TUI, the line mode); here there is nothing to leave."


async def clear(runtime: Any, args: str) -> str:
    from agentkeel.session.history import cleared

    runtime.agent.append(cleared())
    return "Conversation cleared: the next prompt starts a fresh context (the transcript keeps the history)."


async def model(runtime: Any, args: str) -> str:
    agent = runtime.agent
    if not args:
        return f"Model: {agent.config.model}"
    from agentkeel.providers.catalog import ModelConfigError, resolve_model

    try:
        info = resolve_model(args.strip(), {**os.environ, **agent.context.env})
    except ModelConfigError as e:
        raise CommandFailed(str(e)) from None
    if info.provider != runtime.model.provider:
        raise CommandFailed(f"/model can switch within {runtime.model.provider} only; start keel with --model {args}")
    agent.config.model = info.model
    return f"Model set to {info.model}"


async def permissions(runtime: Any, args: str) -> str:
    """Mode, working directories, then deny, ask, allow with their sources (as `keel permissions list`)."""
    engine = runtime.permissions
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


async def hooks(runtime: Any, args: str) -> str:
    lines = []
    for layer in runtime.settings.layers:
        configured = layer.data.get("hooks")
        if isinstance(configured, dict):
            for event, entries in configured.items():
                count = len(entries) if isinstance(entries, list) else 1
                lines.append(f"  {event}: {count} matcher group(s)  ({layer.path})")
    return "Hooks:\n" + "\n".join(lines) if lines else "No hooks configured (see `keel hooks`)."


async def agents(runtime: Any, args: str) -> str:
    from agentkeel.agents.spawner import SubagentSpawner

    spawner = runtime.agent.services.find(SubagentSpawner)
    if spawner is None:
        return "Subagents are off in this session."
    lines = ["Agents (Task subagent_type):"]
    lines += [f"  {a.name} [{a.source}]  {a.description[:100]}" for a in spawner.catalog]
    return "\n".join(lines)


async def skills(runtime: Any, args: str) -> str:
    from agentkeel.skills.loader import SkillCatalog

    catalog = runtime.agent.services.get(SkillCatalog)
    if not len(catalog):
        return "No skills (add .claude/skills/<name>/SKILL.md or .keel/skills/<name>/SKILL.md)."
    lines = ["Skills:"]
    for s in catalog:
        mode = " (fork)" if s.fork else ""
        lines.append(f"  /{s.name}{mode} [{s.source}]  {s.description[:100]}")
    return "\n".join(lines)


async def status(runtime: Any, args: str) -> str:
    agent = runtime.agent
    return "\n".join(
        [
            f"Session: {runtime.session_id}",
            f"Transcript: {runtime.session_path}",
            f"Model: {agent.config.model}",
            f"Working directory: {agent.context.cwd}",
            f"Permission mode: {runtime.permissions.mode}",
            f"Trusted folder: {'yes' if runtime.trust.trusted else 'no'}",
            f"Tools: {len(agent.tools.visible(agent.ext.hides))}",
            f"Turns so far: {agent.prompts} prompt(s), cost ${agent.cost_usd:.4f}",
        ]
    )


async def todos(runtime: Any, args: str) -> str:
    from agentkeel.tools.todo import TodoState

    items = runtime.agent.services.get(TodoState).todos
    if not items:
        return "No todos."
    marks = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}
    return "\n".join(f"{marks.get(t.get('status', ''), '[ ]')} {t.get('content', '')}" for t in items)


async def resume(runtime: Any, args: str) -> str:
    from agentkeel.session.load import list_sessions

    sessions = list_sessions(runtime.session_path.parent)[:10]
    lines = ["Recent sessions (resume one with `keel -r ID`):"]
    lines += [f"  {s.id}  {s.first_prompt[:60]}" for s in sessions]
    return "\n".join(lines)


async def export(runtime: Any, args: str) -> str:
    target = Path(args.strip() or f"keel-session-{runtime.session_id[:8]}.md").expanduser()
    if not target.is_absolute():
        target = runtime.agent.context.cwd / target
    lines = [f"# keel session {runtime.session_id}\n"]
    for message in runtime.agent.messages:
        lines.append(f"## {message.role}\n")
        for block in message.content:
            kind = type(block).__name__
            if kind == "TextBlock":
                lines.append(block.text + "\n")
            elif kind == "ToolUseBlock":
                lines.append(f"```tool_use {block.name}\n{json.dumps(block.input, indent=1)}\n```\n")
            elif kind == "ToolResultBlock":
                content = block.content if isinstance(block.content, str) else "[content blocks]"
                lines.append(f"```tool_result\n{content[:4000]}\n```\n")
    try:
        target.write_text("\n".join(lines), encoding="utf-8")
    except OSError as e:
        raise CommandFailed(f"cannot write {target}: {e.strerror or e}") from None
    return f"Conversation exported to {target}"


async def plan(runtime: Any, args: str) -> str:
    runtime.permissions.mode = "plan"
    return "Plan mode: only read-only tools run until you change the mode."


COMMIT_PROMPT = """Create a git commit of the current changes:
1. Run `git status`, `git diff` and `git diff --staged`, and `git log -5 --oneline` for the message style.
2. Stage the files that belong to this change (never secrets such as .env or credentials).
3. Write a concise message that says why, in the repository's style, and commit.
4. Run `git status` to show the result. Do not push."""


async def commit_prompt(runtime: Any, args: str) -> str:
    return COMMIT_PROMPT + (f"\n\nAlso: {args}" if args else "")


async def config(runtime: Any, args: str) -> str:
    lines = ["Settings files in effect (lowest precedence first):"]
    lines += [f"  [{layer.scope}] {layer.path}" for layer in runtime.settings.layers] or ["  (none)"]
    lines.append(f"Model: {runtime.agent.config.model}   Permission mode: {runtime.permissions.mode}")
    return "\n".join(lines)


async def init_prompt(runtime: Any, args: str) -> str:
    return INIT_PROMPT + (f"\n\nAlso: {args}" if args else "")


async def review_prompt(runtime: Any, args: str) -> str:
    return REVIEW_PROMPT.format(target=f" ({args})" if args else "")


async def coordinate(runtime: Any, args: str) -> str:
    from agentkeel.agents.coordinator import coordinate_command

    return await coordinate_command(runtime, args)


async def cost(runtime: Any, args: str) -> str:
    """Until the context subsystem's /cost is there."""
    agent = runtime.agent
    u = agent.usage
    return f"${agent.cost_usd:.4f} · {u.input_tokens} in / {u.output_tokens} out tokens"


FALLBACKS = {"cost": cost}


def builtin_commands() -> list[Command]:
    out = [
        Command("help", "Show the slash commands", handler=help_, aliases=("?",)),
        Command("exit", "Leave keel (the session is kept: keel -c resumes it)", handler=exit_, aliases=("quit",)),
        Command("clear", "Start a fresh context (the transcript keeps the history)", handler=clear, aliases=("reset",)),
        Command("model", "Show or switch the model", argument_hint="[model]", handler=model),
        Command("permissions", "Show the permission mode and rules", handler=permissions, aliases=("allowed-tools",)),
        Command("hooks", "Show the configured hooks", handler=hooks),
        Command("agents", "List the subagent types", handler=agents),
        Command("skills", "List the skills", handler=skills),
        Command("status", "Show the session's status", handler=status),
        Command("todos", "Show the todo list", handler=todos),
        Command("resume", "List sessions to resume", handler=resume),
        Command("export", "Export the conversation as Markdown", argument_hint="[file]", handler=export),
        Command("plan", "Switch to plan mode (read-only tools)", handler=plan),
        Command("init", "Draft AGENTS.md for this repository", argument_hint="[notes]", expand=init_prompt),
        Command("review", "Review the current changes", argument_hint="[what]", expand=review_prompt),
        Command("commit", "Commit the current changes", argument_hint="[notes]", expand=commit_prompt),
        Command("config", "Show the settings files in effect", handler=config),
        Command(
            "coordinate",
            "Plan a task as a graph of subtasks and run them in parallel subagents",
            argument_hint="<task>",
            handler=coordinate,
        ),
    ]
    for name, (target, description, hint) in OTHERS.items():
        out.append(Command(name, description, argument_hint=hint, handler=target, fallback=FALLBACKS.get(name)))
    return out


def register_builtins(registry: CommandRegistry) -> None:
    for command in builtin_commands():
        registry.register(command)
