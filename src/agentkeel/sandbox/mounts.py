"""The filesystem a sandboxed command sees, as bubblewrap arguments.

Order matters: bubblewrap applies them left to right, so a later mount covers an earlier one.

1. the whole filesystem read-only (``--ro-bind / /``), a private ``/proc`` (the new PID
   namespace's: ``/proc/<pid>`` of a process outside does not exist inside), a minimal ``/dev``,
   an empty ``/run`` (no host daemon's socket: docker, dbus, systemd) unless every Unix socket
   is allowed;
2. the writable roots bound read-write: the working directories, the session's temp dir,
   ``sandbox.filesystem.allowWrite``;
3. inside them, protected entries bound read-only again: ``.git/hooks``, ``.git/config``,
   ``.claude/``, ``.keel/``, ``.vscode/``, shell rc files... (an entry that does not exist yet is
   covered by an empty read-only directory, so it cannot be created either), ``$KEEL_HOME``,
   ``sandbox.filesystem.denyWrite``;
4. Read-denied paths covered by an empty file or directory nobody may open (mode 000).

A protected file that does not exist yet (``.mcp.json``, ``.envrc``, ``.pre-commit-config.yaml``)
cannot be covered without creating it; if the command creates one, keel removes it when the
command ends and says so.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field

from agentkeel.permissions.paths import PROTECTED_DIRS, PROTECTED_FILES

# inside every writable root: read-only even there (they run code nobody chose to run)
_GUARDED_DIRS = tuple(sorted((PROTECTED_DIRS - {".git"}) | {".vscode", ".idea"}))
_GUARDED_FILES = tuple(sorted(PROTECTED_FILES))
_GIT_GUARDED = ("hooks", "config")  # hooks, and the config that names programs (core.hooksPath, fsmonitor)
# created as empty read-only mount points when missing, so they cannot be made either
_ALWAYS_GUARDED = (".claude", ".keel")
# credentials hidden from every sandboxed command, whatever the rules say
DEFAULT_HIDDEN_HOME = (".ssh", ".aws", ".gnupg", ".kube", ".netrc", ".git-credentials", ".docker/config.json")


@dataclass
class Layout:
    """What to mount; :meth:`args` renders it. ``created`` lists the empty mount points bubblewrap
    had to make on the host (missing protected directories), removed after the run."""

    writable: list[str] = field(default_factory=list)
    readonly: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    guard_missing: list[str] = field(default_factory=list)
    # protected entries that do not exist and are not covered by a mount (.mcp.json, .envrc...):
    # one the command creates is removed when it ends (see Sandbox.finished)
    absent: list[str] = field(default_factory=list)
    masked_dirs: list[str] = field(default_factory=list)  # replaced by an empty tmpfs
    # directories between a writable root and a guarded entry, bound onto themselves: a mount
    # point cannot be renamed, so ``mv .git .git2 && mkdir -p .git/hooks`` fails (EBUSY)
    pinned: list[str] = field(default_factory=list)

    def args(self, empty_file: str, empty_dir: str, ro_dir: str) -> list[str]:
        out = ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm"]
        for d in self.masked_dirs:
            out += ["--tmpfs", d]
        for w in self.writable:
            out += ["--bind", w, w]
        for p in self.pinned:
            out += ["--bind", p, p]
        for r in self.readonly:
            out += ["--ro-bind", r, r]
        for g in self.guard_missing:
            out += ["--ro-bind", ro_dir, g]
        for h in self.hidden:
            out += ["--ro-bind", empty_dir if os.path.isdir(h) else empty_file, h]
        return out


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
) -> Layout:
    """Resolve every path (bubblewrap mounts on the real path) and keep what exists."""
    layout = Layout()
    if mask_run:
        layout.masked_dirs += [d for d in ("/run", "/var/run", "/tmp/.X11-unix") if os.path.isdir(d)]
        layout.masked_dirs = [d for d in dict.fromkeys(_real(d) for d in layout.masked_dirs)]
    roots = [r for r in dict.fromkeys(_real(w) for w in writable) if os.path.isdir(r)]
    # a root inside another is already writable; keep the outermost
    roots = [r for r in roots if not _under(r, [o for o in roots if o != r])]
    layout.writable = roots
    home_real = _real(home) if home else ""
    guarded: list[str] = []
    for root in roots:
        if scratch and root == _real(scratch):
            continue  # the session's own temp dir: nothing there runs by itself
        for name in (*_GUARDED_DIRS, *_GUARDED_FILES):
            p = posixpath.join(root, name)
            if _exists(p):
                guarded.append(p)
            elif name in _ALWAYS_GUARDED:
                layout.guard_missing.append(p)
            else:
                layout.absent.append(p)
        git = posixpath.join(root, ".git")
        if os.path.isdir(git) and not os.path.islink(git):
            layout.pinned.append(git)
            for name in _GIT_GUARDED:
                p = posixpath.join(git, name)
                if _exists(p):
                    guarded.append(p)
                elif name == "hooks":
                    layout.guard_missing.append(p)
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
    # a hidden directory holding a working directory would hide the working directory too
    layout.hidden = [
        p for p in dict.fromkeys(_real(h) for h in hidden if _exists(h)) if not any(_under(r, [p]) for r in roots)
    ]
    return layout


def default_hidden(home: str) -> list[str]:
    return [posixpath.join(home, name) for name in DEFAULT_HIDDEN_HOME] if home else []
