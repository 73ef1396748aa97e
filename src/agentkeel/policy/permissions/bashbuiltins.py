"""What builtins and programs run or evaluate beyond their argv, for the analysis in
:mod:`agentkeel.policy.permissions.bash`: ``test -v``, ``set``, ``trap``, ``source``, the variables
``read``/``printf -v``/``declare`` assign, ``git -c`` settings, options whose value is a command,
and inline code for interpreters, ``awk``, ``sed`` and editors."""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING

from agentkeel.policy.permissions import sed
from agentkeel.policy.permissions.bashmodel import SimpleCommand
from agentkeel.policy.permissions.bashvars import runs_programs
from agentkeel.policy.permissions.words import DYNAMIC, PLAIN_NAME, literal_arithmetic
from agentkeel.policy.permissions.wrappers import INTERPRETERS, interpreter_code

if TYPE_CHECKING:
    from agentkeel.policy.permissions.bashwalker import WalkerSelf


# set -o options that do not change which program runs or how words are read
_PLAIN_SET_OPTIONS = frozenset({"errexit", "nounset", "pipefail", "xtrace", "verbose", "noclobber", "notify"})
# git -c keys whose value is a program git runs (or names one): a command, not plain data
_GIT_COMMAND_KEYS = (
    "pager", "editor", "sshcommand", "fsmonitor", ".command", ".textconv", ".cmd", ".program", ".helper",
    ".clean", ".smudge", ".process", "askpass", "proxy", ".tool", "external", "hookspath", "packobjectshook",
)  # fmt: skip
_GIT_PLAIN_CONFIG = ("user.", "color.", "advice.", "init.defaultbranch", "core.quotepath", "log.", "column.", "i18n.")
# builtins that change how the shell reads or runs later commands (aliases, loadable builtins,
# the command hash, completion and key bindings): keel does not follow them
_SHELL_STATE = frozenset({"alias", "enable", "hash", "shopt", "complete", "compgen", "bind", "fc"})
# builtins whose arguments name variables bash assigns (and evaluates subscripts of)
_NAME_SETTERS = frozenset({"read", "printf", "getopts", "mapfile", "readarray", "wait", "unset", "let"})
# options whose value is a command the program runs (long ones match by unique prefix, as getopt_long does)
_PROGRAM_OPTIONS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "sort": (frozenset({"--compress-program"}), frozenset()),
    "tar": (
        frozenset({"--to-command", "--use-compress-program", "--rsh-command", "--info-script", "--new-volume-script"}),
        frozenset({"-I", "-F"}),
    ),
    "rsync": (frozenset({"--rsh"}), frozenset({"-e"})),
    "rg": (frozenset({"--pre"}), frozenset()),
    "zip": (frozenset({"--unzip-command"}), frozenset({"-TT"})),
    "git": (frozenset({"--upload-pack", "--receive-pack", "--exec", "--extcmd", "--open-files-in-pager"}), frozenset()),
    "less": (frozenset(), frozenset()),
    "man": (frozenset({"--pager"}), frozenset({"-P"})),
}
_DECLARE = frozenset({"declare", "typeset", "local", "export", "readonly"})
_AWK = frozenset({"awk", "gawk", "mawk", "nawk"})


# programs whose arguments carry commands or code they run (editors' ex commands, debuggers, database
# shells): not modelled, so a problem. Exact options, and prefixes of a word that carries code.
_INLINE_CODE: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    **dict.fromkeys(
        ("vi", "vim", "nvim", "ex", "view", "vimdiff", "rvim", "rview", "gvim", "evim", "nvi", "elvis"),
        (frozenset({"-c", "--cmd", "-S", "-s", "-u", "--startuptime"}), ("+",)),
    ),
    "gdb": (
        frozenset({"-ex", "--ex", "-x", "--command", "-iex", "-ix", "--eval-command", "--init-eval-command"}),
        ("--eval-command=", "--init-eval-command=", "--command=", "-ex=", "--ex="),
    ),
    **dict.fromkeys(
        ("emacs", "emacsclient"),
        (frozenset({"--eval", "-l", "--load", "-f", "--funcall", "--script", "-x", "-e"}), ("--eval=", "--load=")),
    ),
    "sqlite3": (frozenset({"-cmd", "--cmd", "-init", "--init"}), (".",)),
    "psql": (frozenset({"-c", "--command", "-f", "--file"}), ("--command=", "--file=")),
    **dict.fromkeys(("make", "gmake"), (frozenset({"-E", "--eval"}), ("--eval=",))),
    "expect": (frozenset({"-c", "-f"}), ()),
    **dict.fromkeys(("less", "more", "most"), (frozenset(), ("+",))),
}


def _code_word(name: str, word: str, prefixes: tuple[str, ...]) -> bool:
    """A word that carries commands for ``name`` (``+!rm x`` to vim or less, ``.shell rm`` to sqlite3)."""
    if not word.startswith(prefixes) or re.fullmatch(r"\+\d*|\+/[^|]*", word):  # +N, +/pattern: a place
        return False
    return name not in ("less", "more", "most") or bool(re.search(r"[!|]", word))  # less: +! and +| run commands


class WalkerBuiltins:
    """What the walker reads in builtins' and programs' arguments (a part of :class:`bash.Walker`)."""

    def evaluated(self: WalkerSelf, argv: list[str], cwd: str, depth: int) -> None:
        """What a builtin or interpreter runs that is not a program in its argv: subscripts and
        arithmetic bash evaluates (``test -v 'a[$(id)]'``, ``printf -v``, ``read``, ``let``),
        variables it assigns (unknown afterwards), scripts it reads (``source``, ``trap``,
        ``python -c``)."""
        name = posixpath.basename(argv[0]) if DYNAMIC not in argv[0] else argv[0]
        args = argv[1:]
        if name in ("test", "["):
            for i, a in enumerate(args[:-1]):
                if a in ("-v", "-R") and not PLAIN_NAME.fullmatch(args[i + 1]):
                    shown = args[i + 1].replace(DYNAMIC, "…")
                    self.opaque(f"{name} {a} {shown!r} evaluates a subscript (it can run code)")
            return
        if name in ("mapfile", "readarray") and any(a.startswith("-C") for a in args):
            self.opaque(f"{name} -C runs a callback keel does not read")
        if name in _NAME_SETTERS or name in _DECLARE:
            self.names_set(argv)
            return
        self.program_options(name, args, cwd)
        if name in ("source", "."):
            self.opaque(f"{name} runs a script keel does not read")
        elif name == "trap":
            operands = [a for a in args if a != "--" and not a.startswith("-")]
            if len(operands) > 1 and DYNAMIC in operands[0]:
                self.opaque("trap runs a string known only at run time")
            elif len(operands) > 1:  # trap ACTION SIGNAL...: the action runs later, in this shell
                self.trap_action(operands[0], cwd, depth)
        elif name == "set":
            for i, a in enumerate(args):
                if a in ("-o", "+o") and (i + 1 >= len(args) or args[i + 1] not in _PLAIN_SET_OPTIONS):
                    self.opaque(f"set {a} {' '.join(args[i + 1 : i + 2])} changes how the shell runs commands")
                elif re.fullmatch(r"[-+][a-zA-Z]+", a) and set(a[1:]) - set("euxvCo"):
                    self.opaque(f"set {a} changes how the shell reads or runs commands")
                elif a == "--" or not a.startswith(("-", "+")):
                    break
        elif name == "git":
            skip = False
            for i, a in enumerate(args):
                if skip:
                    skip = False
                    continue
                if not a.startswith("-"):
                    break
                skip = a in ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--attr-source")
                value = args[i + 1] if a == "-c" and i + 1 < len(args) else a.removeprefix("-c")
                if a == "-c" or (a.startswith("-c") and len(a) > 2):
                    self.git_setting(value, cwd)
                elif a.startswith(("--config-env", "--exec-path=")):
                    self.opaque(f"git {a.split('=', 1)[0]} can make git run any program")
        elif name == "sed":
            call = sed.read_call(args)
            if not call.sandbox and (call.executes or call.unknown or call.script_files):
                self.opaque("sed runs commands (e) or a script keel does not read")
        elif name in _SHELL_STATE:
            self.opaque(f"{name} changes how the shell reads or runs later commands (keel does not follow it)")
        elif name in INTERPRETERS or re.fullmatch(r"python[0-9.]*|pypy[0-9.]*|perl[0-9.]*|ruby[0-9.]*", name):
            base = re.sub(r"[0-9.]+$", "", name) or name
            source = interpreter_code(name if name in INTERPRETERS else base, args)
            if source == "stdin":  # text piped into an interpreter: any program, to deny rules
                self.opaque(f"{name} runs code from standard input (keel does not read it)")
            elif source == "inline":  # not modelled: asks, and is any program where nothing else asks
                self.problem(f"{name} runs inline code keel does not read")
        elif name in _AWK:
            # every argument: the program may follow -v x=1, -F:, --, or come as -e/--source=...
            loads = ("-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec")
            if any(a.startswith(loads) for a in args) or any(
                re.search(r"system|getline|\||\bprint[f]?\b[^;}]*>|@", a) for a in args
            ):
                self.opaque(f"{name} runs a program that can start commands")
        elif name in _INLINE_CODE:
            exact, prefixes = _INLINE_CODE[name]
            code = [a for a in args if a in exact or _code_word(name, a, prefixes)]
            if name in ("make", "gmake"):  # a makefile read from standard input
                stdin = ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")
                for i, a in enumerate(args):
                    value = a.split("=", 1)[1] if a.startswith("--") and "=" in a else a[2:] if len(a) > 2 else ""
                    if a in ("-f", "--file", "--makefile") and i + 1 < len(args):
                        value = args[i + 1]
                    if a.startswith(("-f", "--file", "--makefile")) and value in stdin:
                        code.append(a)
            if code:
                self.problem(f"{name} {code[0][:40]!r} runs commands keel does not read")

    def git_setting(self: WalkerSelf, setting: str, cwd: str) -> None:
        """``git -c key=value``: a key naming a command (an alias, a pager, an editor, ssh, a
        diff or filter driver) runs its value; other keys are not modelled; plain ones are fine."""
        key, _, value = setting.partition("=")
        key = key.lower()
        shown = setting.replace(DYNAMIC, "…")[:40]
        if DYNAMIC in key:
            self.opaque(f"git -c {shown}: a setting known only at run time")
        elif key.startswith(_GIT_PLAIN_CONFIG):
            return
        elif key.startswith("alias.") or key.endswith(_GIT_COMMAND_KEYS):
            command = value.removeprefix("!")
            self.out.also_runs.append(SimpleCommand(argv=command.split() or [DYNAMIC], cwd=cwd))
            self.problem(f"git -c {shown} runs a command")
        else:
            self.problem(f"git -c {shown}: a setting keel does not model (some run programs)")

    def program_options(self: WalkerSelf, name: str, args: list[str], cwd: str) -> None:
        """``sort --compress-prog=rm``, ``tar -I rm``, ``ssh -o ProxyCommand=rm``: a program run by
        an option's value is checked against deny and ask rules (any program when unknown)."""
        longs, shorts = _PROGRAM_OPTIONS.get(name, (frozenset(), frozenset()))
        values: list[str] = []
        for i, a in enumerate(args):
            nxt = args[i + 1] if i + 1 < len(args) else ""
            if a == "--":
                break
            if a.startswith("--") and len(a.split("=", 1)[0]) > 3:
                key = a.split("=", 1)[0]
                if any(opt.startswith(key) for opt in longs):
                    values.append(a.split("=", 1)[1] if "=" in a else nxt)
                elif name == "tar" and "--checkpoint-action".startswith(key):
                    value = a.split("=", 1)[1] if "=" in a else nxt
                    if value.startswith("exec="):
                        values.append(value[5:])
            elif a in shorts:
                values.append(nxt)
            elif any(a.startswith(s) and len(a) > len(s) for s in shorts):
                values.append(a[2:])
            elif name == "ssh" and a.startswith("-o"):
                option = a[2:] or nxt
                m = re.match(r"([A-Za-z]+)\s*=?\s*(.*)", option, re.S)
                if m and m.group(1).lower() in ("proxycommand", "localcommand", "knownhostscommand", "remotecommand"):
                    values.append(m.group(2))
        for value in values:
            self.out.also_runs.append(SimpleCommand(argv=value.split() or [DYNAMIC], cwd=cwd))

    def names_set(self: WalkerSelf, argv: list[str]) -> None:
        """Variables a builtin assigns: bash evaluates their subscripts, and their values are
        known only at run time afterwards."""
        name, args = argv[0], argv[1:]
        names: list[str] = []
        values: list[tuple[str, str]] = []
        if name == "read":
            i = 0
            while i < len(args) and args[i].startswith("-"):
                opt = args[i]
                if opt == "-a" and i + 1 < len(args):
                    names.append(args[i + 1])
                if opt in ("-a", "-d", "-i", "-n", "-N", "-p", "-t", "-u"):
                    i += 1
                i += 1
            names += args[i:] or ["REPLY"]
        elif name == "printf":
            for i, a in enumerate(args):
                if a == "-v" and i + 1 < len(args):
                    names.append(args[i + 1])
                elif a.startswith("-v") and len(a) > 2:
                    names.append(a[2:])
                if not a.startswith("-"):
                    break
        elif name == "getopts":
            names += args[1:2]
        elif name in ("mapfile", "readarray"):
            positional = [a for a in args if not a.startswith("-")]
            names.append(positional[-1] if positional else "MAPFILE")
        elif name == "wait":
            names += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-p"]
        elif name == "unset":
            names += [a for a in args if not a.startswith("-")]
        elif name == "let":
            for a in args:
                if not literal_arithmetic(a):
                    self.opaque(f"let evaluates {a.replace(DYNAMIC, '…')[:60]!r} arithmetically (it can run code)")
            return
        elif name in _DECLARE:
            flags = "".join(a[1:] for a in args if a.startswith(("-", "+")))
            if "n" in flags:
                self.opaque(f"{name} -n makes a name reference (keel does not follow it)")
            for a in args:
                if a.startswith(("-", "+")):
                    continue
                n, eq, v = a.partition("=")
                n = n.removesuffix("+")
                names.append(n)
                if eq:
                    values.append((n, v))
                if "i" in flags:
                    self.integers.add(n.split("[", 1)[0])
                if n.split("[", 1)[0] in self.integers and eq and not literal_arithmetic(v):
                    # declare -i n; declare n='a[$(cmd)]': the value is evaluated
                    self.opaque(f"{name} -i evaluates {v.replace(DYNAMIC, '…')[:60]!r} arithmetically")
                if set(flags) & set("luc"):  # the value is stored lower-, upper- or capital-cased
                    self.cased.add(n.split("[", 1)[0])
        for n in names:
            if not PLAIN_NAME.fullmatch(n):
                shown = n.replace(DYNAMIC, "…")[:60]
                self.opaque(f"{name} assigns {shown!r}: bash evaluates its subscript (it can run code)")
                continue
            if name == "unset":
                if runs_programs(n.split("[", 1)[0]):  # without PATH bash searches its default path, "." included
                    self.opaque(f"unset {n} changes what later commands run")
                self.vars[n.split("[", 1)[0]] = DYNAMIC
            elif name not in _DECLARE:
                self.assigned_at_run_time(n, name)
