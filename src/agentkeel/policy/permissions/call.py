"""One tool call being decided, with the facts the pipeline's stages compute about it on demand."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

import msgspec

from agentkeel.core.tools import NO_EFFECTS, Effects, Tool
from agentkeel.policy.permissions.paths import candidates
from agentkeel.policy.permissions.rules import url_host
from agentkeel.tools import EDIT, READ, effects_for, effects_of

if TYPE_CHECKING:
    from agentkeel.policy.permissions.bashmodel import BashAnalysis

# what a tool that declares nothing is taken to name: the path fields of Claude Code's file tools
_UNDECLARED_PATHS = ("file_path", "notebook_path", "path")


class Call(msgspec.Struct, dict=True):
    """One tool call being decided, with what the stages compute about it on demand. What the
    call does comes from the tool (``Tool.effects``), never from its name."""

    name: str
    input: Mapping[str, Any]
    tool: Tool | None
    cwd: str  # the project root: rule anchors and the working directories
    home: str
    shell_cwd: str = ""  # the session's working directory: a command starts here, relative paths resolve here
    memo: dict[Any, Any] = msgspec.field(default_factory=dict)  # facts the stages share (tree walks)

    @cached_property
    def effects(self) -> Effects:
        """What the call does: the tool's declaration, joined with what keel knows of a built-in of
        the same name and, for a file tool that names no path field, Claude Code's path fields. A
        partial declaration never takes a check away (fail closed)."""
        effects = effects_for(self.tool, self.name)
        if self.tool is None:
            return effects
        builtin = effects_of(self.name)
        if builtin not in (NO_EFFECTS, effects):  # a host tool named like a built-in
            effects = _joined(effects, builtin)
        fs = self.tool.group == "fs"
        writes = effects.writes or (fs and not self.tool.read_only)
        reads = effects.reads or (fs and self.tool.read_only)
        if (writes or reads or effects.lists or effects == NO_EFFECTS) and not effects.path_fields:
            effects = msgspec.structs.replace(effects, path_fields=_UNDECLARED_PATHS)
        rule = effects.rule or (EDIT if writes else READ if reads or effects.lists else None)
        return msgspec.structs.replace(effects, writes=writes, reads=reads, rule=rule)

    @property
    def shell(self) -> bool:
        """The call runs a command line: the shell analysis decides it."""
        return self.effects.shell

    @property
    def reads_files(self) -> bool:
        """It reads or lists the files at its paths (a ``Read`` rule's tools)."""
        return self.effects.reads or self.effects.lists

    @property
    def read_only(self) -> bool:
        if self.tool is not None:
            return self.tool.read_only and not self.tool.is_external
        return self.reads_files and not self.effects.writes and not self.effects.shell

    @property
    def is_edit(self) -> bool:
        return self.effects.writes

    @cached_property
    def path(self) -> str | None:
        """The file or directory the call touches (as given; a search's reach), or None."""
        named = self.effects.named_paths(self.input)
        return named[0] if named else None

    @cached_property
    def all_paths(self) -> list[tuple[str, str]]:
        """Every path the call names, resolved as ``paths`` is (a tool may declare several fields)."""
        base = self.shell_cwd or self.cwd
        return [candidates(p, base, self.home) for p in self.effects.named_paths(self.input)]

    @cached_property
    def paths(self) -> tuple[str, str] | None:
        """The path, resolved against the session's working directory: (lexical, real)."""
        if self.path is None:
            return None
        return candidates(self.path, self.shell_cwd or self.cwd, self.home)

    @cached_property
    def bash(self) -> BashAnalysis | None:
        if not self.shell:
            return None
        from agentkeel.policy.permissions.bash import analyse  # the shell analysis: at the first Bash call
        from agentkeel.policy.permissions.bashmodel import BashAnalysis

        command = self.input.get("command")
        if not isinstance(command, str):
            return BashAnalysis(problems=["the command is not a string"])
        return analyse(command, self.shell_cwd or self.cwd, self.home)

    @cached_property
    def host(self) -> str | None:
        url = self.input.get("url")
        return url_host(url) if isinstance(url, str) else None

    @cached_property
    def named(self) -> str | None:
        """What a rule's specifier must name exactly (the agent of ``Task(reviewer)``), or None."""
        for field in self.effects.named_by:
            value = self.input.get(field)
            if isinstance(value, str) and value:
                return value
        return None


def _joined(a: Effects, b: Effects) -> Effects:
    """Both declarations at once: every effect either names (the stricter reading)."""
    return Effects(
        rule=a.rule or b.rule,
        path_fields=tuple(dict.fromkeys((*a.path_fields, *b.path_fields))),
        reads=a.reads or b.reads,
        lists=a.lists or b.lists,
        writes=a.writes or b.writes,
        shell=a.shell or b.shell,
        fetches=a.fetches or b.fetches,
        protected=a.protected or b.protected,
        preview=a.preview,
        glob_field=a.glob_field or b.glob_field,
        named_by=tuple(dict.fromkeys((*a.named_by, *b.named_by))),
        delegates=a.delegates or b.delegates,
        sandboxed=a.sandboxed and b.sandboxed,
    )
