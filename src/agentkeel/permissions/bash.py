"""Static analysis of a Bash command line for permission checks, on tree-sitter-bash's grammar.

:func:`analyse` turns a command string into the simple commands it would execute (each as an
argv with wrappers such as ``timeout``/``env``/``xargs`` stripped and nested commands from
``$(..)``, ``<(..)``, ``bash -c``, ``eval`` and ``find -exec`` pulled out), the files it
redirects to or from, and a list of *problems*: anything keel cannot read with confidence
(syntax errors, function definitions, arguments whose value is only known at run time).
A command with problems is never auto-allowed; deny rules are still checked on every part
that was understood.
"""

from __future__ import annotations

import os
import posixpath
import re
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING, Literal

import msgspec

from agentkeel.permissions.grammar import source_problem, tree_problem, unescaped_blank
from agentkeel.permissions.shellstate import DIR_COMMANDS, Dirs, change, in_this_shell, record_mkdir, safe_assignment
from agentkeel.permissions.words import DYNAMIC as DYNAMIC  # re-exported: the analysis' marker
from agentkeel.permissions.words import ansi_c, dq_literal, has_glob, lone_dollar
from agentkeel.permissions.wrappers import SHELLS, WRAPPER_OPTS_WITH_VALUE, shell_c, skip_options

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

MAX_DEPTH = 4  # nesting of bash -c / eval / $(..) we follow before giving up

_WORDLIKE = frozenset(
    {"word", "string", "raw_string", "concatenation", "number", "simple_expansion", "expansion", "extglob_pattern"}
)
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_SAFE_VARS = frozenset({"HOME", "PWD", "USER", "LOGNAME", "SHELL", "TMPDIR"})


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
    out.cwd = _Walker(out, home or os.path.expanduser("~")).script(parser, command, cwd, depth=0)
    return out


class _Walker:
    def __init__(self, out: BashAnalysis, home: str) -> None:
        self.out = out
        self.home = home
        self.vars: dict[str, str] = {}  # literal assignments seen earlier in the line
        self.stack: list[str] = []  # pushd's directory stack
        self.made: set[str] = set()  # directories mkdir creates earlier in the line
        self.dir_changes = 0  # cd/pushd/popd seen so far (to tell whether a construct changed directory)

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

    def isolated(self, node: Node, cwd: str, depth: int) -> None:
        """A part that runs in a subshell: directory changes inside do not reach the rest."""
        stack = list(self.stack)
        self.statement(node, cwd, depth)
        self.stack = stack

    def statement(self, node: Node, cwd: str, depth: int) -> str:
        t = node.type
        if not node.is_named or t == "comment":
            if node.is_missing:
                self.problem("the command is incomplete")
            return cwd
        if t == "command":
            return self.command(node, cwd, depth)
        if t in ("list", "program", "compound_statement", "do_group", "else_clause", "elif_clause"):
            return self.statements(node.children, cwd, depth)
        if t == "pipeline":
            before = self.dir_changes
            for child in node.children:  # each part runs in a subshell, from the same directory
                self.isolated(child, cwd, depth)
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
            for name, value in assigned:
                self.remember(name, value)
            argv = [keyword, *[f"{n}={v}" for n, v in assigned], *argv]
            self.out.commands.append(SimpleCommand(argv=argv, cwd=cwd))
            return cwd
        if t in ("if_statement", "while_statement", "case_statement", "case_item"):
            before = self.dir_changes
            for child in node.children:
                if child.is_named:
                    self.statement_or_word(child, cwd, depth)
            self.unfollowed_dir_change(before, t)
            return cwd
        if t in ("for_statement", "c_style_for_statement"):
            before = self.dir_changes
            var = node.child_by_field_name("variable")
            if var is not None and var.text is not None:
                self.vars[var.text.decode()] = DYNAMIC
            for child in node.children:
                if child.type in ("word", "string", "raw_string", "concatenation", "simple_expansion", "expansion"):
                    self.word(child, cwd, depth)
                elif child.is_named and child.type != "variable_name":
                    self.statement_or_word(child, cwd, depth)
            self.unfollowed_dir_change(before, t)
            return cwd
        if t in ("test_command", "arithmetic_expansion", "binary_expression", "unary_expression"):
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
        """``( .. )``, ``$( .. )``, ``<( .. )``: a cd inside does not leak out."""
        stack = list(self.stack)
        self.statements(node.children, cwd, depth)
        self.stack = stack

    def unfollowed_dir_change(self, before: int, construct: str) -> None:
        if self.dir_changes != before:
            kind = construct.removesuffix("_statement").replace("_", " ")
            self.problem(f"changes directory inside {kind} (keel does not follow where it ends up)")

    def nested(self, node: Node, cwd: str, depth: int) -> None:
        """Collect every command that runs inside an expression (substitutions)."""
        for child in node.children:
            if child.type in ("command_substitution", "process_substitution"):
                self.subshell(child, cwd, depth + 1)
            elif child.type == "command":
                self.command(child, cwd, depth)
            else:
                self.nested(child, cwd, depth)

    def problem(self, text: str) -> None:
        if text not in self.out.problems:
            self.out.problems.append(text)

    def remember(self, name: str, value: str) -> None:
        self.vars[name] = value

    def assignments(self, node: Node, cwd: str, depth: int) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        targets = [node] if node.type == "variable_assignment" else node.children
        for a in targets:
            if a.type != "variable_assignment":
                continue
            name_node = a.child_by_field_name("name")
            value_node = a.child_by_field_name("value")
            name = name_node.text.decode() if name_node is not None and name_node.text else DYNAMIC
            value = self.word(value_node, cwd, depth) if value_node is not None else ""
            if any(c.type == "+=" for c in a.children):
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
                    words.append(self.word(c, cwd, depth))
            elif child.type in _REDIRECTS:
                self.redirect(child, cwd, depth)
            elif child.is_named or child.type == "$":  # a lone "$" is a literal to bash
                value = self.word(child, cwd, depth)
                if value != DYNAMIC and has_glob(child):
                    globbed.append(value)
                words.append(value)
            elif child.text:  # a token the grammar left bare ("==", "=~"): a word to bash
                words.append(child.text.decode("utf-8", "replace"))
        cmd = SimpleCommand(argv=words, assignments=assignments, globbed=globbed, cwd=cwd)
        after_eval = self.unwrap(cmd, cwd, depth)
        if cmd.argv and cmd.argv[0] in DIR_COMMANDS:
            return self.change_dir(cmd, cwd)
        if cmd.argv and cmd.argv[0] == "mkdir":
            record_mkdir(cmd.argv, Dirs(cwd, self.stack, self.made))
        return after_eval if after_eval is not None and in_this_shell(cmd.wrappers, cmd.privileged) else cwd

    def change_dir(self, cmd: SimpleCommand, cwd: str) -> str:
        self.dir_changes += 1
        if not in_this_shell(cmd.wrappers, cmd.privileged):
            self.problem(f"{cmd.argv[0]} behind a wrapper (bash may not change directory at all)")
            return cwd
        dirs = Dirs(cwd, self.stack, self.made)
        why = change(cmd.argv, dirs, self.home)
        if why:
            self.problem(why)
            return cwd
        return dirs.cwd

    def unwrap(self, cmd: SimpleCommand, cwd: str, depth: int) -> str | None:
        """Strip wrappers and pull nested commands out; append what remains. For ``eval``, the
        directory its script ends in (eval runs in this shell; ``bash -c`` does not)."""
        argv = cmd.argv
        while argv:
            name = posixpath.basename(argv[0]) if DYNAMIC not in argv[0] else argv[0]
            if name in ("sudo", "doas"):
                rest = skip_options(argv[1:], frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}))
                cmd.privileged += argv[: len(argv) - len(rest)]
                argv = rest
                continue
            if name == "env":
                rest = argv[1:]
                while rest and (rest[0].startswith("-") or "=" in rest[0]):
                    opt = rest.pop(0)
                    if opt in ("-S", "--split-string") or opt.startswith(("-S", "--split-string=")):
                        self.problem("env -S splits a string into a command")
                        return None
                    if opt in ("-u", "--unset") and rest:
                        rest.pop(0)
                    elif "=" in opt and not opt.startswith("-"):
                        k, _, v = opt.partition("=")
                        cmd.assignments.append((k, v))
                cmd.wrappers.append("env")
                argv = rest
                continue
            if name in WRAPPER_OPTS_WITH_VALUE and name not in ("env",):
                if name == "command" and len(argv) > 1 and argv[1] in ("-v", "-V"):
                    break  # ``command -v x`` only looks x up
                rest = skip_options(argv[1:], WRAPPER_OPTS_WITH_VALUE[name])
                if name == "timeout" and rest:
                    rest = rest[1:]  # the duration
                if name == "nice" and rest and re.fullmatch(r"-\d+", rest[0]):
                    rest = rest[1:]
                cmd.wrappers.append(name)
                if name == "xargs":
                    if not rest:
                        rest = ["echo"]
                    rest = [*rest, DYNAMIC]  # xargs appends arguments from its input
                argv = rest
                continue
            if name in SHELLS and len(argv) >= 2:
                inner = shell_c(argv[1:])
                if inner is None:
                    break  # ``bash script.sh``: a command like any other
                if DYNAMIC in inner:
                    self.problem(f"{name} -c runs a string known only at run time")
                    return None
                self._nested_script(inner, cmd, cwd, depth)
                return None
            if name == "eval":
                inner = " ".join(argv[1:])
                if DYNAMIC in inner:
                    self.problem("eval runs a string known only at run time")
                    return None
                return self._nested_script(inner, cmd, cwd, depth)
            if name in ("find", "fd", "fdfind"):
                argv = self.find_exec(argv, cmd, cwd, depth)
            break
        cmd.argv = argv
        if argv or cmd.assignments:
            self.out.commands.append(cmd)
        return None

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
                value = self.home + sep + rest
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
            if len(inner) == 1 and inner[0].type == "variable_name" and inner[0].text:
                return self._var(inner[0].text.decode(), cwd)
            self.nested(node, cwd, depth)
            return DYNAMIC
        # arithmetic, arrays, anything else: run what it contains, value unknown
        self.nested(node, cwd, depth)
        return DYNAMIC

    def _var(self, name: str, cwd: str) -> str:
        if name in self.vars:
            return self.vars[name]
        if name == "HOME":
            return self.home
        if name == "PWD":
            return cwd
        return os.environ.get(name, DYNAMIC) if name in _SAFE_VARS else DYNAMIC
