"""``keel -w [NAME]``: run the session (interactive, ``-p`` or stream-json) in a git worktree.

See :mod:`agentkeel.agents.sessiontree` for where the worktree lives and what happens at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

from agentkeel.ui.cli._common import EXIT_USAGE


def _say(text: str) -> None:
    print(f"keel: {text}", file=sys.stderr)


def _ask(question: str) -> str:
    try:
        return input(question)
    except (EOFError, KeyboardInterrupt):
        print()
        return ""


def _inherit_trust(root: Path, tree: Path) -> bool:
    """A new worktree is a checkout of the trusted main tree: when its project settings are the very
    files the user trusted there (same content hash), it is trusted too. True when it was."""
    from agentkeel import TrustStore, keel_home
    from agentkeel.config.trust import content_hash

    store = TrustStore(keel_home())
    if not store.state(root).trusted or store.state(tree).status != "untrusted":
        return False
    if content_hash(tree) != content_hash(root):
        return False  # e.g. the main tree's uncommitted settings: the user trusted those, not these
    store.trust(tree)
    return True


def _forget_trust(tree: Path) -> None:
    from agentkeel import TrustStore, keel_home

    if not tree.exists():
        TrustStore(keel_home()).revoke(tree)


def left_worktrees(cwd: Path, going_on: str | None = None) -> str | None:
    """One line naming the keel worktrees of the repository holding ``cwd`` (other than the one ``cwd`` is
    in, and ``going_on``: the ``-w`` name of this session), or None.

    Said when a session is resumed: a ``keel -w`` or a worktree-isolated agent killed before it finished
    leaves its worktree and branch, with the work in them, and nothing else points at them."""
    from agentkeel.internal.git import run_git

    here = cwd.resolve()
    root = next((p for p in (here, *here.parents) if (p / ".keel" / "worktrees").is_dir()), None)
    if root is None:
        return None
    listed = run_git(root, "worktree", "list", "--porcelain", timeout=10)
    if listed is None:
        return None
    out = listed.stdout.decode("utf-8", errors="replace")
    base = (root / ".keel" / "worktrees").resolve()
    found: list[str] = []
    path: Path | None = None
    branch = ""
    for line in [*out.splitlines(), ""]:
        if line.startswith("worktree "):
            path = Path(line[len("worktree ") :])
            branch = ""
        elif line.startswith("branch "):
            branch = line[len("branch ") :].removeprefix("refs/heads/")
        elif not line and path is not None:
            real = path.resolve()
            mine = here.is_relative_to(real) or (going_on is not None and real == base / going_on)
            if real.is_relative_to(base) and real != base and not mine:
                shown = str(real.relative_to(root.resolve()))
                found.append(f"{shown} (branch {branch})" if branch else shown)
            path = None
    if not found:
        return None
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return (
        f"{len(found)} keel worktree(s) left in this repository by earlier sessions or agents, with their work: "
        f"{', '.join(found[:3])}{more}. Review with `git worktree list` and `git diff HEAD...BRANCH`; "
        "go on with `keel -w NAME`, or drop one with `git worktree remove --force PATH && git branch -D BRANCH`"
    )


def run_in_session_worktree(args: argparse.Namespace, run: Callable[[], int]) -> int:
    """Open the worktree, point the session at it, run, then finish (merge, keep or discard)."""
    from agentkeel.agents.sessiontree import finish, main_tree_dirty, open_tree, random_name
    from agentkeel.agents.worktree import WorktreeError

    name = args.worktree or random_name()
    cwd = Path(args.cwd) if args.cwd else Path.cwd()
    try:
        tree = asyncio.run(open_tree(cwd, name))
        dirty = asyncio.run(main_tree_dirty(tree))
    except WorktreeError as e:
        _say(f"-w: {e}")
        return EXIT_USAGE
    inherited = _inherit_trust(cwd, tree.workdir)
    verb = "created" if tree.created else "using the existing"
    _say(f"{verb} worktree {tree.shown()} on branch {tree.branch}")
    if dirty:
        _say(
            "the main tree's uncommitted changes are not in the worktree (it starts from HEAD); keel leaves them alone"
        )
    if inherited:
        _say("the worktree's project settings are those you trusted in the main tree: trusted too")
    args.cwd = str(tree.workdir)
    headless = args.print_mode or args.input_format == "stream-json"
    code: int | None = None
    try:
        code = run()
    finally:
        # an exception or Ctrl-C leaves nobody to ask: the work is committed on the branch and kept
        interactive = code is not None and not headless and sys.stdin.isatty()
        asyncio.run(finish(tree, _ask if interactive else None, print if interactive else _say))
        if inherited:
            _forget_trust(tree.workdir)
    return code
