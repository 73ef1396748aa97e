"""The slash-command registry and its routing.

Kinds: ``builtin`` (a handler ``async def NAME(session, args) -> str``, given directly or as a
lazily imported ``"module:function"`` string; or a prompt template, for /init and /review),
``custom`` (``.claude/commands/**/*.md`` and ``.keel/commands/**/*.md``, a subfolder is a
namespace: ``frontend/build.md`` is ``/frontend:build``), ``skill`` (a user-invocable skill),
``plugin`` (``/plugin:name``) and ``mcp`` (an MCP server's prompt, registered by the MCP client
through :meth:`CommandRegistry.register_prompt`).

Routing of a line typed by the user (or given to ``keel -p``): a custom command, skill or plugin
command (these take a built-in's name, as in Claude Code), a built-in, then a plain message
(``/usr/bin is odd`` is a message).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Literal, TypeVar, cast

import msgspec

from agentkeel.core.handle import SessionHandle
from agentkeel.skills.session import ModelCommand

Kind = Literal["builtin", "custom", "skill", "plugin", "mcp"]
Handler = Callable[[SessionHandle, str], Awaitable[str]]  # (session, args) -> text to show
Expander = Callable[[SessionHandle, str], Awaitable[str]]  # (session, args) -> the prompt for the model
KIND_ORDER: dict[str, int] = {"builtin": 0, "custom": 1, "skill": 1, "plugin": 1, "mcp": 2}


class CommandFailed(Exception):
    """A command that could not run; the message says why (one line for the user)."""


class Command(msgspec.Struct):
    name: str
    description: str
    kind: Kind = "builtin"
    argument_hint: str = ""
    aliases: tuple[str, ...] = ()
    handler: Handler | str | None = None  # shows text; "module:function" is imported at first use
    expand: Expander | None = None  # produces a prompt for the model
    source: str = "built-in"
    path: Path | None = None
    interactive_only: bool = False
    for_model: ModelCommand | None = None  # a command file the Skill tool lists and runs

    def resolve_handler(self) -> Handler | None:
        """The handler, importing a ``"module:function"`` one; None when it cannot be imported."""
        if self.handler is None or callable(self.handler):
            return self.handler
        module, _, func = self.handler.partition(":")
        try:
            found = getattr(importlib.import_module(module), func)
        except (ImportError, AttributeError):
            return None
        if not callable(found):
            return None
        self.handler = cast(Handler, found)
        return self.handler


H = TypeVar("H", bound=Handler)


class CommandTable:
    """Built-in commands, each declared where it is written: ``@table.command("name", "what it
    does")`` on ``async def f(session, args) -> str`` (its text is shown; ``expands=True``: it is
    the prompt sent to the model instead), or ``table.elsewhere(...)`` for a handler in another
    subsystem, imported at its first use. Adding a command is one decorated function."""

    def __init__(self) -> None:
        self._commands: list[Command] = []

    def command(
        self,
        name: str,
        description: str,
        *,
        argument_hint: str = "",
        aliases: tuple[str, ...] = (),
        expands: bool = False,
    ) -> Callable[[H], H]:
        def add(fn: H) -> H:
            self._commands.append(
                Command(
                    name,
                    description,
                    argument_hint=argument_hint,
                    aliases=aliases,
                    handler=None if expands else fn,
                    expand=fn if expands else None,
                )
            )
            return fn

        return add

    def elsewhere(self, name: str, target: str, description: str, argument_hint: str = "") -> None:
        """A command whose handler is ``"module:function"`` of another subsystem."""
        self._commands.append(Command(name, description, argument_hint=argument_hint, handler=target))

    def commands(self) -> list[Command]:
        """Fresh copies (a command caches its imported handler), in declaration order."""
        return [msgspec.structs.replace(c) for c in self._commands]


class Routed(msgspec.Struct, frozen=True):
    """What a line became: ``output`` (a command's text, no model call), ``prompt`` (text for
    the model: a plain message or an expanded command) or ``error``."""

    kind: Literal["output", "prompt", "error"]
    text: str
    command: str = ""


class CommandRegistry(msgspec.Struct):
    """The session's slash commands (a service)."""

    share_with_subagents = False
    commands: dict[str, Command] = msgspec.field(default_factory=dict)
    aliases: dict[str, str] = msgspec.field(default_factory=dict)
    warnings: list[str] = msgspec.field(default_factory=list)

    def register(self, command: Command, *, replace: bool = False) -> bool:
        """Add a command. A name already taken keeps its owner, unless ``replace``; a project's,
        user's or plugin's command (or skill) takes a built-in's name, as in Claude Code 2.1.328
        (a project's ``.claude/commands/plan.md`` is ``/plan``)."""
        current = self.commands.get(command.name)
        if current is not None and current.kind == "builtin" and command.kind in ("custom", "skill", "plugin"):
            self.unregister(current.name)  # its aliases go with it
            current = None
        if (
            current is not None
            and not replace
            and KIND_ORDER[command.kind] >= KIND_ORDER[current.kind]
            and current.kind != command.kind
        ):
            self.warnings.append(
                f"/{command.name} from {command.source} is hidden by the {current.kind} command of that name"
            )
            return False
        self.commands[command.name] = command
        for alias in command.aliases:
            self.aliases.setdefault(alias, command.name)
        return True

    def register_prompt(
        self, name: str, description: str, expand: Expander, *, argument_hint: str = "", source: str = "mcp"
    ) -> bool:
        """For other subsystems (the MCP client's prompts: ``/mcp__server__prompt``)."""
        return self.register(
            Command(name, description, "mcp", argument_hint=argument_hint, expand=expand, source=source)
        )

    def unregister(self, name: str) -> bool:
        command = self.commands.pop(name, None)
        if command is None:
            return False
        self.aliases = {a: n for a, n in self.aliases.items() if n != name}
        return True

    def get(self, name: str) -> Command | None:
        name = name.lstrip("/")
        found = self.commands.get(name) or self.commands.get(self.aliases.get(name, ""))
        if found is not None:
            return found
        tails = [c for n, c in self.commands.items() if n.split(":")[-1] == name and c.kind != "builtin"]
        return tails[0] if len(tails) == 1 else None

    def __iter__(self) -> Iterator[Command]:
        return iter(sorted(self.commands.values(), key=lambda c: (KIND_ORDER[c.kind], c.name)))

    def completions(self, prefix: str = "") -> list[dict[str, str]]:
        """Completion data for a UI: every command (and alias) starting with ``prefix``."""
        prefix = prefix.lstrip("/")
        out = []
        for command in self:
            for label in (command.name, *command.aliases):
                if label.startswith(prefix):
                    out.append(
                        {
                            "name": "/" + label,
                            "description": command.description,
                            "argument_hint": command.argument_hint,
                            "kind": command.kind,
                        }
                    )
        return out


def parse_line(line: str) -> tuple[str, str] | None:
    """``/name args`` -> (name, args); None for anything that is not a command line."""
    text = line.strip()
    if not text.startswith("/") or text.startswith("//"):
        return None
    head, _, args = text[1:].partition(" ")
    head = head.strip()
    if not head or "/" in head:
        return None
    return head, args.strip()


async def route(registry: CommandRegistry, session: SessionHandle, line: str, *, interactive: bool = False) -> Routed:
    parsed = parse_line(line)
    if parsed is None:
        return Routed("prompt", line)
    name, args = parsed
    command = registry.get(name)
    if command is None:
        return Routed("prompt", line)  # not a command: a plain message
    if command.interactive_only and not interactive:
        return Routed("error", f"/{command.name} works only in an interactive session", command.name)
    try:
        if command.expand is not None:
            return Routed("prompt", await command.expand(session, args), command.name)
        handler = command.resolve_handler()
        if handler is None:
            return Routed("error", f"/{command.name} is not available in this build of keel", command.name)
        return Routed("output", await handler(session, args), command.name)
    except CommandFailed as e:
        return Routed("error", str(e), command.name)
