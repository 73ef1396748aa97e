"""What the Bash command analysis (:mod:`agentkeel.policy.permissions.bash`) produces: the simple
commands a line runs, the files it redirects, and what keel could not read."""

from __future__ import annotations

from typing import Literal

import msgspec

from agentkeel.policy.permissions.words import DYNAMIC


class SimpleCommand(msgspec.Struct):
    """One program invocation. ``argv`` items equal to :data:`DYNAMIC` (or containing it) are unknown."""

    argv: list[str]
    assignments: list[tuple[str, str]] = msgspec.field(default_factory=list)
    wrappers: list[str] = msgspec.field(default_factory=list)  # stripped wrappers, outermost first
    privileged: list[str] = msgspec.field(default_factory=list)  # sudo/doas prefixes (kept for allow matching)
    globbed: list[str] = msgspec.field(default_factory=list)  # literal arguments with unquoted glob characters
    cwd: str = ""  # the directory it runs in, after literal ``cd``s earlier in the line

    @property
    def text(self) -> str:
        return " ".join(self.argv)

    @property
    def full_text(self) -> str:
        """With privilege prefixes, as an allow rule must cover it."""
        return " ".join([*self.privileged, *self.argv])

    @property
    def name(self) -> str:
        return self.argv[0] if self.argv else ""

    @property
    def dynamic(self) -> bool:
        return any(DYNAMIC in a for a in self.argv) or any(DYNAMIC in v for _, v in self.assignments)


class Redirect(msgspec.Struct, frozen=True):
    op: str
    target: str  # DYNAMIC when unknown
    mode: Literal["read", "write"]
    cwd: str


class BashAnalysis(msgspec.Struct):
    commands: list[SimpleCommand] = msgspec.field(default_factory=list)
    redirects: list[Redirect] = msgspec.field(default_factory=list)
    problems: list[str] = msgspec.field(default_factory=list)
    # why a part may run a program keel cannot name (a subset of the problems)
    opaque: list[str] = msgspec.field(default_factory=list)
    # word sequences a runner (``uv run``, ``setsid``, ``npx``...) may run: for deny and ask rules only
    also_runs: list[SimpleCommand] = msgspec.field(default_factory=list)
    cwd: str = ""  # where the shell is when the line is done (after its literal cd/pushd/popd)

    @property
    def confident(self) -> bool:
        return not self.problems
