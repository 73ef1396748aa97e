"""One tool call being decided, with the facts the pipeline's stages compute about it on demand."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

import msgspec

from agentkeel.core.tools import NO_EFFECTS, Effects, Tool
from agentkeel.permissions.paths import candidates
from agentkeel.permissions.rules import url_host
from agentkeel.tools import effects_for

if TYPE_CHECKING:
    from agentkeel.permissions.bash import BashAnalysis

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
        effects = effects_for(self.tool, self.name)
        if effects == NO_EFFECTS and self.tool is not None:  # a tool that declares nothing: its fields say
            writes = self.tool.group == "fs" and not self.tool.read_only
            return Effects(path_fields=_UNDECLARED_PATHS, writes=writes)
        return effects

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
    def paths(self) -> tuple[str, str] | None:
        """The path, resolved against the session's working directory: (lexical, real)."""
        if self.path is None:
            return None
        return candidates(self.path, self.shell_cwd or self.cwd, self.home)

    @cached_property
    def bash(self) -> BashAnalysis | None:
        if not self.shell:
            return None
        from agentkeel.permissions.bash import BashAnalysis, analyse  # the shell analysis: at the first Bash call

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
