"""The filesystem a sandboxed command sees, as bubblewrap arguments.

Order matters: bubblewrap applies them left to right, so a later mount covers an earlier one.

1. the whole filesystem read-only (``--ro-bind / /``), a private ``/proc`` (the new PID
   namespace's: ``/proc/<pid>`` of a process outside does not exist inside), a minimal ``/dev``,
   an empty ``/run`` and ``/tmp/.X11-unix`` (no host daemon's socket: docker, dbus, systemd)
   unless every Unix socket is allowed, with the sockets ``allowUnixSockets`` names there bound
   back;
2. the writable roots bound read-write: the working directories, the session's temp dir,
   ``sandbox.filesystem.allowWrite``;
3. inside them, protected entries bound read-only again: ``.git/hooks``, ``.git/config`` (and
   ``config.worktree``, ``commondir``), ``.git/modules/`` and ``.git/worktrees/``, the checkouts'
   ``.git`` files, ``.claude/``, ``.keel/``, ``.vscode/``, shell rc files... (an entry that does
   not exist yet is covered by an empty read-only directory, so it cannot be created either),
   ``$KEEL_HOME``, ``sandbox.filesystem.denyWrite``;
4. agents' worktrees (``.keel/worktrees/<name>/``) bound read-write again inside the read-only
   ``.keel/``: another working tree, whose own protected entries (its ``.git``, ``.keel/``,
   ``.claude/``, rc files...) are bound read-only after it, as at a root; likewise each git
   directory in ``.git/modules/`` (submodules', at any depth) and ``.git/worktrees/`` (linked
   worktrees'), read-write again with its own config, hooks and pointers read-only after it;
5. Read-denied paths, credential stores and the host's Unix sockets (``sockets.py``) covered
   by an empty file or directory nobody may open (mode 000).

A protected file that does not exist yet (``.mcp.json``, ``.envrc``, ``.pre-commit-config.yaml``)
cannot be covered without creating it; if the command creates one, keel removes it when the
command ends and says so.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from agentkeel.policy.permissions.paths import PROTECTED_DIRS, PROTECTED_FILES, WORKTREES, credential_paths

# inside every writable root: read-only even there (they run code nobody chose to run)
_GUARDED_DIRS = tuple(sorted((PROTECTED_DIRS - {".git"}) | {".vscode", ".idea"}))
_GUARDED_FILES = tuple(sorted(PROTECTED_FILES))
# in every git directory: the files that name programs git runs (core.fsmonitor, core.hooksPath,
# core.pager...) or another git directory whose config does (commondir); hooks/ beside them
_GITDIR_FILES = ("config", "config.worktree", "commondir")
# replaced by an empty tmpfs unless every Unix socket is allowed: host daemons' sockets
MASKED = ("/run", "/var/run", "/tmp/.X11-unix")
# created as empty read-only mount points when missing, so they cannot be made either
_ALWAYS_GUARDED = (".claude", ".keel")


@dataclass
class Layout:
    """What to mount; :meth:`args` renders it. ``guard_missing``: missing protected directories,
    covered by an empty read-only directory (bubblewrap makes the mount point on the host; the
    sandbox removes it when the session's sandboxed commands are over)."""

    writable: list[str] = field(default_factory=list)
    readonly: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    guard_missing: list[str] = field(default_factory=list)
    # protected entries that do not exist and are not covered by a mount (.mcp.json, .envrc...):
    # one the command creates is removed when it ends (see Sandbox.finished)
    absent: list[str] = field(default_factory=list)
    masked_dirs: list[str] = field(default_factory=list)  # replaced by an empty tmpfs
    unmasked: list[str] = field(default_factory=list)  # allowed sockets inside them, bound back
    # directories between a writable root and a guarded entry, bound onto themselves: a mount
    # point cannot be renamed, so ``mv .git .git2 && mkdir -p .git/hooks`` fails (EBUSY)
    pinned: list[str] = field(default_factory=list)
    # agents' worktrees (``.keel/worktrees/<name>``): writable again inside the read-only ``.keel``,
    # each with its own protected entries read-only, mounted after the roots' (a later mount covers)
    worktrees: list[Layout] = field(default_factory=list)

    def args(self, empty_file: str, empty_dir: str, ro_dir: str) -> list[str]:
        # /dev/shm is a directory of --dev's own tmpfs: writable, private, no mount of its own
        out = ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
        for d in self.masked_dirs:
            out += ["--tmpfs", d]
        for u in self.unmasked:
            out += ["--bind", u, u]
        out += self._binds(ro_dir)
        for tree in self.worktrees:
            out += tree._binds(ro_dir)
        for h in self.hidden:
            out += ["--ro-bind", empty_dir if os.path.isdir(h) else empty_file, h]
        return out

    def _binds(self, ro_dir: str) -> list[str]:
        out: list[str] = []
        for w in self.writable:
            out += ["--bind", w, w]
        for p in self.pinned:
            out += ["--bind", p, p]
        for r in self.readonly:
            out += ["--ro-bind", r, r]
        for g in self.guard_missing:
            out += ["--ro-bind", ro_dir, g]
        return out

    def all_guard_missing(self) -> list[str]:
        return self.guard_missing + [g for tree in self.worktrees for g in tree.guard_missing]

    def all_absent(self) -> list[str]:
        return self.absent + [a for tree in self.worktrees for a in tree.absent]


def _real(path: str) -> str:
    return os.path.realpath(path)


def _exists(path: str) -> bool:
    return os.path.lexists(path)


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def build_layout(
    *,
    writable: Iterable[str],
    scratch: str = "",
    home: str,
    keel_home: str | None,
    deny_write: Iterable[str] = (),
    hidden: Iterable[str] = (),
    mask_run: bool = True,
    unmask: Iterable[str] = (),
) -> Layout:
    """Resolve every path (bubblewrap mounts on the real path) and keep what exists. ``unmask``:
    paths inside the masked directories to bind back (the sockets ``allowUnixSockets`` names)."""
    layout = Layout()
    if mask_run:
        layout.masked_dirs += [d for d in MASKED if os.path.isdir(d)]
        layout.masked_dirs = [d for d in dict.fromkeys(_real(d) for d in layout.masked_dirs)]
        layout.unmasked = [
            u for u in dict.fromkeys(_real(u) for u in unmask if _exists(u)) if _under(u, layout.masked_dirs)
        ]
    roots = [r for r in dict.fromkeys(_real(w) for w in writable) if os.path.isdir(r)]
    # a root inside another is already writable; keep the outermost
    roots = [r for r in roots if not _under(r, [o for o in roots if o != r])]
    layout.writable = roots
    home_real = _real(home) if home else ""
    guarded: list[str] = []
    for root in roots:
        if scratch and root == _real(scratch):
            continue  # the session's own temp dir: nothing there runs by itself
        guarded += _guard_root(root, layout)
        for tree in _worktrees(root):
            inner = Layout(writable=[tree])
            inner.readonly = [p for p in dict.fromkeys(_real(g) for g in _guard_root(tree, inner)) if _under(p, [tree])]
            layout.worktrees.append(inner)
    if home_real and _under(home_real, roots):  # a working directory holds the home directory
        from agentkeel.policy.permissions.paths import PROTECTED_HOME

        guarded += [posixpath.join(home_real, sub) for sub in PROTECTED_HOME if _exists(posixpath.join(home_real, sub))]
        if home_real not in roots:  # the home's own rc files and dot-directories, as at a root
            for name in (*_GUARDED_DIRS, *_GUARDED_FILES):
                p = posixpath.join(home_real, name)
                (guarded if _exists(p) else layout.absent).append(p)
    if keel_home and _exists(keel_home):
        guarded.append(keel_home)
    guarded += list(deny_write)
    layout.readonly = [
        p for p in dict.fromkeys(_real(g) for g in guarded if _exists(g)) if _under(p, roots) and p not in roots
    ]
    # what is read-only inside a worktree (or a submodule's git dir) is mounted after it: after the
    # innermost one holding it, or a nested one's read-write bind would cover it again
    moved: list[str] = []
    for p in layout.readonly:
        holders = [sub for sub in layout.worktrees if _under(p, sub.writable) and p not in sub.writable]
        if holders:
            sub = max(holders, key=lambda h: len(h.writable[0]))
            if p not in sub.readonly:
                sub.readonly.append(p)
            moved.append(p)
    layout.readonly = [p for p in layout.readonly if p not in moved]
    # a hidden directory holding a working directory would hide the working directory too
    layout.hidden = [
        p for p in dict.fromkeys(_real(h) for h in hidden if _exists(h)) if not any(_under(r, [p]) for r in roots)
    ]
    return layout


def _guard_root(root: str, layout: Layout) -> list[str]:
    """The protected entries of one working tree that exist (to bind read-only); the missing ones
    go to ``layout.guard_missing`` (covered by an empty read-only directory) or ``layout.absent``."""
    guarded: list[str] = []
    for name in (*_GUARDED_DIRS, *_GUARDED_FILES):
        p = posixpath.join(root, name)
        if _exists(p):
            guarded.append(p)
        elif name in _ALWAYS_GUARDED:
            layout.guard_missing.append(p)
        else:
            layout.absent.append(p)
    git = posixpath.join(root, ".git")
    checkouts: list[str] = []  # the .git entries of submodules and linked worktrees
    if os.path.isfile(git) or os.path.islink(git):
        # a worktree's .git is a file naming the repository: rewritten, it would point git at a
        # config of the command's choosing (core.hooksPath) for the user's next git command
        guarded.append(git)
    elif os.path.isdir(git):
        layout.pinned.append(git)
        guarded += _guard_gitdir(
            git, layout, layout, checkouts, submodules=_exists(posixpath.join(root, ".gitmodules"))
        )
    checkouts += [posixpath.join(root, path, ".git") for path in _submodule_paths(root)]
    guarded += _guard_checkouts(root, checkouts, layout)
    for hooks in _hooks_paths(root):
        # core.hooksPath naming a directory of the project (husky's .husky, a .githooks): it is
        # the hooks directory, so a hook planted there would run at the user's next git commit
        if _exists(hooks):
            guarded.append(hooks)
        else:
            layout.guard_missing.append(hooks)
    return guarded


_HOOKS_PATH = re.compile(r"^\s*hookspath\s*=\s*(.*?)\s*$", re.I)
_SECTION = re.compile(r"^\s*\[\s*([A-Za-z0-9.-]+)(\s+\"[^\"]*\")?\s*\]")


def _config_hooks_path(path: str) -> str | None:
    """``core.hooksPath`` as one git config file sets it (the last one wins), or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    found: str | None = None
    section = ""
    for line in lines:
        head = _SECTION.match(line)
        if head:
            section = head.group(1).lower() + ("" if head.group(2) is None else "!")
            line = line[head.end() :]
        m = _HOOKS_PATH.match(line)
        if m and section == "core":
            value = m.group(1).split(" #", 1)[0].split(" ;", 1)[0].strip()
            found = value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value
    return found


def _hooks_paths(root: str) -> list[str]:
    """The directories of ``root`` that ``core.hooksPath`` names, in the repository's config or
    the user's (git resolves a relative one from the top of the work tree)."""
    home = os.path.expanduser("~")
    configs = [
        posixpath.join(root, ".git", "config"),
        posixpath.join(root, ".git", "config.worktree"),
        posixpath.join(home, ".gitconfig"),
        posixpath.join(os.environ.get("XDG_CONFIG_HOME") or posixpath.join(home, ".config"), "git", "config"),
    ]
    out: list[str] = []
    for config in configs:
        value = _config_hooks_path(config)
        if not value:
            continue
        if value.startswith("~/"):
            value = posixpath.join(home, value[2:])
        path = posixpath.normpath(posixpath.join(root, value))
        real = _real(path) if _exists(path) else path
        if _under(real, [root]) and real != root:
            out.append(path)
    return list(dict.fromkeys(out))


def _guard_gitdir(
    gitdir: str, layout: Layout, top: Layout, checkouts: list[str], *, common: bool = True, submodules: bool = True
) -> list[str]:
    """What in a git directory names programs git runs (config, config.worktree, commondir,
    hooks) and what holds more git directories (``modules/``: submodules', ``worktrees/``: linked
    worktrees'). Those containers are read-only, so no git directory can be planted there for a
    submodule ``git submodule update`` would adopt; a missing ``modules/`` is covered too where the
    checkout has submodules (``submodules``: a .gitmodules; without one nothing would adopt it, and
    each cover is a mount). Each existing git directory in them is bound read-write again after
    them (a sub-layout of ``top``: commits work), with its own protected entries read-only after
    it, recursively. The .git entries of their checkouts go to ``checkouts``."""
    guarded: list[str] = []
    for name in _GITDIR_FILES if common else (*_GITDIR_FILES, "gitdir"):
        p = posixpath.join(gitdir, name)
        if _exists(p):
            guarded.append(p)
        elif name != "gitdir":
            layout.absent.append(p)  # created by the command: removed when it ends
    hooks = posixpath.join(gitdir, "hooks")
    if _exists(hooks):
        guarded.append(hooks)
    elif common:
        layout.guard_missing.append(hooks)
    for container in ("modules", "worktrees") if common else ("modules",):
        box = posixpath.join(gitdir, container)
        if not _exists(box):
            if container == "modules" and submodules:
                layout.guard_missing.append(box)
            continue
        guarded.append(box)
        if os.path.islink(box) or not os.path.isdir(box):
            continue
        for inner in _inner_gitdirs(box, nested=container == "modules"):
            sub = Layout(writable=[inner])
            top.worktrees.append(sub)  # before the ones inside it: mounted in this order
            checkout = _checkout_of(inner, container)
            nested = checkout is None or _exists(posixpath.join(posixpath.dirname(checkout), ".gitmodules"))
            found = _guard_gitdir(inner, sub, top, checkouts, common=container == "modules", submodules=nested)
            sub.readonly = [p for p in dict.fromkeys(_real(g) for g in found) if _under(p, [inner])]
            if checkout:
                checkouts.append(checkout)
    return guarded


def _inner_gitdirs(box: str, *, nested: bool) -> list[str]:
    """The git directories in ``modules/`` (a submodule's name may hold slashes: found by their
    HEAD, four levels deep at most) or ``worktrees/`` (each directory)."""
    found: list[str] = []
    level = [box]
    for _ in range(4 if nested else 1):
        below: list[str] = []
        for directory in level:
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if not nested or os.path.isfile(posixpath.join(entry.path, "HEAD")):
                    found.append(entry.path)
                else:
                    below.append(entry.path)
        level = below
    return found


def _checkout_of(gitdir: str, container: str) -> str | None:
    """The .git entry of the checkout a submodule's or linked worktree's git directory serves:
    ``core.worktree`` of a submodule's config, the ``gitdir`` file of a worktree's."""
    try:
        if container == "worktrees":
            with open(posixpath.join(gitdir, "gitdir"), encoding="utf-8", errors="replace") as f:
                target = f.read().strip()
            return posixpath.normpath(posixpath.join(gitdir, target)) if target else None
        worktree = _config_value(posixpath.join(gitdir, "config"), "core", "worktree")
    except OSError:
        return None
    return posixpath.normpath(posixpath.join(gitdir, worktree, ".git")) if worktree else None


def _config_value(path: str, section: str, key: str) -> str | None:
    """One plain ``key = value`` of a git config file's ``[section]`` (enough for core.worktree)."""
    current = ""
    value = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            line = raw.strip()
            if line.startswith("["):
                current = line.strip("[]").split()[0].lower() if line.strip("[]").split() else ""
            elif current == section and "=" in line:
                k, v = line.split("=", 1)
                if k.strip().lower() == key:
                    value = v.strip().strip('"')
    return value


def _submodule_paths(root: str) -> list[str]:
    """The ``path =`` entries of the root's .gitmodules (checked out or not)."""
    paths: list[str] = []
    try:
        with open(posixpath.join(root, ".gitmodules"), encoding="utf-8", errors="replace") as f:
            for raw in f:
                key, _, value = raw.strip().partition("=")
                if key.strip().lower() == "path" and value.strip():
                    paths.append(value.strip().strip('"'))
    except OSError:
        pass
    return paths


def _guard_checkouts(root: str, checkouts: list[str], layout: Layout) -> list[str]:
    """A submodule's or linked worktree's checkout inside ``root``: its .git (a file naming its git
    directory; rewritten, git would run a config of the command's choosing at the user's next
    ``git status`` in the superproject) is read-only, and every directory from the root down to it
    is a mount point (``mv sub sub2 && mkdir -p sub/.git`` fails: EBUSY). A checkout without one
    may not get one (removed when the command ends). A checkout under ``.keel/`` is an agent's
    worktree's, guarded with that worktree; one under another protected directory is read-only
    already."""
    guarded: list[str] = []
    for dotgit in dict.fromkeys(posixpath.normpath(c) for c in checkouts):
        checkout = posixpath.dirname(dotgit)
        if not _under(checkout, [root]) or checkout == root:
            continue
        rel = posixpath.relpath(checkout, root).split("/")
        if ".." in rel or rel[0] in _GUARDED_DIRS or rel[0] == ".git" or not os.path.isdir(checkout):
            continue
        chain = [posixpath.join(root, *rel[: i + 1]) for i in range(len(rel))]
        if any(os.path.islink(d) for d in chain):
            continue  # a symlink in the way: the path leads elsewhere (outside or read-only)
        layout.pinned += [d for d in chain if d not in layout.pinned]
        if os.path.isdir(dotgit) and not os.path.islink(dotgit):  # a submodule with its own .git directory
            layout.pinned.append(dotgit)
            guarded += _guard_gitdir(dotgit, layout, layout, [])
        elif _exists(dotgit):
            guarded.append(dotgit)
        else:
            layout.absent.append(dotgit)
    return guarded


def _worktrees(root: str) -> list[str]:
    """The agents' worktrees of a working tree: the real directories in ``.keel/worktrees/`` (a
    symlink there is not one: it stays read-only with the rest of ``.keel``)."""
    base = posixpath.join(root, *WORKTREES)
    if os.path.islink(posixpath.join(root, WORKTREES[0])) or os.path.islink(base) or not os.path.isdir(base):
        return []
    try:
        return sorted(e.path for e in os.scandir(base) if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def default_hidden(home: str, keel_home: str | None = None) -> list[str]:
    """Hidden from every sandboxed command, whatever the rules say: the credential stores (the
    list the permission engine asks about reads of, ``permissions.paths.CREDENTIAL_STORES``)."""
    return credential_paths(home, keel_home)
