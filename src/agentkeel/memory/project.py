"""Project identity: the same project in every git worktree, so memories are not split."""

from __future__ import annotations

import hashlib
from pathlib import Path

from agentkeel.internal.env import KeelEnv


def git_common_dir(start: Path) -> Path | None:
    """The repository's common git dir (shared by all its worktrees), found without running git."""
    for directory in (start, *start.parents):
        dot_git = directory / ".git"
        if dot_git.is_dir():
            return dot_git.resolve()
        if dot_git.is_file():
            try:
                line = dot_git.read_text(encoding="utf-8").strip()
            except OSError:
                return None
            if not line.startswith("gitdir:"):
                return None
            gitdir = Path(line.split(":", 1)[1].strip())
            if not gitdir.is_absolute():
                gitdir = (directory / gitdir).resolve()
            commondir = gitdir / "commondir"
            if commondir.is_file():
                try:
                    target = Path(commondir.read_text(encoding="utf-8").strip())
                except OSError:
                    return gitdir.resolve()
                return (target if target.is_absolute() else gitdir / target).resolve()
            return gitdir.resolve()
    return None


def project_id(cwd: Path, override: str | None = None) -> str:
    """``<name>-<hash>`` of the git common dir (or of the directory outside git); override wins."""
    chosen = override or KeelEnv.of().memory_project
    if chosen:
        return chosen
    resolved = cwd.resolve()
    common = git_common_dir(resolved)
    if common is not None:
        root = common.parent if common.name == ".git" else common
        key = str(common)
    else:
        root, key = resolved, str(resolved)
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    return f"{root.name or 'root'}-{digest}"
