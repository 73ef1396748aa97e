"""Paths for permission checks: gitignore-style rule patterns, symlink-aware candidates,
working-directory containment and protected paths. Never a string-prefix comparison.
"""

from __future__ import annotations

import os
import posixpath
import re
from functools import cached_property

import msgspec

from agentkeel.internal import globs

# always ask before writing here, whatever the mode or rules (SPEC section 3). Beyond the SPEC's
# list: places whose contents run without anyone choosing to run them. .husky/ holds git hooks
# (husky points core.hooksPath there); .bashrc.d/ is sourced by many distributions' .bashrc.
PROTECTED_DIRS = frozenset(
    {".git", ".keel", ".claude", ".ssh", ".gnupg", ".aws", ".kube", ".docker", ".husky", ".bashrc.d"}
)
PROTECTED_FILES = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".zlogout",
        ".kshrc",
        ".cshrc",
        ".tcshrc",
        ".inputrc",
        ".gitconfig",
        ".gitmodules",
        ".mcp.json",
        ".envrc",
        ".netrc",
        ".npmrc",
        ".pypirc",
        "config.fish",
        "managed-settings.json",
        ".pre-commit-config.yaml",  # hooks pre-commit runs on every commit
    }
)
# a file inside a directory: .vscode/tasks.json can run a task when the folder is opened, and
# .vscode/settings.json names programs extensions run (interpreters, linters, git)
PROTECTED_NESTED = frozenset({(".vscode", "tasks.json"), (".vscode", "settings.json")})
# under the home directory: run at login or on the PATH before the system's programs
# (~/.local/bin shadows commands), or git's XDG config, as powerful as ~/.gitconfig
PROTECTED_HOME = (
    ".config/git",
    ".local/bin",
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    ".config/fish",
    "Library/LaunchAgents",
)

# credential stores under the home directory: one list for both paths. The sandbox hides every one
# from sandboxed commands (an empty file or directory nobody may open), and a read of one asks
# whatever else would allow it (a working directory holding the home, the sandbox's auto-allow);
# an allow rule the user wrote still decides. Only stores a build does not read on its own (npm
# reads ~/.npmrc, a file it tolerates losing; ~/.m2/settings.xml or pip.conf would break builds).
CREDENTIAL_STORES = (
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",  # git credential-store's XDG file
    ".config/gh",  # the GitHub CLI's token (hosts.yml)
    ".config/hub",
    ".npmrc",
    ".pypirc",
    ".config/gcloud",
    ".azure",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".pgpass",
    ".claude/.credentials.json",  # Claude Code's OAuth token
    ".claude.json",  # Claude Code's account and user-scope MCP servers (their env holds keys)
)
# under $KEEL_HOME: keel's own (settings may carry keys in "env" or an apiKeyHelper; transcripts,
# the session index, memory and logs hold every project's conversations)
KEEL_PRIVATE = ("settings.json", "projects", "sessions.db", "memory", "logs")


def credential_paths(home: str, keel_home: str | None = None) -> list[str]:
    """The absolute paths of every credential store (existing or not)."""
    out = [posixpath.join(home, name) for name in CREDENTIAL_STORES] if home else []
    if keel_home:
        out += [posixpath.join(keel_home, name) for name in KEEL_PRIVATE]
    return out


def credential_store(path: str, home: str, keel_home: str | None = None, *, holding: bool = False) -> str | None:
    """The credential store ``path`` lies in (as ``~/...`` or ``$KEEL_HOME/...``), or None. With
    ``holding``, a directory that holds one that exists counts too (a recursive read of it reads
    the store).
    ``path`` may be a glob (``~/.np*rc``): it counts when it may match a store, case folded."""
    parts = [p for p in path.lower().split("/") if p]
    for store in credential_paths(home, keel_home):
        sparts = [p for p in store.lower().split("/") if p]
        n = min(len(parts), len(sparts))
        if len(parts) < len(sparts) and not (holding and os.path.lexists(store)):
            continue  # a directory holding a store that does not exist reads none
        if all(a == b or globs.name_may_match(b, a) for a, b in zip(parts[:n], sparts[:n], strict=True)):
            if keel_home and store.startswith(keel_home.rstrip("/") + "/"):
                return "$KEEL_HOME" + store[len(keel_home.rstrip("/")) :]
            return "~" + store[len(home.rstrip("/")) :]
    return None


class PathPattern(msgspec.Struct, frozen=True, dict=True):
    """A compiled ``Read(...)``/``Edit(...)`` specifier: a gitignore pattern anchored at ``base``
    (matched by :func:`agentkeel.internal.globs.rule_spec`; the base and case folding are here)."""

    base: str
    pattern: str

    def matches(self, path: str, *, broad: bool = False) -> bool:
        """``broad`` (deny and ask rules) folds case, and a pattern that does not compile matches
        everything (fail closed); otherwise (allow rules) it matches nothing. A deny or ask rule
        also matches a path inside an agent's worktree as the same path in the project the
        worktree merges back into (``.keel/worktrees/<name>/secrets/a`` as ``secrets/a``)."""
        if self._matches(path, broad):
            return True
        while broad and (mapped := outside_worktree(path)) is not None:
            if self._matches(mapped, broad):
                return True
            path = mapped
        return False

    def _matches(self, path: str, broad: bool) -> bool:
        fold_case = broad
        rel = _relative(path, self.base)
        if rel is None:
            return False
        if rel == ".":
            rel = ""
        spec = globs.rule_spec(self.pattern.lower() if fold_case else self.pattern)
        if spec is None:
            return broad
        probe = rel.lower() if fold_case else rel
        if probe and spec.match_file(probe):
            return True
        return os.path.isdir(path) and spec.match_file(probe + "/") if probe else False

    def entry_prefix(self, directory: str) -> str | None:
        """For a tree walk: what goes before an entry's name of ``directory`` to make its path
        relative to this pattern's base (case folded), or None when it is not under the base."""
        if self.base == "/":
            rel = directory[1:]
        elif directory == self.base:
            rel = ""
        elif directory.startswith(self.base) and directory[len(self.base)] == "/":
            rel = directory[len(self.base) + 1 :]
        else:
            return None
        return rel.lower() + "/" if rel else ""

    @cached_property
    def entry_regex(self) -> re.Pattern[str] | None:
        """The case-folded pattern as one regular expression, when it compiles to one."""
        return globs.rule_regex(self.pattern.lower())

    def matches_entry(self, prefix: str, name: str, is_dir: bool) -> bool:
        """``matches(dir/name, broad=True)`` for an entry whose kind is known (``prefix`` from
        :meth:`entry_prefix`): no filesystem access, one regular expression."""
        probe = prefix + name.lower()
        regex = self.entry_regex
        if regex is not None:
            return regex.match(probe) is not None or (is_dir and regex.match(probe + "/") is not None)
        spec = globs.rule_spec(self.pattern.lower())
        if spec is None:
            return True
        return spec.match_file(probe) or (is_dir and spec.match_file(probe + "/"))

    @cached_property
    def reach(self) -> str:
        """The deepest directory (or file) that holds every path this pattern can match, case
        folded: ``/secrets/**`` reaches only ``<base>/secrets``, ``.env`` (any depth) all of ``<base>``."""
        body = self.pattern.rstrip("/")
        anchored = body.startswith("/") or "/" in body
        literal: list[str] = []
        if anchored:
            for part in body.strip("/").split("/"):
                if not part or any(c in part for c in "*?[\\!"):
                    break
                literal.append(part)
        return posixpath.join(self.base, *literal).lower()

    def may_match_under(self, directory: str) -> bool:
        """Could this pattern match ``directory``, something inside it, or a directory holding it?"""
        d, r = directory.lower().rstrip("/") or "/", self.reach
        return d == r or r == "/" or d == "/" or d.startswith(r + "/") or r.startswith(d + "/")


def _relative(path: str, base: str) -> str | None:
    if base == "/":
        return path.lstrip("/") or "."
    try:
        if os.path.commonpath([path, base]) != base:
            return None
    except ValueError:
        return None
    return os.path.relpath(path, base)


def compile_path_pattern(specifier: str, *, cwd: str, home: str, root: str) -> PathPattern:
    """Claude Code's anchors: ``//abs``, ``~/home``, ``/relative-to-settings-root``, ``./cwd`` or bare."""
    s = specifier.strip()
    if s.startswith("//"):
        base, pattern = "/", "/" + s[2:].lstrip("/")
    elif s == "~" or s.startswith("~/"):
        base, pattern = home, "/" + s[2:] if len(s) > 2 else "/**"
    elif s.startswith("/"):
        base, pattern = root, s
    elif s.startswith("./"):
        base, pattern = cwd, "/" + s[2:]
    else:
        base, pattern = cwd, s
    if pattern in ("/", ""):
        pattern = "/**"
    return PathPattern(posixpath.normpath(base), pattern)


def candidates(path: str, cwd: str, home: str) -> tuple[str, str]:
    """(lexical, resolved): ``..`` folded, ``~`` expanded, and symlinks followed for the second.
    The second follows each symlink before the ``..`` after it, as the kernel does: with
    ``link -> a/b``, ``link/../x`` is ``a/x``, not ``./x``."""
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    elif path.startswith("~"):  # ~user/...: the tools expand it (Path.expanduser), so the gate does too
        head, sep, rest = path.partition("/")
        try:
            expanded = os.path.expanduser(head)
        except ValueError:  # a NUL in the name: no such user, as below for the path itself
            expanded = head
        if expanded != head:
            path = expanded + sep + rest
    joined = posixpath.join(cwd, path)
    lexical = posixpath.normpath(joined)
    if lexical.startswith("//"):
        lexical = "/" + lexical.lstrip("/")
    try:
        real = os.path.realpath(joined if ".." in path.split("/") else lexical)
    except (OSError, ValueError):
        real = lexical
    return lexical, real


def inside(path: str, dirs: tuple[str, ...]) -> bool:
    for d in dirs:
        try:
            if os.path.commonpath([path, d]) == d:
                return True
        except ValueError:
            continue
    return False


WORKTREES = (".keel", "worktrees")  # agents' worktrees: <project>/.keel/worktrees/<name>/


def worktree_inside(parts: list[str]) -> int:
    """Where the path inside the innermost agent worktree (``.keel/worktrees/<name>/...``) starts in
    ``parts``, or 0 when the path is not inside one (the worktree's own directory is not inside it)."""
    for i in range(len(parts) - 4, -1, -1):
        if parts[i] == WORKTREES[0] and parts[i + 1] == WORKTREES[1]:
            return i + 3
    return 0


def outside_worktree(path: str) -> str | None:
    """The project path that an absolute path inside an agent's worktree stands for (what a
    merge of the worktree writes), or None when the path is not inside one."""
    parts = [p for p in path.split("/") if p]
    start = worktree_inside([p.lower() for p in parts])
    if not start:
        return None
    return "/" + "/".join(parts[: start - 3] + parts[start:])


def protected(path: str, keel_home: str | None = None, home: str | None = None) -> str | None:
    """Why writing ``path`` always asks, or None.

    ``.keel/`` is protected, except inside an agent's worktree (``.keel/worktrees/<name>/**``):
    that is another working tree, where its own protected entries (``.git``, ``.keel/``,
    ``.claude/``, rc files...) count, read from its root."""
    parts = [p.lower() for p in path.split("/") if p]
    parts = parts[worktree_inside(parts) :]
    for part in parts[:-1]:
        if part in PROTECTED_DIRS:
            return f"{part}/ is a protected directory"
    if parts and parts[-1] in PROTECTED_DIRS:
        return f"{parts[-1]} is a protected directory"
    if parts and parts[-1] in PROTECTED_FILES:
        return f"{parts[-1]} is a protected file"
    if len(parts) >= 2 and (parts[-2], parts[-1]) in PROTECTED_NESTED:
        return f"{parts[-2]}/{parts[-1]} is a protected file"
    if keel_home and inside(path, (keel_home,)):
        return "keel's own settings and data are protected"
    if home:
        folded, base = path.lower(), home.rstrip("/").lower()
        for sub in PROTECTED_HOME:
            d = f"{base}/{sub.lower()}"
            if folded == d or folded.startswith(d + "/") or d.startswith(folded + "/"):
                return f"~/{sub} is protected"
    return None
