"""Variables in a Bash command line, for the analysis in :mod:`agentkeel.policy.permissions.bash`:
what an assignment leaves known, which variables change what later commands run, and values that
are commands a program may run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkeel.policy.permissions.bashmodel import SimpleCommand
from agentkeel.policy.permissions.words import DYNAMIC, literal_arithmetic

if TYPE_CHECKING:
    from tree_sitter import Node

    from agentkeel.policy.permissions.bashwalker import WalkerSelf


# variables that change which program a later command runs or what the shell runs on its own
_RUN_VARS = frozenset(
    {
        "PATH", "BASH_ENV", "ENV", "IFS", "LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "PS4", "SHELLOPTS",
        "BASHOPTS", "PROMPT_COMMAND", "BASH_LOADABLES_PATH", "EXECIGNORE", "CDPATH", "GLOBIGNORE",
        "POSIXLY_CORRECT", "BASH_XTRACEFD", "HISTFILE", "INPUTRC", "BASH_CMDS", "BASH_ALIASES",
    }
)  # fmt: skip
_GIT_RUN_VARS = frozenset({"GIT_DIR", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "GIT_COMMON_DIR"})
# variables bash sets itself (or refuses to assign): a value assigned in the line is not what a use sees
_SHELL_SET_VARS = frozenset(
    {
        "_", "RANDOM", "SRANDOM", "SECONDS", "LINENO", "BASHPID", "EPOCHSECONDS", "EPOCHREALTIME", "BASH_COMMAND",
        "PIPESTATUS", "OPTIND", "OPTARG", "REPLY", "PWD", "OLDPWD", "UID", "EUID", "PPID", "BASH_SUBSHELL",
        "HISTCMD", "FUNCNAME", "BASH_REMATCH", "BASH_ARGV", "BASH_ARGC", "BASH_SOURCE", "BASH_LINENO", "GROUPS",
        "SHLVL", "BASH_ARGV0", "MAPFILE", "COPROC",
    }
)  # fmt: skip
# variables whose value is a command some program runs (git, ssh, less, editors)
_PROGRAM_VARS = frozenset(
    {
        "GIT_SSH_COMMAND", "GIT_SSH", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "PAGER", "MANPAGER", "EDITOR", "VISUAL",
        "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS", "GIT_PROXY_COMMAND",
        "LESSOPEN", "LESSCLOSE", "RSYNC_RSH", "BROWSER", "SYSTEMD_PAGER", "PSQL_PAGER", "FCEDIT",
    }
)  # fmt: skip


def runs_programs(name: str) -> bool:
    """A variable that changes which program runs or what runs along: the shell's own (PATH,
    BASH_ENV...), an exported function (``env 'BASH_FUNC_ls%%=() { rm x; }' bash -c ls``), or git
    configuration from the environment (``GIT_CONFIG_KEY_0=core.fsmonitor``, ``GIT_DIR``)."""
    return name in _RUN_VARS or name.startswith(("BASH_FUNC_", "GIT_CONFIG")) or name in _GIT_RUN_VARS


class WalkerVariables:
    """The walker's variable tracking (a part of :class:`bash.Walker`)."""

    def program_value(self: WalkerSelf, name: str, value: str, cwd: str) -> None:
        """``GIT_SSH_COMMAND='rm x' git fetch``: the value is a command a program may run."""
        if name in _PROGRAM_VARS and value:
            self.out.also_runs.append(SimpleCommand(argv=value.split() or [value], cwd=cwd))

    def remember(self: WalkerSelf, name: str, value: str) -> None:
        self.program_value(name, value, self.out.cwd or "")
        if runs_programs(name):
            self.opaque(f"sets {name}, which changes what later commands run")
        if name in self.integers and not literal_arithmetic(value):
            self.opaque(f"{name} was declared -i: bash evaluates {value.replace(DYNAMIC, '…')!r} arithmetically")
        unknown = name in _SHELL_SET_VARS or name in self.readonly or name in self.integers or name in self.cased
        self.vars[name] = DYNAMIC if unknown else value

    def assigned_at_run_time(self: WalkerSelf, name: str, how: str) -> None:
        """``read n``, ``printf -v n``, ``for n in``, ``${n:=..}``: a value known only at run time. For a
        name declared -i bash evaluates that value arithmetically, so it can run code."""
        base = name.split("[", 1)[0]
        if runs_programs(base):  # for PATH in .; do ls; done runs ./ls
            self.opaque(f"{how} sets {base}, which changes what later commands run")
        if base in self.integers:
            self.opaque(f"{how} assigns {base}, which was declared -i: bash evaluates the value (it can run code)")
        self.vars[base] = DYNAMIC

    def assignments(self: WalkerSelf, node: Node, cwd: str, depth: int) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        targets = [node] if node.type == "variable_assignment" else node.children
        for a in targets:
            if a.type != "variable_assignment":
                continue
            name_node = a.child_by_field_name("name")
            value_node = a.child_by_field_name("value")
            name = name_node.text.decode() if name_node is not None and name_node.text else DYNAMIC
            if name_node is not None and name_node.type == "subscript":
                self.subscript(name_node, cwd, depth)
                name = name.split("[", 1)[0]
            value = self.word(value_node, cwd, depth) if value_node is not None else ""
            if value_node is not None and value_node.type == "array":
                value = DYNAMIC
                if any(c.type == "[" or (c.text or b"").startswith(b"[") for c in value_node.children):
                    self.opaque("an array with [subscript]= elements (bash evaluates the subscripts)")
            if (name_node is not None and name_node.type == "subscript") or any(c.type == "+=" for c in a.children):
                value = DYNAMIC
            found.append((name, value))
        return found
