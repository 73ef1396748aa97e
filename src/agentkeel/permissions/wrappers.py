"""Wrappers: programs that run another program named in their arguments (``timeout 5 git
status`` runs ``git status``), and the shells whose ``-c`` script keel reads as a command line."""

from __future__ import annotations

from agentkeel.permissions.words import DYNAMIC

# wrappers stripped before matching: ``timeout 5 git status`` is checked as ``git status``
WRAPPER_OPTS_WITH_VALUE: dict[str, frozenset[str]] = {
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "xargs": frozenset(
        {"-n", "-L", "-l", "-I", "-i", "-d", "-P", "-s", "-E", "-e", "-a", "--arg-file", "--delimiter", "--max-args"}
    ),
    "env": frozenset({"-u", "--unset"}),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "noglob": frozenset(),
    "nohup": frozenset(),
    "exec": frozenset({"-a"}),
}
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish"})


def skip_options(args: list[str], with_value: frozenset[str]) -> list[str]:
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return args[i + 1 :]
        if not a.startswith("-") or a == "-":
            break
        if a in with_value:
            i += 2
            continue
        i += 1
    return args[i:]


def shell_c(args: list[str]) -> str | None:
    """The script of ``bash [-opts] -c SCRIPT``; None when it runs a file or stdin."""
    for i, a in enumerate(args):
        if a == "--":
            return None
        if a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
            return args[i + 1] if i + 1 < len(args) else DYNAMIC
        if a.startswith("+") or (a.startswith("-") and a != "-"):
            continue
        return None
    return None
