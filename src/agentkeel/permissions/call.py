"""One tool call being decided, with the facts the pipeline's stages compute about it on demand."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

import msgspec

from agentkeel.core.tools import Tool
from agentkeel.permissions.paths import candidates
from agentkeel.permissions.rules import EDIT_TOOLS, READ_TOOLS, url_host

if TYPE_CHECKING:
    from agentkeel.permissions.bash import BashAnalysis


class Call(msgspec.Struct, dict=True):
    """One tool call being decided, with what the stages compute about it on demand."""

    name: str
    input: Mapping[str, Any]
    tool: Tool | None
    cwd: str  # the project root: relative paths of file tools
    home: str
    shell_cwd: str = ""  # where the shell is: a Bash command starts here (default: cwd)
    memo: dict[Any, Any] = msgspec.field(default_factory=dict)  # facts the stages share (tree walks)

    @property
    def read_only(self) -> bool:
        if self.tool is not None:
            return self.tool.read_only and not self.tool.is_external
        return self.name in READ_TOOLS

    @property
    def is_edit(self) -> bool:
        return self.name in EDIT_TOOLS or (
            self.tool is not None and self.tool.group == "fs" and not self.tool.read_only
        )

    @cached_property
    def path(self) -> str | None:
        """The file or directory a file tool touches (as given), or None."""
        for key in ("file_path", "notebook_path", "path"):
            value = self.input.get(key)
            if isinstance(value, str) and value:
                if self.name == "Glob":
                    return _glob_base(value, self.input.get("pattern"))
                return value
        if self.name in ("Glob", "Grep", "LS"):
            return _glob_base(".", self.input.get("pattern")) if self.name == "Glob" else "."
        return None

    @cached_property
    def paths(self) -> tuple[str, str] | None:
        if self.path is None:
            return None
        return candidates(self.path, self.cwd, self.home)

    @cached_property
    def bash(self) -> BashAnalysis | None:
        if self.name != "Bash":
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


def _glob_base(path: str, pattern: object) -> str:
    """Where a Glob can reach: its path joined with the pattern's literal prefix."""
    if not isinstance(pattern, str) or not pattern:
        return path
    literal = []
    for part in pattern.split("/"):
        if any(c in part for c in "*?[{"):
            break
        literal.append(part)
    joined = "/".join(literal)
    if pattern.startswith("/"):
        return joined or "/"
    return posixpath.join(path, joined) if joined else path
