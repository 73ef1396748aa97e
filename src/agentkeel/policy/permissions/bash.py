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
import re
from functools import lru_cache
from typing import TYPE_CHECKING

from agentkeel.policy.permissions.bashbuiltins import WalkerBuiltins
from agentkeel.policy.permissions.bashcommands import WalkerCommands
from agentkeel.policy.permissions.bashmodel import BashAnalysis, SimpleCommand
from agentkeel.policy.permissions.bashredirects import WalkerRedirects
from agentkeel.policy.permissions.bashvars import WalkerVariables
from agentkeel.policy.permissions.bashwords import WalkerWords
from agentkeel.policy.permissions.grammar import source_problem, tree_problem
from agentkeel.policy.permissions.shellstate import safe_assignment
from agentkeel.policy.permissions.words import DYNAMIC as DYNAMIC  # re-exported: the analysis' marker

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

MAX_DEPTH = 4  # nesting of bash -c / eval / $(..) we follow before giving up

_WORDLIKE = frozenset(
    {"word", "string", "raw_string", "concatenation", "number", "simple_expansion", "expansion", "extglob_pattern"}
)
# shell variables whose assignment bash evaluates arithmetically (for OPTIND in 'a[$(cmd)]' runs cmd)
_ARITH_VARS = frozenset({"OPTIND", "RANDOM", "SRANDOM", "SECONDS", "HISTCMD"})
_MAX_LOOP_REREADS = 3


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
        out.cwd = Walker(out, home or os.path.expanduser("~")).script(parser, command, cwd, depth=0)
    except RecursionError:  # constructs nested hundreds deep: not read, so not confident (and opaque)
        out.problems.append("the command is nested too deeply to check")
        out.opaque.append("the command is nested too deeply to check")
    return out


class Walker(WalkerVariables, WalkerWords, WalkerCommands, WalkerBuiltins, WalkerRedirects):
    """Walks a parsed line into ``out``: statements here; variables, words, simple commands, builtins
    and redirections in the ``bash*.py`` modules beside this one."""

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

    def problem(self, text: str) -> None:
        if text not in self.out.problems:
            self.out.problems.append(text)

    def opaque(self, text: str) -> None:
        """A part that may run a program keel cannot name: not confident, and any program to deny rules."""
        self.problem(text)
        if text not in self.out.opaque:
            self.out.opaque.append(text)

    def runner_command(self, argv: list[str], cwd: str, depth: int) -> None:
        """The command a runner most likely runs, read as a command of its own (wrappers, ``sh -c``
        scripts, inline code, awk programs): what it runs meets deny and ask rules, and what keel
        cannot read there is a problem here too."""
        sub = BashAnalysis()
        if depth < MAX_DEPTH:
            Walker(sub, self.home).unwrap(SimpleCommand(argv=argv, cwd=cwd), cwd, depth + 1)
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
            Walker(sub, self.home).script(parser, text, cwd, depth + 1)
        else:
            sub.opaque.append("commands nested too deeply to check")
        self.out.also_runs += [c for c in sub.commands if c.argv] + sub.also_runs
        for why in [*sub.problems, *sub.opaque]:  # a script keel cannot read there is one here
            (self.opaque if why in sub.opaque else self.problem)(why)

    def _nested_script(self, inner: str, cmd: SimpleCommand, cwd: str, depth: int) -> str:
        parser = _parser()
        assert parser is not None
        if cmd.assignments or cmd.privileged:
            self.out.commands.append(
                SimpleCommand(argv=[], assignments=cmd.assignments, privileged=cmd.privileged, cwd=cwd)
            )
        return self.script(parser, inner, cwd, depth + 1)
