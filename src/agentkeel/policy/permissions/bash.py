"""Static analysis of a Bash command line for permission checks, on tree-sitter-bash's grammar.

:func:`analyse` turns a command string into the simple commands it would execute (each as an
argv with wrappers such as ``timeout``/``env``/``xargs`` stripped and nested commands from
``$(..)``, ``<(..)``, ``bash -c``, ``eval`` and ``find -exec`` pulled out), the files it
redirects to or from, and a list of *problems*: anything keel cannot read with confidence
(syntax errors, function definitions, arguments whose value is only known at run time).
A command with problems is never auto-allowed; deny rules are still checked on every part
that was understood.

The analysis fails closed: a command is read with confidence only when every part of it is in
the modelled subset (ARCHITECTURE.md, "The modelled shell subset"). What it does not model is
a problem; what could run a program keel cannot name (code bash evaluates in an arithmetic
word, a shell or interpreter reading a script keel does not see, a program name that is not a
static word) is also *opaque*: a Bash deny rule then treats the command as running any program.
"""

from __future__ import annotations

import os
import posixpath
import re
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING, Literal

import msgspec

from agentkeel.policy.permissions import sed
from agentkeel.policy.permissions.grammar import source_problem, tree_problem, unescaped_blank
from agentkeel.policy.permissions.shellstate import (
    DIR_COMMANDS,
    Dirs,
    change,
    in_this_shell,
    record_mkdir,
    safe_assignment,
)
from agentkeel.policy.permissions.words import DYNAMIC as DYNAMIC  # re-exported: the analysis' marker
from agentkeel.policy.permissions.words import (
    PLAIN_NAME,
    ansi_c,
    brace_expansion,
    dq_literal,
    has_glob,
    literal_arithmetic,
    lone_dollar,
)
from agentkeel.policy.permissions.wrappers import (
    INTERPRETERS,
    RUNNER_SUBCOMMANDS,
    RUNNERS,
    SHELLS,
    WRAPPER_OPTS_WITH_VALUE,
    interpreter_code,
    shell_c,
    skip_options,
    unknown_option,
)

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

MAX_DEPTH = 4  # nesting of bash -c / eval / $(..) we follow before giving up

_WORDLIKE = frozenset(
    {"word", "string", "raw_string", "concatenation", "number", "simple_expansion", "expansion", "extglob_pattern"}
)
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_SAFE_VARS = frozenset({"HOME", "PWD", "USER", "LOGNAME", "SHELL", "TMPDIR"})
# variables that change which program a later command runs or what the shell runs on its own
_RUN_VARS = frozenset(
    {
        "PATH", "BASH_ENV", "ENV", "IFS", "LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "PS4", "SHELLOPTS",
        "BASHOPTS", "PROMPT_COMMAND", "BASH_LOADABLES_PATH", "EXECIGNORE", "CDPATH", "GLOBIGNORE",
        "POSIXLY_CORRECT", "BASH_XTRACEFD", "HISTFILE", "INPUTRC", "BASH_CMDS", "BASH_ALIASES",
    }
)  # fmt: skip
# shell variables whose assignment bash evaluates arithmetically (for OPTIND in 'a[$(cmd)]' runs cmd)
_ARITH_VARS = frozenset({"OPTIND", "RANDOM", "SRANDOM", "SECONDS", "HISTCMD"})
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
# POSIX special builtins: in POSIX mode (sh, bash --posix) assignments before them persist
_SPECIAL_BUILTINS = frozenset(
    {":", ".", "break", "continue", "eval", "exec", "exit", "export", "readonly", "return", "set", "shift",
     "times", "trap", "unset", "source"}
)  # fmt: skip
# set -o options that do not change which program runs or how words are read
_PLAIN_SET_OPTIONS = frozenset({"errexit", "nounset", "pipefail", "xtrace", "verbose", "noclobber", "notify"})
# git -c keys that never run a program
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
_MAX_SUFFIXES = 32
# variables whose value is a command some program runs (git, ssh, less, editors)
_PROGRAM_VARS = frozenset(
    {
        "GIT_SSH_COMMAND", "GIT_SSH", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "PAGER", "MANPAGER", "EDITOR", "VISUAL",
        "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS", "GIT_PROXY_COMMAND",
        "LESSOPEN", "LESSCLOSE", "RSYNC_RSH", "BROWSER", "SYSTEMD_PAGER", "PSQL_PAGER", "FCEDIT",
    }
)  # fmt: skip
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
_MAX_LOOP_REREADS = 3
# reserved words: tree-sitter-bash 0.25 reads ``time if ..; fi`` and ``coproc { ..; }`` as commands
# named "time" and "then"..., so one of these as a program (or after time/coproc) is a misreading
_RESERVED = frozenset(
    {"if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do", "done",
     "function", "{", "}", "[[", "]]", "!", "in", "time", "coproc"}
)  # fmt: skip
_ARITH_TESTS = frozenset({b"-eq", b"-ne", b"-lt", b"-le", b"-gt", b"-ge"})
_DECLARE = frozenset({"declare", "typeset", "local", "export", "readonly"})
_AWK = frozenset({"awk", "gawk", "mawk", "nawk"})


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


def _runs_programs(name: str) -> bool:
    """A variable that changes which program runs or what runs along: the shell's own (PATH,
    BASH_ENV...), an exported function (``env 'BASH_FUNC_ls%%=() { rm x; }' bash -c ls``), or git
    configuration from the environment (``GIT_CONFIG_KEY_0=core.fsmonitor``, ``GIT_DIR``)."""
    return name in _RUN_VARS or name.startswith(("BASH_FUNC_", "GIT_CONFIG")) or name in _GIT_RUN_VARS


def _in_double_brackets(node: Node) -> bool:
    """Is this expression inside ``[[ .. ]]`` (where -eq's operands are arithmetic) rather than ``[ .. ]``
    (where test compares integers and evaluates nothing)? The grammar gives both one node type."""
    parent = node.parent
    while parent is not None and parent.type != "test_command":
        parent = parent.parent
    return parent is None or not parent.children or parent.children[0].type != "["


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
_SHELL_NAME = re.compile(r"(?:ba|da|z|k|mk|pdk|lk|ok|a|ya|rba|po)?sh[0-9.]*|rbash")
_ASSIGNMENT_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[.*\])?\+?=", re.S)
# what makes an argument a command line rather than a word: blanks, separators, substitutions,
# variables, quotes, escapes (a path glob or brace list alone, 'src/**/*.{ts,tsx}', is an argument)
_SHELL_SYNTAX = re.compile(r"[;&|`$'\"\\\s]|[<>]\(")
_BRACE_WORD = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")  # {rm,x} is a command line to bash; src/*.{js,ts} a path


def _code_word(name: str, word: str, prefixes: tuple[str, ...]) -> bool:
    """A word that carries commands for ``name`` (``+!rm x`` to vim or less, ``.shell rm`` to sqlite3)."""
    if not word.startswith(prefixes) or re.fullmatch(r"\+\d*|\+/[^|]*", word):  # +N, +/pattern: a place
        return False
    return name not in ("less", "more", "most") or bool(re.search(r"[!|]", word))  # less: +! and +| run commands


def live_backquote(raw: str) -> bool:
    """An unescaped backquote in raw word text."""
    i = 0
    while i < len(raw):
        if raw[i] == "\\":
            i += 2
        elif raw[i] == "`":
            return True
        else:
            i += 1
    return False


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


@lru_cache(maxsize=1)
def _parser() -> Parser | None:
    try:
        import tree_sitter
        import tree_sitter_bash
    except ImportError:  # pragma: no cover - the bash extra is a core dependency; fail closed regardless
        return None
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def analyse(command: str, cwd: str, home: str | None = None) -> BashAnalysis:
    """Analyse ``command`` as run in ``cwd``. Never raises on any input."""
    out = BashAnalysis()
    parser = _parser()
    if parser is None:
        out.problems.append("no shell parser available (install tree-sitter-bash)")
        return out
    if "\x00" in command:
        out.problems.append("the command contains a NUL byte")
        return out
    try:
        out.cwd = _Walker(out, home or os.path.expanduser("~")).script(parser, command, cwd, depth=0)
    except RecursionError:  # constructs nested hundreds deep: not read, so not confident (and opaque)
        out.problems.append("the command is nested too deeply to check")
        out.opaque.append("the command is nested too deeply to check")
    return out


class _Walker:
    def __init__(self, out: BashAnalysis, home: str) -> None:
        self.out = out
        self.home = home
        self.vars: dict[str, str] = {}  # literal assignments seen earlier in the line
        self.stack: list[str] = []  # pushd's directory stack
        self.made: set[str] = set()  # directories mkdir creates earlier in the line
        self.dir_changes = 0  # cd/pushd/popd seen so far (to tell whether a construct changed directory)
        # names declared -i earlier in the line, and the shell's own that evaluate what is assigned to them
        self.integers: set[str] = set(_ARITH_VARS)
        self.readonly: set[str] = set()  # names made readonly earlier in the line (assignments fail)
        self.cased: set[str] = set()  # names declared -l/-u/-c earlier in the line (assignments change case)
        self.loops = 0  # loop bodies being read a second time

    # --- statements ----------------------------------------------------------------------

    def script(self, parser: Parser, source: str, cwd: str, depth: int) -> str:
        if depth > MAX_DEPTH:
            self.problem("commands nested too deeply to check")
            return cwd
        unreadable = source_problem(source)
        if unreadable:
            self.problem(unreadable)
            return cwd
        data = source.encode("utf-8", "surrogatepass")
        tree = parser.parse(data)
        root = tree.root_node
        if root.has_error:
            self.problem("the command does not parse as shell syntax")
        else:
            misread = tree_problem(root, data)
            if misread:
                self.problem(misread)
        return self.statements(root.children, cwd, depth)

    def statements(self, nodes: list[Node], cwd: str, depth: int) -> str:
        for i, node in enumerate(nodes):
            if i + 1 < len(nodes) and nodes[i + 1].type == "&":  # runs in the background: a subshell
                self.isolated(node, cwd, depth)
            else:
                cwd = self.statement(node, cwd, depth)
        return cwd

    def isolated(self, node: Node, cwd: str, depth: int) -> dict[str, str]:
        """A part that runs in a subshell: directory changes and assignments inside do not reach
        the rest. Returns the variables as the part left them."""
        stack, saved = list(self.stack), dict(self.vars)
        self.statement(node, cwd, depth)
        end = self.vars
        self.stack, self.vars = stack, saved
        return end

    def branch(self, nodes: list[Node], cwd: str, depth: int) -> dict[str, str]:
        """A part that may or may not run (an if/case arm, the right of && or ||, a loop body):
        walked from the variables as they are now; returns them as the part left them."""
        saved = dict(self.vars)
        for n in nodes:
            self.statement_or_word(n, cwd, depth)
        end = self.vars
        self.vars = saved
        return end

    def merge(self, ends: list[dict[str, str]]) -> None:
        """After parts that may or may not have run: a variable any of them changed is unknown."""
        changed = {k for end in ends for k in set(end) | set(self.vars) if end.get(k) != self.vars.get(k)}
        for k in changed:
            self.vars[k] = DYNAMIC

    def loop(self, nodes: list[Node], cwd: str, depth: int) -> None:
        """A loop body runs any number of times and sees what earlier rounds assigned: when the
        first round changes a variable, the body is read again with it unknown."""
        before = dict(self.vars)
        self.merge([self.branch(nodes, cwd, depth)])
        if self.vars == before:
            return
        if self.loops >= _MAX_LOOP_REREADS:  # each nested loop could double the work
            self.problem("assignments in loops nested too deeply to follow")
            return
        self.loops += 1
        try:
            self.merge([self.branch(nodes, cwd, depth)])
        finally:
            self.loops -= 1

    def statement(self, node: Node, cwd: str, depth: int) -> str:
        t = node.type
        if not node.is_named or t == "comment":
            if node.is_missing:
                self.problem("the command is incomplete")
            return cwd
        if t == "command":
            return self.command(node, cwd, depth)
        if t == "compound_statement" and node.children and node.children[0].type == "((":
            self.arithmetic(node, (node.text or b"")[2:-2].decode("utf-8", "replace"), cwd, depth)
            return cwd
        if t == "compound_statement" and not node.named_children:
            # tree-sitter-bash 0.25 reads "{}" as an empty group; to bash it is a command named "{}"
            # (what xargs -I{} or find -exec put there), and "{ }" is a syntax error
            self.problem('an empty { } group (bash reads "{}" as a command name)')
            return cwd
        if t == "list":
            conditional = False
            for child in node.children:
                if child.type in ("&&", "||"):
                    conditional = True
                elif conditional:  # runs only if the left side succeeded (or failed)
                    saved = dict(self.vars)
                    cwd = self.statement(child, cwd, depth)
                    end, self.vars = self.vars, saved
                    self.merge([end])
                else:
                    cwd = self.statement(child, cwd, depth)
            return cwd
        if t in ("program", "compound_statement", "do_group", "else_clause", "elif_clause"):
            return self.statements(node.children, cwd, depth)
        if t == "pipeline":
            before = self.dir_changes
            # each part runs in a subshell, from the same directory; with lastpipe the last part
            # runs in this shell, so what any part assigns is unknown afterwards
            self.merge([self.isolated(child, cwd, depth) for child in node.children])
            if self.dir_changes != before:  # unless lastpipe is set, which keel cannot see
                self.problem("changes directory inside a pipeline (bash may or may not keep it)")
            return cwd
        if t == "subshell":
            self.subshell(node, cwd, depth)
            return cwd
        if t == "negated_command":
            return self.statements(node.children, cwd, depth)
        if t == "redirected_statement":
            for child in node.children:
                if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                    self.redirect(child, cwd, depth)
                else:
                    cwd = self.statement(child, cwd, depth)
            return cwd
        if t in ("variable_assignment", "variable_assignments"):
            for name, value in self.assignments(node, cwd, depth):
                self.remember(name, value)
                if not safe_assignment(name, value):
                    self.out.commands.append(SimpleCommand(argv=[], assignments=[(name, value)], cwd=cwd))
            return cwd
        if t in ("declaration_command", "unset_command"):
            argv = [self.word(c, cwd, depth) for c in node.children if c.is_named and c.type != "variable_assignment"]
            keyword = node.children[0].text.decode() if node.children and node.children[0].text else t
            assigned = self.assignments(node, cwd, depth)
            argv = [keyword, *[f"{n}={v}" for n, v in assigned], *argv]
            self.names_set(argv)
            for name, value in assigned:
                if keyword == "local":  # outside a function local fails: the variable keeps its value
                    self.vars[name] = DYNAMIC
                elif name not in self.vars or self.vars[name] != DYNAMIC:
                    self.remember(name, value)
            flags = "".join(a[1:] for a in argv[1:] if a.startswith("-"))
            if keyword == "readonly" or "r" in flags:
                self.readonly |= {a.split("=", 1)[0] for a in argv[1:] if not a.startswith(("-", "+"))}
            self.out.commands.append(SimpleCommand(argv=argv, cwd=cwd))
            return cwd
        if t == "if_statement":
            before = self.dir_changes
            arms: list[list[Node]] = []
            for child in node.children:
                if child.type == "then":
                    arms.append([])
                elif not child.is_named:
                    continue
                elif not arms:  # the condition: always runs
                    self.statement_or_word(child, cwd, depth)
                elif child.type in ("elif_clause", "else_clause"):
                    arms.append([child])
                else:
                    arms[-1].append(child)
            self.merge([self.branch(arm, cwd, depth) for arm in arms])
            self.unfollowed_dir_change(before, t)
            return cwd
        if t == "case_statement":
            before = self.dir_changes
            items = [c for c in node.children if c.type == "case_item"]
            for child in node.children:
                if child.is_named and child.type != "case_item":
                    self.statement_or_word(child, cwd, depth)
            self.merge([self.branch([item], cwd, depth) for item in items])
            self.unfollowed_dir_change(before, t)
            return cwd
        if t == "case_item":
            for child in node.children:
                if child.is_named:
                    self.statement_or_word(child, cwd, depth)
            return cwd
        if t in ("while_statement", "until_statement"):
            before = self.dir_changes
            self.loop([c for c in node.children if c.is_named], cwd, depth)
            self.unfollowed_dir_change(before, t)
            return cwd
        if t in ("for_statement", "c_style_for_statement"):
            before = self.dir_changes
            var = node.child_by_field_name("variable")
            if var is not None and var.text is not None:
                self.assigned_at_run_time(var.text.decode(), "for")
            body: list[Node] = []
            for child in node.children:
                if t == "c_style_for_statement" and child.is_named and child.type != "do_group":
                    text = (child.text or b"").decode("utf-8", "replace")
                    self.arithmetic(child, text, cwd, depth)
                    for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text):
                        self.vars[name] = DYNAMIC
                elif child.type in ("word", "string", "raw_string", "concatenation", "simple_expansion", "expansion"):
                    self.word(child, cwd, depth)
                elif child.is_named and child.type != "variable_name":
                    body.append(child)
            self.loop(body, cwd, depth)
            self.unfollowed_dir_change(before, t)
            return cwd
        if t == "arithmetic_expansion":
            self.word(node, cwd, depth)
            return cwd
        if t in ("test_command", "binary_expression", "unary_expression"):
            self.nested(node, cwd, depth)
            return cwd
        if t == "function_definition":
            self.problem("defines a shell function (it could shadow any command)")
            self.nested(node, cwd, depth)
            return cwd
        if t == "ERROR":
            self.problem("the command does not parse as shell syntax")
            self.nested(node, cwd, depth)
            return cwd
        self.problem(f"unsupported shell construct: {t}")
        self.nested(node, cwd, depth)
        return cwd

    def statement_or_word(self, node: Node, cwd: str, depth: int) -> None:
        if node.type in _WORDLIKE:
            self.word(node, cwd, depth)
        else:
            self.statement(node, cwd, depth)

    def subshell(self, node: Node, cwd: str, depth: int) -> None:
        """``( .. )``, ``$( .. )``, ``<( .. )``: a cd or an assignment inside does not leak out."""
        raw = (node.text or b"").decode("utf-8", "replace")
        if node.type == "command_substitution" and raw.startswith("`") and re.search(r"\\[`$]", raw[1:-1]):
            # inside `..` bash unescapes \` and \$ before running the text: `echo \`rm x\`` runs rm x,
            # while the parser reads an escaped, literal backquote
            self.opaque(f"an escaped backquote or dollar inside `..` ({raw[:60]!r}): bash runs what it unescapes")
        stack, saved = list(self.stack), dict(self.vars)
        self.statements(node.children, cwd, depth)
        self.stack, self.vars = stack, saved

    def substitution_script(self, source: str, cwd: str, depth: int) -> None:
        """A backquoted command keel read out of text (a here-document body): run in a subshell."""
        parser = _parser()
        assert parser is not None
        stack, saved = list(self.stack), dict(self.vars)
        self.script(parser, source, cwd, depth + 1)
        self.stack, self.vars = stack, saved

    def trap_action(self, source: str, cwd: str, depth: int) -> None:
        """A trap's action runs later in this shell, before any later command (DEBUG) or when a
        signal comes: what it assigns or where it changes directory holds from then on, at times
        keel does not follow (``trap 'X=rm' DEBUG; X=cat; $X f`` runs rm)."""
        parser = _parser()
        assert parser is not None
        state = (dict(self.vars), set(self.integers), set(self.cased), set(self.readonly), self.dir_changes)
        stack = list(self.stack)
        self.script(parser, source, cwd, depth + 1)
        after = (self.vars, self.integers, self.cased, self.readonly, self.dir_changes)
        self.stack, self.vars = stack, state[0]
        if after != state:
            self.opaque("a trap action that assigns variables or changes directory (keel does not follow when it runs)")

    def unfollowed_dir_change(self, before: int, construct: str) -> None:
        if self.dir_changes != before:
            kind = construct.removesuffix("_statement").replace("_", " ")
            self.problem(f"changes directory inside {kind} (keel does not follow where it ends up)")

    def nested(self, node: Node, cwd: str, depth: int) -> None:
        """Collect every command that runs inside an expression (substitutions), and what bash
        evaluates there that keel does not model (arithmetic, subscripts, unread backquotes)."""
        for child in node.children:
            t = child.type
            if t in ("command_substitution", "process_substitution"):
                self.subshell(child, cwd, depth + 1)
            elif t == "command":
                self.command(child, cwd, depth)
            elif t in ("arithmetic_expansion", "expansion"):
                self.word(child, cwd, depth)
            elif t == "subscript":
                self.subscript(child, cwd, depth)
            elif t == "word":
                self.backquotes(child)
            elif (
                t == "binary_expression"
                and _in_double_brackets(child)
                and any(c.type == "test_operator" and c.text in _ARITH_TESTS for c in child.children)
            ):
                for c in child.children:  # [[ a -eq b ]]: both sides are evaluated arithmetically
                    if c.is_named and c.type != "test_operator":
                        value = self.word(c, cwd, depth)
                        if not literal_arithmetic(value):
                            shown = (c.text or b"").decode("utf-8", "replace")
                            self.opaque(f"[[ … {shown!r} … ]] is evaluated arithmetically (it can run code)")
            elif t == "unary_expression" and any(
                c.type == "test_operator" and c.text in (b"-v", b"-R") for c in child.children
            ):
                for c in child.children:
                    if c.is_named and c.type != "test_operator":
                        value = self.word(c, cwd, depth)
                        if not PLAIN_NAME.fullmatch(value):
                            self.opaque(
                                f"-v {value.replace(DYNAMIC, '…')!r} in a test evaluates a subscript (it can run code)"
                            )
            else:
                self.nested(child, cwd, depth)

    def arithmetic(self, node: Node, text: str, cwd: str, depth: int) -> None:
        """Text bash evaluates arithmetically: keel models literal arithmetic only."""
        if not literal_arithmetic(text):
            shown = text.strip()[:60]
            self.opaque(f"bash evaluates {shown!r} arithmetically (a name or expansion in it can run code)")
        self.nested(node, cwd, depth)

    def subscript(self, node: Node, cwd: str, depth: int) -> None:
        data = node.text or b""
        index = data[data.find(b"[") + 1 : data.rfind(b"]")].decode("utf-8", "replace")
        if index not in ("@", "*") and not literal_arithmetic(index):
            self.opaque(f"the array subscript [{index[:60]}] is evaluated by bash (it can run code)")
        self.nested(node, cwd, depth)

    def backquotes(self, node: Node) -> None:
        """A backquote inside what the parser took for a plain word (``${x=`rm`}``) runs a command
        the parser did not read."""
        raw = (node.text or b"").decode("utf-8", "replace")
        if live_backquote(raw):
            self.opaque(f"a backquoted command the shell parser did not read ({raw[:60]!r})")

    def reparse_body(self, text: str, cwd: str, depth: int) -> None:
        """A body tree-sitter-bash 0.25 leaves as text (after ``<<-``): read it as a ``<<`` body."""
        parser = _parser()
        assert parser is not None
        lines = [line.lstrip("\t") for line in text.split("\n")]
        delimiter = "KEEL_HEREDOC_END"
        if delimiter in lines:
            self.opaque("a here-document body keel cannot read")
            return
        source = f": <<{delimiter}\n" + "\n".join(lines).rstrip("\n") + f"\n{delimiter}\n"
        data = source.encode("utf-8", "surrogatepass")
        root = parser.parse(data).root_node
        bodies: list[Node] = []
        stack = [root]
        while stack:
            n = stack.pop()
            if n.type == "heredoc_body":
                bodies.append(n)
            stack.extend(n.children)
        redirects = [n for n in root.children[0].children if n.type == "heredoc_redirect"] if root.children else []
        strays = [
            c
            for r in redirects
            for c in r.children
            if c.is_named and c.type not in ("heredoc_start", "heredoc_body", "heredoc_end")
        ]
        if root.has_error or tree_problem(root, data) or len(bodies) != 1 or strays:
            self.opaque("a here-document body keel cannot read")
            return
        body = bodies[0]
        if not body.named_children and "$" in (body.text or b"").decode("utf-8", "replace"):
            self.opaque("an expansion in a here-document body the shell parser did not read")
            return
        self.nested(body, cwd, depth)

    def heredoc_body(self, raw: str, cwd: str, depth: int) -> None:
        """An unquoted here-document body: bash runs its backquoted commands (the parser reads only
        ``$(..)`` there), so keel reads them as bash does: text up to the next unescaped backquote,
        with backslash-escaped backslashes, dollars and backquotes unescaped."""
        # tree-sitter-bash 0.25 reads $((x)) in a body as $( (x) ): bash evaluates it arithmetically
        for m in re.finditer(r"\$\(\((.*?)\)\)|\$\[(.*?)\]", raw, flags=re.S):
            text = m.group(1) if m.group(1) is not None else m.group(2)
            if not literal_arithmetic(text):
                self.opaque(
                    f"bash evaluates {text.strip()[:60]!r} arithmetically (a name or expansion in it can run code)"
                )
        i, n = 0, len(raw)
        while i < n:
            ch = raw[i]
            if ch == "\\":
                i += 2
                continue
            if ch != "`":
                i += 1
                continue
            j, inner = i + 1, []
            while j < n and raw[j] != "`":
                if raw[j] == "\\" and j + 1 < n:
                    if raw[j + 1] == "`":
                        self.opaque("nested backquotes in a here-document (keel does not read them)")
                        return
                    inner.append(raw[j + 1] if raw[j + 1] in "$\\" else raw[j : j + 2])
                    j += 2
                    continue
                inner.append(raw[j])
                j += 1
            if j >= n:
                self.opaque("an unterminated backquote in a here-document")
                return
            self.substitution_script("".join(inner), cwd, depth)
            i = j + 1

    def problem(self, text: str) -> None:
        if text not in self.out.problems:
            self.out.problems.append(text)

    def opaque(self, text: str) -> None:
        """A part that may run a program keel cannot name: not confident, and any program to deny rules."""
        self.problem(text)
        if text not in self.out.opaque:
            self.out.opaque.append(text)

    def program_value(self, name: str, value: str, cwd: str) -> None:
        """``GIT_SSH_COMMAND='rm x' git fetch``: the value is a command a program may run."""
        if name in _PROGRAM_VARS and value:
            self.out.also_runs.append(SimpleCommand(argv=value.split() or [value], cwd=cwd))

    def remember(self, name: str, value: str) -> None:
        self.program_value(name, value, self.out.cwd or "")
        if _runs_programs(name):
            self.opaque(f"sets {name}, which changes what later commands run")
        if name in self.integers and not literal_arithmetic(value):
            self.opaque(f"{name} was declared -i: bash evaluates {value.replace(DYNAMIC, '…')!r} arithmetically")
        unknown = name in _SHELL_SET_VARS or name in self.readonly or name in self.integers or name in self.cased
        self.vars[name] = DYNAMIC if unknown else value

    def assigned_at_run_time(self, name: str, how: str) -> None:
        """``read n``, ``printf -v n``, ``for n in``, ``${n:=..}``: a value known only at run time. For a
        name declared -i bash evaluates that value arithmetically, so it can run code."""
        base = name.split("[", 1)[0]
        if _runs_programs(base):  # for PATH in .; do ls; done runs ./ls
            self.opaque(f"{how} sets {base}, which changes what later commands run")
        if base in self.integers:
            self.opaque(f"{how} assigns {base}, which was declared -i: bash evaluates the value (it can run code)")
        self.vars[base] = DYNAMIC

    def assignments(self, node: Node, cwd: str, depth: int) -> list[tuple[str, str]]:
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

    # --- commands ------------------------------------------------------------------------

    def command(self, node: Node, cwd: str, depth: int) -> str:
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
            if _runs_programs(name):
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

    def change_dir(self, cmd: SimpleCommand, cwd: str) -> str:
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

    def unwrap(self, cmd: SimpleCommand, cwd: str, depth: int) -> str | None:
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

    def program_path(self, argv: list[str], cwd: str) -> None:
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

    def env(self, argv: list[str], cmd: SimpleCommand, cwd: str) -> list[str] | None:
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
            if _runs_programs(k):
                self.opaque(f"env sets {k}, which changes what it runs")
            i += 1
        cmd.wrappers.append("env")
        return argv[i:]

    def runner_suffixes(self, argv: list[str], globbed: list[str], cwd: str, depth: int) -> None:
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

    def runner_command(self, argv: list[str], cwd: str, depth: int) -> None:
        """The command a runner most likely runs, read as a command of its own (wrappers, ``sh -c``
        scripts, inline code, awk programs): what it runs meets deny and ask rules, and what keel
        cannot read there is a problem here too."""
        sub = BashAnalysis()
        if depth < MAX_DEPTH:
            _Walker(sub, self.home).unwrap(SimpleCommand(argv=argv, cwd=cwd), cwd, depth + 1)
        self.out.also_runs += [c for c in sub.commands if c.argv] + sub.also_runs
        for why in sub.problems:
            (self.opaque if why in sub.opaque else self.problem)(why)

    def runner_script(self, text: str, cwd: str, depth: int) -> None:
        """A runner's argument that reads as shell code (it may be the command line the runner hands
        to a shell): every program in it is checked against deny and ask rules."""
        parser = _parser()
        assert parser is not None
        sub = BashAnalysis()
        if depth < MAX_DEPTH:
            _Walker(sub, self.home).script(parser, text, cwd, depth + 1)
        else:
            sub.opaque.append("commands nested too deeply to check")
        self.out.also_runs += [c for c in sub.commands if c.argv] + sub.also_runs
        for why in [*sub.problems, *sub.opaque]:  # a script keel cannot read there is one here
            (self.opaque if why in sub.opaque else self.problem)(why)

    def evaluated(self, argv: list[str], cwd: str, depth: int) -> None:
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

    def git_setting(self, setting: str, cwd: str) -> None:
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

    def program_options(self, name: str, args: list[str], cwd: str) -> None:
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

    def names_set(self, argv: list[str]) -> None:
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
                if _runs_programs(n.split("[", 1)[0]):  # without PATH bash searches its default path, "." included
                    self.opaque(f"unset {n} changes what later commands run")
                self.vars[n.split("[", 1)[0]] = DYNAMIC
            elif name not in _DECLARE:
                self.assigned_at_run_time(n, name)

    def _nested_script(self, inner: str, cmd: SimpleCommand, cwd: str, depth: int) -> str:
        parser = _parser()
        assert parser is not None
        if cmd.assignments or cmd.privileged:
            self.out.commands.append(
                SimpleCommand(argv=[], assignments=cmd.assignments, privileged=cmd.privileged, cwd=cwd)
            )
        return self.script(parser, inner, cwd, depth + 1)

    def find_exec(self, argv: list[str], cmd: SimpleCommand, cwd: str, depth: int) -> list[str]:
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

    def redirect(self, node: Node, cwd: str, depth: int) -> None:
        if node.type == "heredoc_redirect":
            self.nested(node, cwd, depth)
            start = next((c for c in node.children if c.type == "heredoc_start"), None)
            quoted = start is None or any(q in (start.text or b"") for q in (b"'", b'"', b"\\"))
            if quoted or start is None:  # a quoted delimiter keeps the body literal
                return
            # the body as bash reads it: from the line after the delimiter word to the end line (the
            # parser may leave it unread after <<-, or misread it as words)
            root = node
            while root.parent is not None:
                root = root.parent
            data = root.text or b""
            newline = data.find(b"\n", start.end_byte)
            end = next((c for c in node.children if c.type == "heredoc_end"), None)
            if newline < 0:
                return
            text = data[newline + 1 : end.start_byte if end is not None else len(data)].decode("utf-8", "replace")
            bodies = [c for c in node.children if c.type == "heredoc_body"]
            misread = any(
                c.is_named and c.type not in ("heredoc_start", "heredoc_body", "heredoc_end") and c.start_byte > newline
                for c in node.children
            )
            if misread or (re.search(r"(?<!\\)\$", text) and not any(b.named_children for b in bodies)):
                self.reparse_body(text, cwd, depth)
            self.heredoc_body(text, cwd, depth)
            return
        if node.type == "herestring_redirect":
            for c in node.children:
                if c.is_named:
                    self.word(c, cwd, depth)
            return
        op = ""
        targets: list[Node] = []
        for c in node.children:
            if c.type == "$":  # a lone "$" is a word too (cat >$ a writes the file "$")
                targets.append(c)
            elif not c.is_named:
                op = c.type
            elif c.type != "file_descriptor":
                targets.append(c)
            elif not (c.text or b"").isdigit():
                # the grammar takes "-f2" in "cat -f2>a" for a descriptor; to bash it is an argument
                self.problem("a redirect descriptor that is not a number")
        if not targets:
            self.problem("a redirect without a target")
            return
        if len(targets) > 1:
            # "echo x >.git/hooks/pre-commit junk": bash writes the first word and passes the rest
            # to the command; tree-sitter-bash 0.25 puts them all in the redirect
            self.problem("words after a redirect target (the shell parser does not say whose they are)")
        dest = targets[0]
        target = self.word(dest, cwd, depth)
        if op in (">&", "<&", ">&-", "<&-") and re.fullmatch(r"\d+|-", target):
            return  # 2>&1: duplicates a descriptor, names no file
        mode: Literal["read", "write"] = "read" if op in ("<", "<&") else "write"
        self.out.redirects.append(Redirect(op, target, mode, cwd))
        if op == "<>":
            self.out.redirects.append(Redirect(op, target, "read", cwd))

    # --- words ---------------------------------------------------------------------------

    def word(self, node: Node, cwd: str, depth: int) -> str:
        """The value of a word after quote removal; DYNAMIC marks parts known only at run time."""
        t = node.type
        raw = node.text.decode("utf-8", "replace") if node.text is not None else ""
        if t == "$":
            return lone_dollar(node)
        if t in ("word", "concatenation") and brace_expansion(node):
            # bash expands .{e,}nv into .env nv: keel does not expand braces, so the words are unknown
            self.problem(f"brace expansion in {raw[:60]!r} (keel does not expand it)")
            self.nested(node, cwd, depth)
            return DYNAMIC
        if t == "word" and live_backquote(raw):
            self.backquotes(node)
            return DYNAMIC
        if t == "word":
            if unescaped_blank(raw):
                # tree-sitter-bash 0.25 reads "status\n\\rm" as one word; bash runs rm on a new line
                self.problem(f"a blank inside the word {raw!r}: the parser and bash disagree")
                return DYNAMIC
            if re.search(r"(?<!\\)\{[^{}]*(,|\.\.)[^{}]*\}", raw):
                return DYNAMIC  # brace expansion
            if re.search(r"(?<!\\)[=:]~", raw):
                return DYNAMIC  # bash expands ~ after = or : in words that look like assignments (a=~)
            value = re.sub(r"\\(.)", r"\1", raw.replace("\\\n", ""), flags=re.S)
            # a leading unquoted ~ (not \~, not ''~): "~" or "~/..." is the home directory; any other
            # prefix is a user name or bash's own rules (it expands ~=x, keeps ~'' literal): unknown
            joined = node.parent is not None and node.parent.type == "concatenation"
            if raw.startswith("~") and not (joined and node.prev_sibling is not None):
                head, sep, rest = value.partition("/")
                if head != "~" or (joined and not sep):
                    return DYNAMIC
                home = self.vars.get("HOME", self.home)  # HOME=$PWD; cat ~/.env reads the project's
                if DYNAMIC in home:
                    return DYNAMIC
                value = home + sep + rest
            return value
        if t in ("number", "variable_name", "test_operator", "regex", "extglob_pattern"):
            return raw
        if t == "raw_string":
            return raw[1:-1]
        if t == "ansi_c_string":
            return ansi_c(raw[2:-1])
        if t == "string":
            # the literal text is everything between the quotes that is not an expansion, read from
            # the source: the grammar leaves some of it (a lone blank) outside every token
            data = node.text or b""
            if len(data) < 2 or data[:1] != b'"' or data[-1:] != b'"':
                return DYNAMIC
            parts: list[str] = []
            pos = 1
            for c in node.children:
                if (c.is_named and c.type != "string_content") or c.type == "$":
                    parts.append(dq_literal(data[pos : c.start_byte - node.start_byte]))
                    parts.append(self.word(c, cwd, depth))
                    pos = c.end_byte - node.start_byte
            parts.append(dq_literal(data[pos:-1]))
            return "".join(parts)
        if t == "translated_string":
            return DYNAMIC  # $"...": the locale may translate it
        if t == "concatenation":
            if raw.startswith("{") and re.search(r"[,.]", raw) and raw.endswith("}"):
                return DYNAMIC
            return "".join(self.word(c, cwd, depth) for c in node.children if c.is_named or c.type in ("word", "$"))
        if t == "simple_expansion":
            name = raw[1:]
            if name in self.vars:
                return self.vars[name]
            if name in _SAFE_VARS:
                return self.home if name == "HOME" else (cwd if name == "PWD" else os.environ.get(name, DYNAMIC))
            return DYNAMIC
        if t in ("command_substitution", "process_substitution"):
            self.subshell(node, cwd, depth + 1)
            return DYNAMIC
        if t == "expansion":
            inner = [c for c in node.children if c.is_named]
            plain = [c.type for c in node.children] == ["${", "variable_name", "}"]
            if plain and inner[0].text:
                return self._var(inner[0].text.decode(), cwd)
            self.expansion(node)
            self.nested(node, cwd, depth)
            return DYNAMIC
        if t == "arithmetic_expansion":
            body = raw[3:-2] if raw.startswith("$((") else raw[2:-1]
            self.arithmetic(node, body, cwd, depth)
            return DYNAMIC
        # arithmetic, arrays, anything else: run what it contains, value unknown
        self.nested(node, cwd, depth)
        return DYNAMIC

    def expansion(self, node: Node) -> None:
        """``${..}`` beyond a plain name: what bash evaluates in it. Substring offsets are
        arithmetic, ``${!x}`` and ``${x@P}`` expand a value again, ``${x=..}`` assigns x."""
        kids = node.children
        types = [c.type for c in kids]
        if "!" in types[:2] or "@" in types:
            self.opaque(
                f"{(node.text or b'').decode('utf-8', 'replace')[:60]!r} expands a value again (it can run code)"
            )
        if ":" in types:  # ${x:offset:length}
            for c in kids[types.index(":") + 1 :]:
                if c.is_named and not (c.type == "number" and literal_arithmetic((c.text or b"").decode())):
                    shown = (c.text or b"").decode("utf-8", "replace")[:40]
                    self.opaque(f"the substring offset {shown!r} is evaluated arithmetically")
        if any(ty in ("=", ":=") for ty in types):
            name = next((c for c in kids if c.type == "variable_name"), None)
            if name is not None and name.text:
                self.assigned_at_run_time(name.text.decode(), "${..=..}")  # assigned if unset

    def _var(self, name: str, cwd: str) -> str:
        if name in self.vars:
            return self.vars[name]
        if name == "HOME":
            return self.home
        if name == "PWD":
            return cwd
        return os.environ.get(name, DYNAMIC) if name in _SAFE_VARS else DYNAMIC
