"""The filesystem a sandboxed command sees, as bubblewrap arguments.

Order matters: bubblewrap applies them left to right, so a later mount covers an earlier one.

1. the whole filesystem read-only (``--ro-bind / /``), a private ``/proc`` (the new PID
   namespace's: ``/proc/<pid>`` of a process outside does not exist inside), a minimal ``/dev``,
   an empty ``/run`` and ``/tmp/.X11-unix`` (no host daemon's socket: docker, dbus, systemd)
   unless every Unix socket is allowed, with the sockets ``allowUnixSockets`` names there bound
   back;
2. the writable roots bound read-write: the working directories, the session's temp dir,
   ``sandbox.filesystem.allowWrite``;
3. inside them, protected entries bound read-only again: ``.git/hooks``, ``.git/config``,
   ``.claude/``, ``.keel/``, ``.vscode/``, shell rc files... (an entry that does not exist yet is
   covered by an empty read-only directory, so it cannot be created either), ``$KEEL_HOME``,
   ``sandbox.filesystem.denyWrite``;
4. agents' worktrees (``.keel/worktrees/<name>/``) bound read-write again inside the read-only
   ``.keel/``: another working tree, whose own protected entries (its ``.git``, ``.keel/``,
   ``.claude/``, rc files...) are bound read-only after it, as at a root;
5. Read-denied paths, credential stores and the host's Unix sockets (``sockets.py``) covered
   by an empty file or directory nobody may open (mode 000).

A protected file that does not exist yet (``.mcp.json``, ``.envrc``, ``.pre-commit-config.yaml``)
cannot be covered without creating it; if the command creates one, keel removes it when the
command ends and says so.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field

from agentkeel.permissions.paths import PROTECTED_DIRS, PROTECTED_FILES, WORKTREES, credential_paths

# inside every writable root: read-only even there (they run code nobody chose to run)
_GUARDED_DIRS = tuple(sorted((PROTECTED_DIRS - {".git"}) | {".vscode", ".idea"}))
_GUARDED_FILES = tuple(sorted(PROTECTED_FILES))
_GIT_GUARDED = ("hooks", "config")  # hooks, and the config that names programs (core.hooksPath, fsmonitor)
# replaced by an empty tmpfs unless every Unix socket is allowed: host daemons' sockets
MASKED = ("/run", "/var/run", "/tmp/.X11-unix")  # noqa: S108
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
        from agentkeel.permissions.paths import PROTECTED_HOME

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
    for sub in layout.worktrees:  # what is read-only inside a worktree is mounted after the worktree
        inside = [p for p in layout.readonly if _under(p, sub.writable) and p not in sub.writable]
        sub.readonly += [p for p in inside if p not in sub.readonly]
        layout.readonly = [p for p in layout.readonly if p not in inside]
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
    if os.path.isfile(git) or os.path.islink(git):
        # a worktree's .git is a file naming the repository: rewritten, it would point git at a
        # config of the command's choosing (core.hooksPath) for the user's next git command
        guarded.append(git)
    elif os.path.isdir(git):
        layout.pinned.append(git)
        for name in _GIT_GUARDED:
            p = posixpath.join(git, name)
            if _exists(p):
                guarded.append(p)
            elif name == "hooks":
                layout.guard_missing.append(p)
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
