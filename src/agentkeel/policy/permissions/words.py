"""Reading a word's value as bash reads it, token by token: text inside "...", a lone ``$``,
unquoted glob characters, ``$'...'`` escapes."""

from __future__ import annotations

import codecs
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node

DYNAMIC = "\x00"  # stands for a value known only at run time; no rule literal ever contains it

# inside "...": \$ \` \" \\ stand for the character; backslash-newline is removed (a continuation)
_DQ_ESCAPE = re.compile(r'\\([$`"\\\n])')


def dq_literal(raw: bytes) -> str:
    return _DQ_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), raw.decode("utf-8", "replace"))


def lone_dollar(node: Node) -> str:
    """A "$" the parser did not take for an expansion: literal to bash at the end of a word, but
    the parser also leaves ``a$$`` (the shell's pid) this way, so anything after it is unknown."""
    parent = node.parent
    if parent is None or node.text != b"$":  # "$$" comes as one such token
        return DYNAMIC
    root = parent
    while root.parent is not None:
        root = root.parent
    after = (root.text or b"")[node.end_byte : node.end_byte + 1]  # the source, not the token: "$2>a"
    if after in (b"", b" ", b"\t", b"\n") or (after == b'"' and parent.type == "string"):
        return "$"
    return DYNAMIC  # outside "...", $"..." is a translated string


def has_glob(node: Node) -> bool:
    """Unquoted ``*``, ``?`` or ``[`` in a word (quoted ones are literal)."""
    if node.type == "word":
        raw = node.text.decode("utf-8", "replace") if node.text else ""
        return bool(re.search(r"(?<!\\)[*?\[]", raw))
    if node.type == "concatenation":
        return any(has_glob(c) for c in node.children)
    return False


def ansi_c(body: str) -> str:
    try:
        return codecs.decode(body.encode("latin-1", "backslashreplace"), "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return DYNAMIC


# What bash evaluates arithmetically (subscripts, (( )), $(( )), let, [[ -eq ]], ${x:offset}) runs
# code when it names a variable ('a[$(id)]' in a variable's value is expanded again), so keel
# models only literal arithmetic: numbers (decimal, 0x.., base#..), operators and blanks.
LITERAL_ARITHMETIC = re.compile(r"(?:\s|0[xX][0-9a-fA-F]+|[0-9]+#[0-9A-Za-z@_]+|[0-9]+|[-+*/%()<>=!&|^~?:,])*")
# a variable name bash takes as such without evaluating anything: NAME, or NAME[literal integer]
PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[(?:[0-9]+|[@*])\])?")
_BRACE = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")


def literal_arithmetic(text: str) -> bool:
    return DYNAMIC not in text and LITERAL_ARITHMETIC.fullmatch(text) is not None


def brace_expansion(node: Node) -> bool:
    """Would bash brace-expand this word (``.{e,}nv``, ``{a..c}``)? Read from the word's unquoted
    skeleton: quoted parts and expansions stand for one ordinary character, escapes for two."""
    return bool(_BRACE.search(_skeleton(node)))


def _skeleton(node: Node) -> str:
    if node.type == "word":
        raw = node.text.decode("utf-8", "replace") if node.text else ""
        return re.sub(r"\\.", "__", raw, flags=re.S)
    if node.type == "concatenation":
        return "".join(_skeleton(c) for c in node.children)
    return "_"
