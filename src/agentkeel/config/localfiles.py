"""keel's local files in a project are git-ignored, by a ``.keel/.gitignore`` keel writes itself.

keel writes a few files into the project that belong to this checkout only: the local settings
(``.keel/settings.local.json``: rules approved "for this project", MCP server choices), agents'
worktrees (``.keel/worktrees/``), local agent memory (``.keel/agents/*/MEMORY.local.md``) and the
memory mirror (``.keel/memory/MEMORY.md``: its ids name entries of this machine's memory store).
The first time it writes one, it adds ``.keel/.gitignore`` naming them (the file ignores itself
too, so a checkout's ``git status`` stays clean). The user's own ``.gitignore`` is never edited,
and an existing ``.keel/.gitignore`` is left as it is.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

GITIGNORE = """\
# keel's local files in this checkout (written by keel): never committed.
# Shared project files (.keel/settings.json, agents/, skills/, commands/) are not listed here.
/.gitignore
/settings.local.json
/settings.local.json.tmp
/.settings.*.tmp
/worktrees/
/agents/*/MEMORY.local.md
/memory/
"""


def ignore_local_files(path: Path) -> None:
    """``path`` (a file keel writes, or a folder) is in a project's ``.keel/``: make sure ``.keel/.gitignore``
    exists. Best effort: a read-only folder or any other error leaves things as they are."""
    keel_dir = next((p for p in (path, *path.parents) if p.name == ".keel"), None)
    if keel_dir is None:
        return
    target = keel_dir / ".gitignore"
    if os.path.lexists(target):
        return
    with contextlib.suppress(OSError):
        keel_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            os.write(fd, GITIGNORE.encode())
        finally:
            os.close(fd)
