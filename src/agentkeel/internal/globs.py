"""The ``paths:`` globs of rules and skills, matched one way: gitignore's (``pathspec``), as Claude
Code matches them, plus ``{a,b}`` alternatives.

A glob without a slash matches a name at any depth (``*.md`` is ``docs/a.md`` too); one with a
slash is anchored at the base (``src/*.py`` is not ``src/a/b.py``); ``**`` spans folders;
``dir/`` is everything under it; ``!glob`` takes back what an earlier glob matched; a leading
``./`` is the base. Paths are posix and relative to the base the caller matches against.

The permission rules' path patterns (``permissions/paths.py``) are gitignore patterns too, with
a base of their own (``//``, ``~/``, ``/``) and case folding; they keep their own matcher.
``pathspec`` is imported on the first match, not when a rule is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec


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
def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec | None:
    import pathspec

    try:
        return pathspec.GitIgnoreSpec.from_lines(_lines(patterns))
    except Exception:  # pathspec raises assorted errors on malformed patterns: they match nothing
        return None


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
        spec = _spec(self.patterns)
        return spec is not None and spec.match_file(rel)


def matches(patterns: Sequence[str], rel: str) -> bool:
    """Whether ``rel`` (posix, relative to the globs' base) is matched by any of ``patterns``."""
    return Globs(patterns).matches(rel)
