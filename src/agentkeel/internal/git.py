"""keel's own ``git`` calls, one runner: run so that a folder's git configuration cannot run code
through them, always with a timeout; and where a repository's root is.

A repository's ``.git/config`` is the repository's, not the user's: a planted ``core.fsmonitor``
runs at every ``git status``/``ls-files``/``diff-files``, ``core.hooksPath`` or ``.git/hooks``
run at ``commit``/``worktree add``, ``core.pager`` at anything that pages. Every git call keel
makes for itself (checkpoints, the ``@`` file list, subagent worktrees, batch clones) goes
through :func:`run_git` / :func:`run_git_async` (or :func:`git_argv` and :func:`git_env`):
fsmonitor, hooks and the pager are switched off on the command line (which wins over every
config file), optional locks are not taken (keel's look must not race the user's own git), and
no ``GIT_*`` variable of keel's environment (where a hostile ``GIT_DIR``,
``GIT_CONFIG_PARAMETERS`` or ``GIT_EXTERNAL_DIFF`` could come from) is passed on, except the
transport ones a clone needs when asked for.

Filter drivers (``filter.<name>.clean/smudge/process``) are repository configuration too;
callers that would run them (content comparison, ``cat-file --filters``) check
:func:`has_filter_drivers` first. The Bash tool's own git is the user's git and untouched.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agentkeel.internal import procs

SAFE_CONFIG: tuple[str, ...] = (
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.pager=cat",
    "-c",
    "core.untrackedCache=false",
)
# kept for network calls (a batch task's clone): how the user reaches their remotes
TRANSPORT_ENV = frozenset({"GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH"})


def git_argv(*args: str) -> list[str]:
    """``git`` with the safe options, then ``args``."""
    return ["git", *SAFE_CONFIG, *args]


def git_env(base: Mapping[str, str] | None = None, *, transport: bool = False) -> dict[str, str]:
    """``base`` (default: this process's environment) without ``GIT_*`` (but the transport ones
    when ``transport``), with no optional locks, no prompts and no pager."""
    env = {
        k: v
        for k, v in (os.environ if base is None else base).items()
        if not k.startswith("GIT_") or (transport and k in TRANSPORT_ENV)
    }
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", PAGER="cat")
    return env


def run_git(
    root: Path | None,
    *args: str,
    timeout: float | None = 30,
    input_bytes: bytes | None = None,
    transport: bool = False,
) -> subprocess.CompletedProcess[bytes] | None:
    """Run ``git -C root args`` safely, in its own process group (killed whole on the timeout;
    None: no limit, for a batch task's clone); None when git cannot be run or timed out.
    ``transport``: keep the variables a clone needs to reach a remote."""
    argv = git_argv(*(["-C", str(root)] if root is not None else []), *args)
    ran = procs.run_sync(argv, cwd=None, env=git_env(transport=transport), timeout=timeout, stdin=input_bytes)
    if ran.exit_code is None:
        return None
    return subprocess.CompletedProcess(argv, ran.exit_code, ran.stdout, ran.stderr)


def has_filter_drivers(root: Path) -> bool:
    """Whether the repository (or the user's config) defines a filter driver: a command git
    would run to convert content. Unknown (git failed) counts as yes."""
    proc = run_git(root, "config", "--get-regexp", r"^filter\..*\.(clean|smudge|process)$")
    if proc is None or proc.returncode not in (0, 1):  # 1: none found
        return True
    return proc.returncode == 0 and bool(proc.stdout.strip())


async def run_git_async(
    root: Path | None, *args: str, timeout: float = 120, env: Mapping[str, str] | None = None
) -> tuple[int | None, str]:
    """Run ``git args`` in ``root`` safely, in its own process group, killed with everything it
    started on the timeout: (exit code, stdout and stderr together, stripped); the code is None
    when git did not run or finish (the text says why)."""
    ran = await procs.run(git_argv(*args), cwd=root, env=git_env(env), timeout=timeout, merge_stderr=True)
    text = ran.stdout.decode("utf-8", errors="replace").strip()
    if ran.exit_code is None:
        return None, ran.error if not text else f"{text}\n{ran.error}"
    return ran.exit_code, text


def find_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``.git`` (a folder, or a worktree's file),
    found without running git."""
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    return None


def toplevel(cwd: Path, timeout: float = 10) -> Path | None:
    """The work tree's root as git says (``rev-parse --show-toplevel``), or None outside one."""
    proc = run_git(cwd, "rev-parse", "--show-toplevel", timeout=timeout)
    if proc is None or proc.returncode != 0:
        return None
    out = proc.stdout.decode("utf-8", errors="replace").strip()
    return Path(out) if out else None


# --- the snapshot keel gives the model at a session's start ----------------------------------

SNAPSHOT_STATUS_LINES = 20  # changed paths listed; the rest are counted
SNAPSHOT_COMMITS = 5
SNAPSHOT_LINE_CHARS = 160  # a path or a subject longer than this is cut


@dataclass(frozen=True)
class Snapshot:
    """What the repository looked like once: the branch, the main branch, the changes (the first
    :data:`SNAPSHOT_STATUS_LINES` of ``git status --short``, and how many there are in all) and
    the last commits. Bounded whatever the repository's size."""

    branch: str
    main_branch: str | None
    changes: tuple[str, ...]
    changed_total: int
    commits: tuple[str, ...]

    def render(self) -> str:
        main = f"; main branch: {self.main_branch}" if self.main_branch and self.main_branch != self.branch else ""
        lines = [f"Git branch: {self.branch}{main}"]
        if self.changed_total:
            n = self.changed_total
            lines.append(f"Changes ({n} path{'s' if n != 1 else ''}, `git status --short`):")
            lines += [f"  {c}" for c in self.changes]
            if self.changed_total > len(self.changes):
                lines.append(f"  ... and {self.changed_total - len(self.changes)} more")
        else:
            lines.append("Working tree clean at session start.")
        if self.commits:
            lines.append("Recent commits:")
            lines += [f"  {c}" for c in self.commits]
        return "\n".join(lines)


def _cut(line: str) -> str:
    return line if len(line) <= SNAPSHOT_LINE_CHARS else line[: SNAPSHOT_LINE_CHARS - 3] + "..."


def _out(root: Path, *args: str, timeout: float) -> str | None:
    proc = run_git(root, *args, timeout=timeout)
    if proc is None or proc.returncode != 0:
        return None
    return proc.stdout.decode("utf-8", errors="replace")


def main_branch(root: Path, timeout: float = 5) -> str | None:
    """The branch pull requests usually target: the remote's default (``origin/HEAD``), else a
    local ``main`` or ``master``; None when there is neither."""
    remote = _out(root, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD", timeout=timeout)
    if remote and remote.strip():
        return remote.strip().removeprefix("origin/")
    for name in ("main", "master"):
        if _out(root, "rev-parse", "--verify", "--quiet", f"refs/heads/{name}", timeout=timeout) is not None:
            return name
    return None


def snapshot(cwd: Path, timeout: float = 5) -> Snapshot | None:
    """The repository at ``cwd`` now (None outside one, or when git cannot tell). Each git call
    is bounded by ``timeout``; only the first lines of a long status are kept."""
    branch = _out(cwd, "symbolic-ref", "--quiet", "--short", "HEAD", timeout=timeout)
    if branch is None:  # detached, or not a repository
        head = _out(cwd, "rev-parse", "--short", "HEAD", timeout=timeout)
        if head is None:
            if _out(cwd, "rev-parse", "--git-dir", timeout=timeout) is None:
                return None
            head = "(no commits yet)"
        branch = f"(detached at {head.strip()})" if head != "(no commits yet)" else head
    status = _out(cwd, "status", "--short", "--no-renames", timeout=timeout)
    lines = [ln for ln in (status or "").splitlines() if ln.strip()]
    log_out = _out(cwd, "log", f"-n{SNAPSHOT_COMMITS}", "--no-decorate", "--format=%h %s", timeout=timeout) or ""
    return Snapshot(
        branch=branch.strip(),
        main_branch=main_branch(cwd, timeout),
        changes=tuple(_cut(ln) for ln in lines[:SNAPSHOT_STATUS_LINES]),
        changed_total=len(lines),
        commits=tuple(_cut(ln) for ln in log_out.splitlines() if ln.strip()),
    )
