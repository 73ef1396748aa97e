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
