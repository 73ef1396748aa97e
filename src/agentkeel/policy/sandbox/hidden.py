"""The paths ``Read(...)`` / ``Edit(...)`` deny rules name, as the sandbox mounts them.

A literal rule (``./.env``, ``~/.ssh/**``, ``./secrets/**``) is one path. A glob (``./**/.env``,
``**/*.pem``, ``./config/*.key``, a bare ``.env``, which matches at any depth) is expanded to the
files and directories that match it when the session's first sandboxed command starts, by a
walk from the deepest literal directory of the pattern, matching entries as the permission
engine does (gitignore semantics, case folded: the deny side). A matching directory is hidden
whole and not walked into; symlinks are not followed (the link's own path is hidden), nor is
``.git`` walked into (git's object store). The walk is bounded (:data:`MAX_ENTRIES` entries
per pattern); what a pattern would match beyond that, or what is created later in the session,
is not hidden by the sandbox, and the permission engine's own check of the command still
applies to it.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Callable, Iterable

from agentkeel.policy.permissions.paths import PathPattern, compile_path_pattern
from agentkeel.policy.permissions.rules import Rule

log = logging.getLogger("agentkeel.policy.sandbox")

MAX_ENTRIES = 50_000
_GLOB = frozenset("*?[")


def rule_paths(rules: Iterable[Rule], tool: str, *, cwd: str, home: str, expand: Callable[[str], str]) -> list[str]:
    """The paths the ``tool`` deny rules among ``rules`` cover: literal ones as written (existing or
    not: the layout keeps what exists), globs expanded against the filesystem now."""
    out: list[str] = []
    for rule in rules:
        if rule.kind != "deny" or rule.tool != tool or rule.bare or rule.specifier is None:
            continue
        spec = rule.specifier.strip()
        literal = _literal(spec)
        if literal is not None:
            out.append(expand(literal))
            continue
        pattern = compile_path_pattern(spec, cwd=cwd, home=home, root=rule.root or cwd)
        out += matches(pattern, spec)
    return list(dict.fromkeys(out))


def _literal(spec: str) -> str | None:
    """``./x``, ``./x/``, ``./x/**``, ``./x/*`` without other glob characters: the path ``./x``. A name
    without a slash (``.env``) is a glob: gitignore matches it at any depth."""
    for suffix in ("/**", "/*", "/"):
        if spec.endswith(suffix) and len(spec) > len(suffix):
            spec = spec[: -len(suffix)]
            break
    if not spec or any(c in _GLOB for c in spec):
        return None
    if "/" not in spec and spec != "~":
        return None
    return spec


def walk_root(pattern: PathPattern) -> str:
    """The deepest directory every match lies in: the base, then the pattern's leading literal
    components (as written: the filesystem may fold no case)."""
    body = pattern.pattern.rstrip("/")
    if not (body.startswith("/") or "/" in body):
        return pattern.base  # a bare name: any depth
    parts: list[str] = []
    for part in body.strip("/").split("/")[:-1]:
        if not part or any(c in _GLOB or c in "\\!" for c in part):
            break
        parts.append(part)
    return posixpath.join(pattern.base, *parts)


def matches(pattern: PathPattern, spec: str = "") -> list[str]:
    """The existing files and directories ``pattern`` matches (a matching directory whole)."""
    root = walk_root(pattern)
    if not os.path.isdir(root) or os.path.islink(root):
        return []
    found: list[str] = []
    stack = [root]
    seen = 0
    while stack:
        directory = stack.pop()
        prefix = pattern.entry_prefix(directory)
        if prefix is None:
            continue
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if pattern.matches_entry(prefix, entry.name, is_dir):
                found.append(entry.path)
            elif is_dir and entry.name != ".git":  # git's own store: objects by hash, no secrets by name
                stack.append(entry.path)
        if seen > MAX_ENTRIES:
            log.warning(
                "sandbox: the Read deny rule %r matches under a tree too large to walk (over %d entries); "
                "matches beyond those are not hidden in the sandbox",
                spec,
                MAX_ENTRIES,
            )
            break
    return found
