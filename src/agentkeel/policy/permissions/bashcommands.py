"""Simple commands in a Bash command line, for the analysis in :mod:`agentkeel.policy.permissions.bash`:
the program a command runs once wrappers (``sudo``, ``env``, ``timeout``, ``xargs``...) are stripped,
the commands nested in ``bash -c``, ``eval`` and ``find -exec``, what a runner (``uv run``, ``npx``...)
may run, and the directory changes of ``cd``/``pushd``/``popd``."""

from __future__ import annotations

import os
import posixpath
import re
from itertools import pairwise
from typing import TYPE_CHECKING

from agentkeel.policy.permissions.bashmodel import SimpleCommand
from agentkeel.policy.permissions.bashvars import runs_programs
from agentkeel.policy.permissions.shellstate import DIR_COMMANDS, Dirs, change, in_this_shell, record_mkdir
from agentkeel.policy.permissions.words import DYNAMIC, has_glob
from agentkeel.policy.permissions.wrappers import (
    RUNNER_SUBCOMMANDS,
    RUNNERS,
    SHELLS,
    WRAPPER_OPTS_WITH_VALUE,
    shell_c,
    skip_options,
    unknown_option,
)

if TYPE_CHECKING:
    from tree_sitter import Node

    from agentkeel.policy.permissions.bashwalker import WalkerSelf


_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
# POSIX special builtins: in POSIX mode (sh, bash --posix) assignments before them persist
_SPECIAL_BUILTINS = frozenset(
    {":", ".", "break", "continue", "eval", "exec", "exit", "export", "readonly", "return", "set", "shift",
     "times", "trap", "unset", "source"}
)  # fmt: skip
_MAX_SUFFIXES = 32
# reserved words: tree-sitter-bash 0.25 reads ``time if ..; fi`` and ``coproc { ..; }`` as commands
# named "time" and "then"..., so one of these as a program (or after time/coproc) is a misreading
_RESERVED = frozenset(
    {"if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do", "done",
     "function", "{", "}", "[[", "]]", "!", "in", "time", "coproc"}
)  # fmt: skip
_SHELL_NAME = re.compile(r"(?:ba|da|z|k|mk|pdk|lk|ok|a|ya|rba|po)?sh[0-9.]*|rbash")
_ASSIGNMENT_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[.*\])?\+?=", re.S)
# what makes an argument a command line rather than a word: blanks, separators, substitutions,
# variables, quotes, escapes (a path glob or brace list alone, 'src/**/*.{ts,tsx}', is an argument)
_SHELL_SYNTAX = re.compile(r"[;&|`$'\"\\\s]|[<>]\(")
_BRACE_WORD = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")  # {rm,x} is a command line to bash; src/*.{js,ts} a path


def _xargs_replace(options: list[str]) -> str:
    """The replace string of ``xargs -I R`` / ``-iR`` / ``--replace[=R]`` (default ``{}``)."""
    for i, a in enumerate(options):
        if a == "-I" and i + 1 < len(options):
            return options[i + 1]
        if a.startswith("-I") and len(a) > 2:
            return a[2:]
        if a.startswith("-i") or a.startswith("--replace"):
            return a.split("=", 1)[1] if "=" in a else (a[2:] if a.startswith("-i") and len(a) > 2 else "{}")
    return ""


class WalkerCommands:
    """The walker's reading of simple commands (a part of :class:`bash.Walker`)."""

    def command(self: WalkerSelf, node: Node, cwd: str, depth: int) -> str:
        assignments: list[tuple[str, str]] = []
        words: list[str] = []
        globbed: list[str] = []
        parts = [c for c in node.children if c.type not in _REDIRECTS]
        if any(a.end_byte == b.start_byte for a, b in pairwise(parts)):
            # two words with no blank between are one word to bash ('status'\rm is "statusrm"),
            # but tree-sitter-bash 0.25 splits a quoted string from a backslash escape after it
            self.problem("two words with nothing between them (the shell parser splits what bash joins)")
        text = node.text or b""
        gaps = (text[a.end_byte - node.start_byte : b.start_byte - node.start_byte] for a, b in pairwise(node.children))
        if any(b"\n" in gap.replace(b"\\\n", b"") for gap in gaps):
            # a newline ends a command in bash; the grammar reads "ls<LF>\\<LF>rm" as ls with an argument
            self.problem("a line break inside one command (bash would start a new command there)")
        for child in node.children:
            if child.type == "variable_assignment":
                assignments += self.assignments(child, cwd, depth)
            elif child.type == "command_name":
                for c in child.children:
                    value = self.word(c, cwd, depth)
                    if value != DYNAMIC and has_glob(c):
                        self.opaque(f"the program name {value!r} is a glob pattern (any program could match)")
                        value = DYNAMIC
                    words.append(value)
            elif child.type in _REDIRECTS:
                self.redirect(child, cwd, depth)
            elif child.is_named or child.type == "$":  # a lone "$" is a literal to bash
                value = self.word(child, cwd, depth)
                if value != DYNAMIC and has_glob(child):
                    globbed.append(value)
                words.append(value)
            elif child.text:  # a token the grammar left bare ("==", "=~"): a word to bash
                words.append(child.text.decode("utf-8", "replace"))
        misread = words[1:2] if words[:1] in (["time"], ["coproc"]) else words[:1]
        if misread and misread[0] in _RESERVED - {"time", "coproc"}:
            self.opaque(f"the reserved word {misread[0]!r} read as a command (the shell parser misreads it)")
        for name, value in assignments:
            if runs_programs(name):
                self.opaque(f"runs a command with {name} set, which changes what it runs")
            self.program_value(name, value, cwd)
            if words and words[0] in _SPECIAL_BUILTINS:
                self.vars[name] = DYNAMIC  # persists in POSIX mode (sh, bash --posix)
        cmd = SimpleCommand(argv=words, assignments=assignments, globbed=globbed, cwd=cwd)
        after_eval = self.unwrap(cmd, cwd, depth)
        if cmd.argv and cmd.argv[0] in DIR_COMMANDS:
            return self.change_dir(cmd, cwd)
        if cmd.argv and cmd.argv[0] == "mkdir":
            record_mkdir(cmd.argv, Dirs(cwd, self.stack, self.made))
        return after_eval if after_eval is not None and in_this_shell(cmd.wrappers, cmd.privileged) else cwd

    def change_dir(self: WalkerSelf, cmd: SimpleCommand, cwd: str) -> str:
        self.dir_changes += 1
        self.vars.pop("PWD", None)  # cd sets PWD and OLDPWD again
        self.vars["OLDPWD"] = DYNAMIC
        if not in_this_shell(cmd.wrappers, cmd.privileged):
            self.problem(f"{cmd.argv[0]} behind a wrapper (bash may not change directory at all)")
            return cwd
        dirs = Dirs(cwd, self.stack, self.made)
        why = change(cmd.argv, dirs, self.vars.get("HOME", self.home))  # cd alone goes to $HOME, as set now
        if why:
            self.problem(why)
            return cwd
        return dirs.cwd

    def unwrap(self: WalkerSelf, cmd: SimpleCommand, cwd: str, depth: int) -> str | None:
        """Strip wrappers and pull nested commands out; append what remains. For ``eval``, the
        directory its script ends in (eval runs in this shell; ``bash -c`` does not)."""
        argv = cmd.argv
        while argv:
            self.runner_suffixes(argv, cmd.globbed, cwd, depth)  # after each wrapper: nice npx sh -c ..
            name = posixpath.basename(argv[0]) if DYNAMIC not in argv[0] else argv[0]
            if name in ("sudo", "doas"):
                rest = skip_options(argv[1:], frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}))
                cmd.privileged += argv[: len(argv) - len(rest)]
                argv = rest
                continue
            if name in WRAPPER_OPTS_WITH_VALUE:
                if name == "command" and len(argv) > 1 and argv[1] in ("-v", "-V"):
                    break  # ``command -v x`` only looks x up
                if name == "env" and any(a.startswith(("-S", "--split-s")) for a in argv[1:]):
                    self.opaque("env -S splits a string into a command")
                    return None
                bad = unknown_option(name, argv[1:])
                if bad is not None:
                    shown = bad.replace(DYNAMIC, "…")
                    self.opaque(f"{name} {shown}: an option keel does not model (the program it runs is unknown)")
                    break
                if name == "env":
                    after_env = self.env(argv, cmd, cwd)
                    if after_env is None:
                        return None
                    argv = after_env
                    continue
                rest = skip_options(argv[1:], WRAPPER_OPTS_WITH_VALUE[name])
                if name in ("time", "coproc") and rest and (rest[0] in _RESERVED or _ASSIGNMENT_WORD.match(rest[0])):
                    # reserved words to bash: "time X=1 rm x" runs rm with X set, "time X=rm" assigns X in
                    # this shell, "time -p ! cmd" negates cmd; the parser reads X=1 or ! as the program
                    self.opaque(
                        f"{rest[0][:20]!r} after {name}: a reserved word or assignment the parser takes for the program"
                    )
                    return None
                if name == "timeout" and rest:
                    rest = rest[1:]  # the duration
                if name == "nice" and rest and re.fullmatch(r"-\d+", rest[0]):
                    rest = rest[1:]
                cmd.wrappers.append(name)
                if name == "xargs":
                    replace = _xargs_replace(argv[1 : len(argv) - len(rest)])
                    if replace:  # xargs -I{} {} x, xargs -i sh -c '{}': the input goes where {} stands
                        rest = [DYNAMIC if replace in w else w for w in rest]
                    if not rest:
                        rest = ["echo"]
                    rest = [*rest, DYNAMIC]  # xargs appends arguments from its input
                argv = rest
                continue
            if name in SHELLS or _SHELL_NAME.fullmatch(name):
                inner = shell_c(argv[1:])
                if inner is None:
                    self.opaque(f"{name} runs a script keel does not read (a file or standard input)")
                    break
                if DYNAMIC in inner:
                    self.opaque(f"{name} -c runs a string known only at run time")
                    return None
                # a new shell: it sees the environment (the command's own assignments and what was
                # exported, which keel does not track), not this shell's variables; nothing leaks back
                saved, self.vars = self.vars, {k: v for k, v in cmd.assignments}
                try:
                    self._nested_script(inner, cmd, cwd, depth)
                finally:
                    self.vars = saved
                return None
            if name == "eval":
                inner = " ".join(argv[1:])
                if DYNAMIC in inner:
                    self.opaque("eval runs a string known only at run time")
                    return None
                return self._nested_script(inner, cmd, cwd, depth)
            if name in ("find", "fd", "fdfind"):
                argv = self.find_exec(argv, cmd, cwd, depth)
            break
        if argv and argv is not cmd.argv and argv[0] in cmd.globbed:  # `command /bin/[r]m`
            self.opaque(f"the program name {argv[0]!r} is a glob pattern (any program could match)")
            argv = [DYNAMIC, *argv[1:]]
        cmd.argv = argv
        if argv and "/" in argv[0] and DYNAMIC not in argv[0]:
            self.program_path(argv, cmd.cwd or cwd)
        if argv:
            self.evaluated(argv, cwd, depth)
        if argv or cmd.assignments:
            self.out.commands.append(cmd)
        return None

    def program_path(self: WalkerSelf, argv: list[str], cwd: str) -> None:
        """A program named by a path is the file there: a link (``./ls -> /usr/bin/rm``, a repository
        can ship one) runs its target, checked against deny rules too; a path that does not exist
        now may be created by an earlier part of the line (``ln -s /usr/bin/rm r; ./r x``): any program."""
        path = posixpath.normpath(posixpath.join(cwd, argv[0]))
        if not os.path.lexists(path):
            if self.out.commands or self.out.redirects:  # alone on the line it just fails to run
                self.opaque(f"the program {argv[0]!r} does not exist now (the line may create it)")
            return
        real = os.path.realpath(path)
        if posixpath.basename(real) != posixpath.basename(path):
            self.out.also_runs.append(SimpleCommand(argv=[real, *argv[1:]], cwd=cwd))

    def env(self: WalkerSelf, argv: list[str], cmd: SimpleCommand, cwd: str) -> list[str] | None:
        """``env [-i] [-u NAME] [-C DIR] [NAME=VALUE]... CMD``: what it runs, and where."""
        i = 1
        while i < len(argv):
            a = argv[i]
            if a == "--":
                i += 1
                break
            if not a.startswith("-"):
                break
            chdir: str | None = None
            if a in ("-u", "--unset", "-a", "--argv0"):
                i += 2
                continue
            if a in ("-C", "--chdir"):
                chdir = argv[i + 1] if i + 1 < len(argv) else DYNAMIC
                i += 1
            elif a.startswith("--chdir="):
                chdir = a.split("=", 1)[1]
            elif a.startswith("-C"):
                chdir = a[2:]
            i += 1
            if chdir is not None:
                if DYNAMIC in chdir:
                    self.opaque("env -C to a directory known only at run time")
                    return None
                cmd.cwd = posixpath.normpath(posixpath.join(cmd.cwd or cwd, chdir))
        while i < len(argv) and "=" in argv[i] and not argv[i].startswith("-"):
            k, _, v = argv[i].partition("=")
            cmd.assignments.append((k, v))
            if runs_programs(k):
                self.opaque(f"env sets {k}, which changes what it runs")
            i += 1
        cmd.wrappers.append("env")
        return argv[i:]

    def runner_suffixes(self: WalkerSelf, argv: list[str], globbed: list[str], cwd: str, depth: int) -> None:
        """``uv run --with x rm -rf src``: a runner's options are not modelled, so every word
        sequence that could be the command it runs is checked against deny and ask rules."""
        if not argv or DYNAMIC in argv[0]:
            return
        name = posixpath.basename(argv[0])
        second = argv[1] if len(argv) > 1 else ""
        if (name, second) in RUNNER_SUBCOMMANDS:
            first = 2
        elif name in RUNNERS and name not in WRAPPER_OPTS_WITH_VALUE and name not in ("sudo", "doas"):
            first = 1  # (wrappers keel strips exactly need no guessing)
        else:
            return
        candidate = True  # the first word that is not an option may be the program, whatever it is
        for i in range(first, min(len(argv), _MAX_SUFFIXES)):
            word = argv[i]
            value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
            if DYNAMIC not in value and (
                _SHELL_SYNTAX.search(value) or (_BRACE_WORD.search(value) and not re.search(r"[/*?]", value))
            ):
                self.runner_script(value, cwd, depth)  # script -c 'a; rm x', su -c, flock -c, ssh host 'a; b'
            if word.startswith("-"):
                if value is not word and value:  # --command=rm x
                    self.out.also_runs.append(SimpleCommand(argv=value.split(), cwd=cwd))
                continue
            if DYNAMIC in word and not candidate:
                continue  # an unknown argument after the program: not a program itself
            program = DYNAMIC if word in globbed else word  # a glob could name any program
            if candidate:  # the likeliest program: read as keel reads a command (uv run python -c ..)
                self.runner_command([program, *argv[i + 1 :]], cwd, depth)
            candidate = False
            self.out.also_runs.append(SimpleCommand(argv=[program, *argv[i + 1 :]], cwd=cwd))

    def find_exec(self: WalkerSelf, argv: list[str], cmd: SimpleCommand, cwd: str, depth: int) -> list[str]:
        """``find . -exec rm {} ;``: the command after -exec runs too and is checked on its own."""
        kept: list[str] = []
        i = 0
        while i < len(argv):
            a = argv[i]
            if a in ("-exec", "-execdir", "-ok", "-okdir", "-x", "--exec", "-X", "--exec-batch"):
                j = i + 1
                inner: list[str] = []
                while j < len(argv) and argv[j] not in (";", "+", "\\;"):
                    inner.append(argv[j])
                    j += 1
                kept.append(a)
                if inner:
                    if "{}" in inner[0]:  # the program is the file find found: any program
                        inner[0] = DYNAMIC
                    program = posixpath.basename(inner[0])
                    shell = program in SHELLS or program == "eval" or bool(_SHELL_NAME.fullmatch(program))
                    # a file name inside a word (sh -c 'echo {}', {}.bak) is text keel cannot know; a
                    # whole {} is one argument (a path), unless a shell reads it as a script
                    inner = [DYNAMIC if "{}" in w and (w != "{}" or shell) else w for w in inner]
                    nested = SimpleCommand(argv=inner, cwd=cwd)
                    self.unwrap(nested, cwd, depth + 1)
                i = j + 1
                continue
            kept.append(a)
            i += 1
        return kept
