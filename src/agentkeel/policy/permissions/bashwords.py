"""Words and expressions in a Bash command line, for the analysis in
:mod:`agentkeel.policy.permissions.bash`: a word's value after expansion and quote removal, and
what bash evaluates inside one (substitutions, arithmetic, subscripts, ``${..}`` operators)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from agentkeel.policy.permissions.grammar import unescaped_blank
from agentkeel.policy.permissions.words import (
    DYNAMIC,
    PLAIN_NAME,
    ansi_c,
    brace_expansion,
    dq_literal,
    literal_arithmetic,
    lone_dollar,
)

if TYPE_CHECKING:
    from tree_sitter import Node

    from agentkeel.policy.permissions.bashwalker import WalkerSelf


_SAFE_VARS = frozenset({"HOME", "PWD", "USER", "LOGNAME", "SHELL", "TMPDIR"})
_ARITH_TESTS = frozenset({b"-eq", b"-ne", b"-lt", b"-le", b"-gt", b"-ge"})


def _in_double_brackets(node: Node) -> bool:
    """Is this expression inside ``[[ .. ]]`` (where -eq's operands are arithmetic) rather than ``[ .. ]``
    (where test compares integers and evaluates nothing)? The grammar gives both one node type."""
    parent = node.parent
    while parent is not None and parent.type != "test_command":
        parent = parent.parent
    return parent is None or not parent.children or parent.children[0].type != "["


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


class WalkerWords:
    """The walker's reading of words and expressions (a part of :class:`bash.Walker`)."""

    def nested(self: WalkerSelf, node: Node, cwd: str, depth: int) -> None:
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

    def arithmetic(self: WalkerSelf, node: Node, text: str, cwd: str, depth: int) -> None:
        """Text bash evaluates arithmetically: keel models literal arithmetic only."""
        if not literal_arithmetic(text):
            shown = text.strip()[:60]
            self.opaque(f"bash evaluates {shown!r} arithmetically (a name or expansion in it can run code)")
        self.nested(node, cwd, depth)

    def subscript(self: WalkerSelf, node: Node, cwd: str, depth: int) -> None:
        data = node.text or b""
        index = data[data.find(b"[") + 1 : data.rfind(b"]")].decode("utf-8", "replace")
        if index not in ("@", "*") and not literal_arithmetic(index):
            self.opaque(f"the array subscript [{index[:60]}] is evaluated by bash (it can run code)")
        self.nested(node, cwd, depth)

    def backquotes(self: WalkerSelf, node: Node) -> None:
        """A backquote inside what the parser took for a plain word (``${x=`rm`}``) runs a command
        the parser did not read."""
        raw = (node.text or b"").decode("utf-8", "replace")
        if live_backquote(raw):
            self.opaque(f"a backquoted command the shell parser did not read ({raw[:60]!r})")

    def word(self: WalkerSelf, node: Node, cwd: str, depth: int) -> str:
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

    def expansion(self: WalkerSelf, node: Node) -> None:
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

    def _var(self: WalkerSelf, name: str, cwd: str) -> str:
        if name in self.vars:
            return self.vars[name]
        if name == "HOME":
            return self.home
        if name == "PWD":
            return cwd
        return os.environ.get(name, DYNAMIC) if name in _SAFE_VARS else DYNAMIC
