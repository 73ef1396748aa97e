"""Redirections and here-documents in a Bash command line, for the analysis in
:mod:`agentkeel.policy.permissions.bash`: the files a command reads or writes, and the commands
bash runs inside an unquoted here-document body."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from agentkeel.policy.permissions.bashmodel import Redirect
from agentkeel.policy.permissions.words import literal_arithmetic

if TYPE_CHECKING:
    from tree_sitter import Node

    from agentkeel.policy.permissions.bashwalker import WalkerSelf


class WalkerRedirects:
    """The walker's reading of redirections (a part of :class:`bash.Walker`)."""

    def heredoc_body(self: WalkerSelf, raw: str, cwd: str, depth: int) -> None:
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

    def redirect(self: WalkerSelf, node: Node, cwd: str, depth: int) -> None:
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
