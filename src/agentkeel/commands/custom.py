"""Custom commands (Markdown files), skills and plugin commands as registry entries."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentkeel.commands.registry import Command, CommandFailed, CommandRegistry, Kind
from agentkeel.core.events import Notice
from agentkeel.core.handle import SessionHandle
from agentkeel.internal.frontmatter import FrontmatterError, names, read, text
from agentkeel.skills.loader import Skill


def command_dirs(cwd: Path, home: Path) -> list[tuple[Path, str]]:
    return [
        (home / ".claude" / "commands", "user"),
        (home / ".keel" / "commands", "user"),
        (cwd / ".claude" / "commands", "project"),
        (cwd / ".keel" / "commands", "project"),
    ]


def frame(name: str, args: str, body: str) -> str:
    """A command's prompt as Claude Code sends it (its header block, then the expanded body)."""
    head = f"<command-message>{name}</command-message>\n<command-name>/{name}</command-name>"
    return f"{head}\n<command-args>{args}</command-args>\n\n{body}"


def _hook_parts(session: SessionHandle) -> dict[str, Any]:
    """What a command's frontmatter hooks are built with: the session's builder and environment."""
    from agentkeel.agents.agenthooks import DefinitionHooks
    from agentkeel.agents.spawner import SubagentSpawner

    make = session.agent.services.find(DefinitionHooks)
    spawner = session.agent.services.find(SubagentSpawner)
    return {"build": make.build if make else None, "env": spawner.env if spawner else None}


def _file_command(path: Path, name: str, kind: Kind, source: str, plugin_root: Path | None) -> Command:
    doc = read(path)
    meta = doc.meta
    description = text(meta.get("description")).strip() or doc.body.strip().split("\n", 1)[0][:100]
    allowed = names(meta.get("allowed-tools"))

    async def expand(session: SessionHandle, args: str) -> str:
        from agentkeel.agents.gatecheck import check_call
        from agentkeel.skills.expand import expand as expand_body

        agent = session.agent
        from agentkeel.hooks.commandhooks import prompt_allowed

        if (refused := await prompt_allowed(session, f"/{name} {args}".strip())) is not None:
            raise CommandFailed(f"prompt blocked by hooks: {refused}")  # before any of its ! lines run

        async def check(tool: str, tool_input: dict[str, object]) -> str | None:
            return await check_call(agent, tool, dict(tool_input))

        body = await expand_body(
            read(path).body,  # read again: an edit between uses takes effect
            args,
            cwd=agent.context.workdir,  # where the checks judged its commands
            check=check,
            named=tuple(names(meta.get("arguments")) or ()),
            skill_dir=path.parent,
            plugin_root=plugin_root,
            env=agent.context.env,
        )
        if allowed is not None:
            from agentkeel.skills.session import SkillHost

            host = agent.services.find(SkillHost)
            if host is not None:
                host.active_tools = tuple(allowed)
        from agentkeel.hooks.commandhooks import command_hooks

        for note in command_hooks(session, meta.get("hooks"), source=path, **_hook_parts(session)):
            agent.bus.emit(Notice(level="warning", message=note))  # its hooks live while its prompt runs
        return frame(name, args, body)

    return Command(
        name,
        description,
        kind,
        argument_hint=text(meta.get("argument-hint")).strip(),
        expand=expand,
        source=source,
        path=path,
    )


def load_commands(
    registry: CommandRegistry,
    cwd: Path,
    home: Path,
    *,
    plugins: Sequence[tuple[str, Path, Path]] = (),
) -> None:
    """Custom and plugin commands. ``plugins``: (plugin name, its commands folder, its root)."""
    sources: list[tuple[Path, str, Kind, str, Path | None]] = [
        (d, n, "plugin", f"plugin:{n}", r) for n, d, r in plugins
    ]
    sources += [(d, "", "custom", s, None) for d, s in command_dirs(cwd, home)]
    for root, namespace, kind, source, plugin_root in sources:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.md")):
            parts = [*path.relative_to(root).parent.parts, path.stem]
            name = ":".join([namespace, *parts] if namespace else parts)
            try:
                command = _file_command(path, name, kind, source, plugin_root)
            except FrontmatterError as e:
                registry.warnings.append(str(e))
                continue
            registry.register(command, replace=registry.commands.get(name, command).kind == kind)


def skill_command(skill: Skill) -> Command:
    async def expand(session: SessionHandle, args: str) -> str:
        from agentkeel.hooks.commandhooks import prompt_allowed
        from agentkeel.skills.run import invoke_skill, skill_message

        if (refused := await prompt_allowed(session, f"/{skill.name} {args}".strip())) is not None:
            raise CommandFailed(f"prompt blocked by hooks: {refused}")  # before any of its ! lines run
        run = await invoke_skill(session.agent, skill, args)
        if run.is_error:
            raise CommandFailed(run.text)
        if skill.fork:
            return f"<command-name>/{skill.name}</command-name>\nThe skill ran in a subagent. Its report:\n\n{run.text}"
        return skill_message(skill, args, run.text)

    kind: Kind = "plugin" if skill.source.startswith("plugin:") else "skill"
    return Command(
        skill.name,
        skill.description,
        kind,
        argument_hint=skill.argument_hint,
        expand=expand,
        source=skill.source,
        path=skill.path,
    )
