"""``keel -w [NAME]``: run the session (interactive, ``-p`` or stream-json) in a git worktree.

See :mod:`agentkeel.agents.sessiontree` for where the worktree lives and what happens at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable

from agentkeel.cli._common import EXIT_USAGE


def _say(text: str) -> None:
    print(f"keel: {text}", file=sys.stderr)


def _ask(question: str) -> str:
    try:
        return input(question)
    except (EOFError, KeyboardInterrupt):
        print()
        return ""


def run_in_session_worktree(args: argparse.Namespace, run: Callable[[], int]) -> int:
    """Open the worktree, point the session at it, run, then finish (merge, keep or discard)."""
    from pathlib import Path

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
    verb = "created" if tree.created else "using the existing"
    _say(f"{verb} worktree {tree.shown()} on branch {tree.branch}")
    if dirty:
        _say(
            "the main tree's uncommitted changes are not in the worktree (it starts from HEAD); keel leaves them alone"
        )
    args.cwd = str(tree.workdir)
    headless = args.print_mode or args.input_format == "stream-json"
    code: int | None = None
    try:
        code = run()
    finally:
        # an exception or Ctrl-C leaves nobody to ask: the work is committed on the branch and kept
        interactive = code is not None and not headless and sys.stdin.isatty()
        asyncio.run(finish(tree, _ask if interactive else None, print if interactive else _say))
    return code
