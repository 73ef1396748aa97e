"""Where tree-sitter-bash 0.25 reads a command line unlike bash.

Permission checks trust the grammar's tree only when it is what bash will run. Each function
here names a shape where the two have been seen to differ (most found by the property tests in
``tests/test_permissions_props.py``, which run commands through ``/bin/bash``); a command that
shows one is not confidently analysed, so keel asks instead of allowing.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node

# tree-sitter-bash's scanner (0.25.1, scanner.c brace_start) calls isdigit() on the character after
# "{" (and after "{N.."): a character above U+00FF indexes past glibc's ctype table and can crash
# the process. Such a command is never handed to the parser; it is not confidently analysed (asks).
_SCANNER_UNSAFE = re.compile(r"\{[0-9]*(?:\.\.[0-9]*)?[^\x00-\xff]")
# A line continuation between two non-blank characters joins them in bash ("stat\<newline>us" is
# "status") but tree-sitter-bash 0.25 splits the word there, so what it reports is not what runs.
# Flagged wherever it stands (inside '...' it is literal; asking there is merely cautious).
_JOINING_CONTINUATION = re.compile(r"(?:[^ \t\n]|\\[ \t])\\\n[^ \t\n]")  # an escaped blank is no blank
# CR, VT, FF, NBSP, U+2028...: whitespace to the parser, ordinary characters to bash
_OTHER_BLANK = re.compile(r"[^\S \t\n]")
# what may stand before a word: where a "#" starts a comment for bash
_WORD_START = frozenset(bytes([c]) for c in b" \t\n;&|()<>")


def source_problem(source: str) -> str | None:
    """Why the grammar must not be given (or trusted with) this text at all, if it must not."""
    if _SCANNER_UNSAFE.search(source):
        return "a non-Latin-1 character right after '{' (the shell parser cannot read it safely)"
    if _JOINING_CONTINUATION.search(source):
        return "a line continuation inside a word (the shell parser splits what bash joins)"
    if _OTHER_BLANK.search(source):
        # the parser splits words on any whitespace (and takes "\\<CR><LF>" for a continuation);
        # bash only on space, tab and newline: "git status<VT>#;rm" is a comment to one and runs
        # rm in the other
        return "a blank other than space, tab or newline (the shell parser and bash read it differently)"
    return None


def tree_problem(root: Node, data: bytes) -> str | None:
    """Why the parser's tokens cannot be what bash reads, if they cannot.

    tree-sitter-bash 0.25 drops a word-initial escaped blank (``cat \\ a`` has the one argument
    " a" to bash, "a" in the tree), sometimes labels a token with another token's type (the "$"
    of ``cat $<<EOF`` comes back as a "<<"), and may start a comment inside a word (``{\\ {#``)."""
    covered = bytearray(len(data))
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "simple_expansion" and any(b in (node.text or b"") for b in (b" ", b"\t", b"\n")):
            return "an expansion with a blank inside ($ a), which bash reads as two words"
        if node.type == "heredoc_body":
            # tree-sitter-bash 0.25 leaves the body's text before its first expansion outside every
            # token; that text is literal to bash unless it holds a "$" the parser did not read
            # (backquotes in a body are read by the analyser itself)
            pos = node.start_byte
            for child in [*node.children, None]:
                end = child.start_byte if child is not None else node.end_byte
                if b"$" not in data[pos:end]:
                    covered[pos:end] = b"\x01" * (end - pos)
                if child is not None:
                    pos = child.end_byte
        if node.child_count:
            stack.extend(node.children)
            continue
        covered[node.start_byte : node.end_byte] = b"\x01" * (node.end_byte - node.start_byte)
        if not node.is_named and (node.text or b"").strip() != node.type.encode():
            return f"a token the shell parser misread ({node.text!r} taken for {node.type!r})"
        if (
            node.type == "comment"
            and node.start_byte
            and data[node.start_byte - 1 : node.start_byte] not in _WORD_START
        ):
            return "a '#' inside a word taken for a comment (bash passes it on)"
    gaps = bytes(b if not c else 0 for b, c in zip(data, covered, strict=True)).split(b"\x00")
    if any(gap.replace(b"\\\n", b"").strip(b" \t\n") for gap in gaps):
        return "text the shell parser skipped over (bash would read it)"
    return None


def unescaped_blank(raw: str) -> bool:
    """A space, tab or newline bash would split on, inside what the parser took for one bare word."""
    i = 0
    while i < len(raw):
        if raw[i] == "\\":
            i += 2  # an escaped character, or a line continuation
        elif raw[i] in " \t\n":
            return True
        else:
            i += 1
    return False
