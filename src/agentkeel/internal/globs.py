"""Every glob over paths or names that keel matches becomes a matcher here, one named function
per dialect keel models. (Bash(...) rules' ``*`` over a command line and WebFetch's ``*.`` domains
are not path globs: they stay with the rules.) Paths are posix; ``pathspec`` is imported on the
first match, not when a rule is loaded.

Gitignore's semantics, on ``pathspec`` (the one implementation where the semantics are gitignore's):
a glob without a slash matches a name at any depth (``*.md`` is ``docs/a.md`` too); one with a
slash is anchored at the base (``src/*.py`` is not ``src/a/b.py``); ``**`` spans folders; ``dir/``
is everything under it; ``!glob`` takes back what an earlier glob matched.

- :class:`Globs` / :func:`matches`: the ``paths:`` frontmatter of rules and skills, as Claude Code
  matches it: gitignore's, plus ``{a,b}`` alternatives; a leading ``./`` is the base.
- :func:`rule_spec` / :func:`rule_regex`: the pattern of a ``Read(...)``/``Edit(...)`` permission
  rule, one gitignore line. Its base (``//``, ``~/``, ``/``, ``./``), case folding and fail-closed
  reading stay with the rules (``policy/permissions/paths.py``); no braces (Claude Code expands none).
- :func:`gitignore` / :func:`gitignore_below`: the ``.gitignore`` files the search tools honour.

The other dialects are not gitignore's, and keep a primitive of their own:

- :func:`tool_regex` / :func:`search_glob`: the ``pattern`` of the Glob tool and the ``glob`` of
  the Grep tool (ripgrep's ``--glob`` where ripgrep is missing), a translation to one regular
  expression. The Glob tool anchors every pattern at the search root (``*.py`` is the top folder
  only), ``**`` spans folders even inside a name, and there are no comments, negation or
  backslash escapes: not gitignore's, so pathspec would change what the tool finds. The Grep tool
  matches a glob without a slash against the name at any depth, as ripgrep (and ``paths:``) do.
- :func:`name_matches` / :func:`name_may_match` / :func:`program_name_matches`: ``fnmatch(3)``
  over one name, on the standard library's ``fnmatch`` (glibc's and bash's ``[^...]``, classes
  and escapes rewritten to what it reads, wider where it cannot be exact): grep's ``--include``,
  ``--exclude`` and ``--exclude-dir`` and ``find -name`` (what the shell analyser models), MCP
  rules' server and tool wildcards, the LS tool's ``ignore``, a credential store's name against
  a glob in a command. No folders (``*`` meets no ``/`` to stop at) and no braces: gitignore's
  anchoring means nothing for one name.
- :func:`shell_expand`: what a glob in a command names on disk now, as the shell expands it, on
  the standard library's ``glob`` (an expansion on disk, not a matcher; hidden names included,
  which the shell leaves out by default: more names to check, never fewer).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec


# --- gitignore (pathspec) ----------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _compile(lines: tuple[str, ...]) -> pathspec.GitIgnoreSpec | None:
    import pathspec  # ~15 ms; not needed before the first match, so not on the startup path

    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except Exception:  # pathspec raises assorted errors on malformed patterns
        return None


def expand_braces(pattern: str) -> list[str]:
    """``src/*.{ts,tsx}`` as ``src/*.ts`` and ``src/*.tsx`` (nested braces too); an unclosed
    brace is literal."""
    depth, start = 0, -1
    for i, c in enumerate(pattern):
        if c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}" and depth:
            depth -= 1
            if depth == 0:
                inner, parts, level, cur = pattern[start + 1 : i], [], 0, ""
                for ch in inner:
                    level += (ch == "{") - (ch == "}")
                    if ch == "," and level == 0:
                        parts.append(cur)
                        cur = ""
                    else:
                        cur += ch
                parts.append(cur)
                if len(parts) < 2:
                    return [pattern[: i + 1] + rest for rest in expand_braces(pattern[i + 1 :])]
                head, tail = pattern[:start], pattern[i + 1 :]
                return [out for part in parts for out in expand_braces(head + part + tail)]
    return [pattern]


def _lines(patterns: Iterable[str]) -> list[str]:
    out = []
    for raw in patterns:
        glob = raw.strip()
        negated = glob.startswith("!")
        glob = glob[1:] if negated else glob
        while glob.startswith("./"):
            glob = glob[2:]
        if glob:
            out += [("!" if negated else "") + g for g in expand_braces(glob)]
    return out


@lru_cache(maxsize=1024)
def _paths_spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec | None:
    return _compile(tuple(_lines(patterns)))  # a malformed glob: the list matches nothing


class Globs:
    """A list of ``paths:`` globs; :meth:`matches` a posix path relative to its base."""

    __slots__ = ("patterns",)

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = tuple(p for p in patterns if p.strip())

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def __repr__(self) -> str:
        return f"Globs({list(self.patterns)!r})"

    def matches(self, rel: str) -> bool:
        rel = rel.removeprefix("./")
        if not self.patterns or not rel or rel == "." or rel.startswith("../"):
            return False
        spec = _paths_spec(self.patterns)
        return spec is not None and spec.match_file(rel)


def matches(patterns: Sequence[str], rel: str) -> bool:
    """Whether ``rel`` (posix, relative to the globs' base) is matched by any of ``patterns``."""
    return Globs(patterns).matches(rel)


def rule_spec(pattern: str) -> pathspec.GitIgnoreSpec | None:
    """A permission rule's pattern (relative to the rule's base) as one gitignore line; None when
    it does not compile (the rule decides what that means: a deny rule then matches everything)."""
    return _compile((pattern,))


@lru_cache(maxsize=4096)
def rule_regex(pattern: str) -> re.Pattern[str] | None:
    """The one regular expression a rule's pattern compiles to, if it is one including line (for
    walks that test many names against one pattern)."""
    spec = rule_spec(pattern)
    if spec is None or len(spec.patterns) != 1:
        return None
    line = spec.patterns[0]
    regex = getattr(line, "regex", None)
    return regex if line.include is True and isinstance(regex, re.Pattern) else None


def gitignore(lines: Iterable[str]) -> pathspec.GitIgnoreSpec:
    """The rules of one ``.gitignore`` file."""
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(lines)


def gitignore_below(spec: pathspec.GitIgnoreSpec, root: str) -> pathspec.GitIgnoreSpec:
    """An enclosing directory's rules as they apply below ``root`` (relative to that directory).

    A search started inside an ignored directory (``Glob`` in ``node_modules/pkg``) searches it,
    as ripgrep does: the rules that ignore the start itself are dropped, the others (``*.log``)
    still apply to what is found below it.
    """
    if root == ".":
        return spec
    import pathspec

    kept = [p for p in spec.patterns if not (p.include and p.match_file(root + "/"))]
    return spec if len(kept) == len(spec.patterns) else pathspec.GitIgnoreSpec(kept)


# --- the Glob and Grep tools ---------------------------------------------------------------------


@lru_cache(maxsize=256)
def tool_regex(pattern: str) -> re.Pattern[str]:
    """Translate a glob with ``**``, ``*``, ``?``, ``[..]`` and ``{a,b}`` to a regex over posix paths."""
    out, i, depth = [], 0, 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j
        elif c == "{":
            out.append("(?:")
            depth += 1
        elif c == "}" and depth:
            out.append(")")
            depth -= 1
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + ")" * depth + r"\Z")


def search_glob(pattern: str) -> Callable[[str], bool]:
    """The Grep tool's ``glob`` over a posix path relative to the search root, as ripgrep's
    ``--glob``: without a slash, the name at any depth; with one, the whole path."""
    rx = tool_regex(pattern)
    if "/" in pattern:
        return lambda rel: rx.match(rel) is not None
    return lambda rel: rx.match(rel.rpartition("/")[2]) is not None


# --- one name: fnmatch(3) ----------------------------------------------------------------------


def _fnmatch_form(glob: str) -> tuple[str, bool]:
    """``glob`` as the standard library's ``fnmatch`` reads globs, matching at least what glibc's
    ``fnmatch`` and bash match with it, and whether exactly that. ``[^...]`` is ``[!...]`` and an
    escaped glob character is a bracket of one (``\\*`` is ``[*]``), exactly; a bracket with a
    class, an equivalence class, a collating symbol (``[[:alpha:]]``) or a backslash is any one
    character: wider, not exact."""
    if "[" not in glob and "\\" not in glob:
        return glob, True
    out: list[str] = []
    exact, i, n = True, 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "\\" and i + 1 < n:
            out.append(f"[{glob[i + 1]}]" if glob[i + 1] in "*?[" else glob[i + 1])
            i += 2
            continue
        if c != "[":
            out.append(c)
            i += 1
            continue
        j = i + 1
        if j < n and glob[j] in "!^":
            j += 1
        if j < n and glob[j] == "]":
            j += 1
        wide = False
        while j < n and glob[j] != "]":
            if glob[j] == "\\":
                wide, j = True, j + 2
                continue
            if glob[j] == "[" and j + 1 < n and glob[j + 1] in ":.=":
                end = glob.find(glob[j + 1] + "]", j + 2)
                if end != -1:
                    wide, j = True, end + 2
                    continue
            j += 1
        if j >= n:  # no closing bracket: a literal [
            out.append(c)
            i += 1
            continue
        body = glob[i + 1 : j]
        if wide:
            exact = False
            out.append("?")
        else:
            out.append("[" + ("!" + body[1:] if body.startswith("^") else body) + "]")
        i = j + 1
    return "".join(out), exact


def name_matches(name: str, glob: str) -> bool:
    """Whether one name (no folders) matches ``glob``: ``*``, ``?``, ``[...]``/``[!...]``, case
    sensitive (callers fold case where they mean to)."""
    return fnmatch.fnmatchcase(name, glob)


def name_may_match(name: str, glob: str) -> bool:
    """Whether bash or glibc's ``fnmatch`` may match ``name`` with ``glob`` (``[^x]``, ``\\*`` and
    ``[[:alpha:]]`` too): for a check that fails closed on a match."""
    return fnmatch.fnmatchcase(name, _fnmatch_form(glob)[0])


def program_name_matches(name: str, glob: str) -> bool | None:
    """Whether a program that matches names with glibc's ``fnmatch`` (grep's ``--include``,
    ``--exclude`` and ``--exclude-dir``, ``find -name``) matches ``name`` with ``glob``; None when
    keel cannot tell (a class such as ``[[:alpha:]]``, a backslash escape). The caller fails
    closed on None: a file the program may read counts as read."""
    form, exact = _fnmatch_form(glob)
    return fnmatch.fnmatchcase(name, form) if exact else None


# --- the shell --------------------------------------------------------------------------------


def shell_expand(pattern: str, limit: int) -> list[str] | None:
    """The paths an absolute glob names on disk now, at least those bash would (``[^x]`` and
    ``[[:alpha:]]`` too, and hidden names); None when there are more than ``limit``."""
    import glob

    out: list[str] = []
    for i, p in enumerate(glob.iglob(_fnmatch_form(pattern)[0], include_hidden=True)):  # noqa: PTH207 (an absolute str glob, as the shell has it)
        if i >= limit:
            return None
        out.append(p)
    return out
