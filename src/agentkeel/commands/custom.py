"""Custom commands (Markdown files), skills and plugin commands as registry entries."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentkeel.commands.registry import Command, CommandFailed, CommandRegistry, Kind
from agentkeel.core.events import Notice
from agentkeel.core.handle import SessionHandle
from agentkeel.internal.frontmatter import Document, FrontmatterError, flag, names, read, text
from agentkeel.skills.loader import Skill
from agentkeel.skills.session import ModelCommand


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
    if args:  # Claude Code 2.1.328 leaves the line out when there are none
        head += f"\n<command-args>{args}</command-args>"
    return f"{head}\n\n{body}"


def command_skill(path: Path, name: str, source: str, plugin_root: Path | None, doc: Document | None = None) -> Skill:
    """A command file as Claude Code treats it: a skill whose body is the file (``model``,
    ``context: fork``, ``agent``, ``allowed-tools``, ``disable-model-invocation`` as in a SKILL.md)."""
    doc = doc if doc is not None else read(path)
    meta = doc.meta
    allowed = names(meta.get("allowed-tools"))
    return Skill(
        name=name,
        description=text(meta.get("description")).strip() or _first_line(doc.body),
        body=doc.body,
        directory=path.parent,
        source=source,
        argument_hint=text(meta.get("argument-hint")).strip(),
        arguments=tuple(names(meta.get("arguments")) or ()),
        allowed_tools=tuple(allowed) if allowed is not None else None,
        disallowed_tools=tuple(names(meta.get("disallowed-tools")) or ()),
        model=text(meta.get("model")).strip() or None,
        fork=text(meta.get("context")).strip().lower() == "fork",
        agent=text(meta.get("agent")).strip(),
        model_invocable=not flag(meta.get("disable-model-invocation"), False),
        plugin_root=plugin_root,
    )


def _first_line(body: str) -> str:
    """A command without a ``description``: its first line of text, a heading's ``#`` taken off
    (Claude Code 2.1.328 lists ``# /supply-chain-audit`` as ``/supply-chain-audit``)."""
    for line in body.splitlines():
        if line.strip():
            first = line.strip().lstrip("#").strip()
            return first if len(first) <= 100 else first[:97] + "..."  # Claude Code's cut
    return ""


def _hook_parts(session: SessionHandle) -> dict[str, Any]:
    """What a command's frontmatter hooks are built with: the session's builder and environment."""
    from agentkeel.agents.agenthooks import DefinitionHooks
    from agentkeel.agents.spawner import SubagentSpawner

    make = session.agent.services.find(DefinitionHooks)
    spawner = session.agent.services.find(SubagentSpawner)
    return {"build": make.build if make else None, "env": spawner.env if spawner else None}


def _file_command(path: Path, name: str, kind: Kind, source: str, plugin_root: Path | None) -> Command:
    doc = read(path)
    first = command_skill(path, name, source, plugin_root, doc)

    def load() -> Skill:
        return command_skill(path, name, source, plugin_root)  # read again: an edit between uses takes effect

    async def expand(session: SessionHandle, args: str) -> str:
        from agentkeel.hooks.commandhooks import command_hooks, prompt_allowed
        from agentkeel.skills.run import invoke_command

        if (refused := await prompt_allowed(session, f"/{name} {args}".strip())) is not None:
            raise CommandFailed(f"prompt blocked by hooks: {refused}")  # before any of its ! lines run
        for note in command_hooks(session, read(path).meta.get("hooks"), source=path, **_hook_parts(session)):
            session.agent.bus.emit(Notice(level="warning", message=note))  # its hooks live while its prompt runs
        run = await invoke_command(session.agent, load(), args)
        return frame(name, args, run.text)

    async def forked(session: SessionHandle, args: str) -> str:
        """``context: fork``: the subagent's report is the command's output (Claude Code -p prints it)."""
        from agentkeel.hooks.commandhooks import prompt_allowed
        from agentkeel.skills.run import invoke_command

        if (refused := await prompt_allowed(session, f"/{name} {args}".strip())) is not None:
            raise CommandFailed(f"prompt blocked by hooks: {refused}")  # before any of its ! lines run
        run = await invoke_command(session.agent, load(), args)
        if run.is_error:
            raise CommandFailed(run.text)
        return run.text

    return Command(
        name,
        first.description,
        kind,
        argument_hint=first.argument_hint,
        handler=forked if first.fork else None,
        expand=None if first.fork else expand,
        source=source,
        path=path,
        for_model=ModelCommand(name, first.description, load) if _offered(doc, kind, first) else None,
    )


def _offered(doc: Document, kind: Kind, command: Skill) -> bool:
    """Does the Skill tool list this command? Not with ``disable-model-invocation``; a plugin's
    command only with a ``description`` of its own (Claude Code 2.1.328 leaves out the plugin
    commands that have none, and lists the user's and project's with their first line)."""
    if not command.model_invocable:
        return False
    return kind != "plugin" or bool(text(doc.meta.get("description")).strip())


def model_commands(registry: CommandRegistry) -> list[ModelCommand]:
    """The custom and plugin commands the Skill tool lists and runs, in Claude Code 2.1.328's order:
    user and project commands by name, then plugin commands plugin by plugin (in the order the
    plugins were loaded), each plugin's by name."""
    plugins: dict[str, int] = {}
    for c in registry.commands.values():
        if c.kind == "plugin":
            plugins.setdefault(c.source, len(plugins))
    found = sorted(registry.commands.values(), key=lambda c: (c.kind == "plugin", plugins.get(c.source, 0), c.name))
    return [c.for_model for c in found if c.kind in ("custom", "plugin") and c.for_model is not None]


def load_commands(
    registry: CommandRegistry,
    cwd: Path,
    home: Path,
    *,
    plugins: Sequence[tuple[str, Path, Path]] = (),
    scopes: frozenset[str] | None = None,
) -> None:
    """Custom and plugin commands. ``plugins``: (plugin name, its commands folder, its root);
    ``scopes``: read only the user's and/or the project's folders (``--setting-sources``)."""
    sources: list[tuple[Path, str, Kind, str, Path | None]] = [
        (d, n, "plugin", f"plugin:{n}", r) for n, d, r in plugins
    ]
    sources += [(d, "", "custom", s, None) for d, s in command_dirs(cwd, home) if scopes is None or s in scopes]
    for root, namespace, kind, source, plugin_root in sources:
        if root.is_file() and root.suffix == ".md":  # a plugin manifest may list one file
            files, base = [root], root.parent
        elif root.is_dir():
            files, base = sorted(root.rglob("*.md")), root
        else:
            continue
        for path in files:
            parts = [*path.relative_to(base).parent.parts, path.stem]
            name = ":".join([namespace, *parts] if namespace else parts)
            try:
                command = _file_command(path, name, kind, source, plugin_root)
            except FrontmatterError as e:
                registry.warnings.append(str(e))
                continue
            held = registry.commands.get(name)
            if held is not None and held.kind == "custom" == kind and held.source != source:
                continue  # a user's command wins over a project's of that name (Claude Code 2.1.328)
            registry.register(command, replace=held is None or held.kind == kind)


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
