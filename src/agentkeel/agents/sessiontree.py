"""``keel -w NAME``: the whole session works in its own git worktree (Claude Code's ``--worktree``).

The worktree is ``<repo>/.keel/worktrees/NAME`` on branch ``keel/NAME``, from ``HEAD``; an
existing one of that name is used again (its branch carries on), so ``keel -w NAME`` twice
goes on with the same work. Without a name keel picks one (``-w`` alone).

At the end (:func:`finish`) the worktree's uncommitted changes are committed on its branch
first, so nothing that was written is ever lost. Then:

* no change against the main tree's ``HEAD``: the worktree and the branch are removed;
* someone to ask (an interactive session): the diff is shown, then *merge* (``--no-ff`` into
  the main tree's current branch; refused while the main tree has uncommitted changes, which
  keel never touches, or when it conflicts: then the branch is kept), *keep*, or *discard*
  (the worktree and branch are removed; the commit id is printed, so ``git branch`` can bring
  it back until git collects it);
* nobody to ask (``-p``, stream-json, or the question is not answered): the worktree and the
  branch are kept, and one line says how to merge or drop them. Claude Code keeps a ``-p``
  session's worktree too.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentkeel.agents.worktree import WORKTREE_DIR, Git, Worktree, WorktreeError, _exclude, _git_lock, repo_root

_SEGMENT = re.compile(r"^[A-Za-z0-9._-]+$")
_ADJECTIVES = ("brisk", "calm", "clever", "eager", "gentle", "keen", "lucid", "nimble", "quiet", "steady", "swift")
_NOUNS = ("badger", "comet", "falcon", "harbor", "heron", "lantern", "otter", "pine", "river", "sparrow", "willow")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a worktree (Claude Code's rule), or None."""
    segments = name.split("/")
    if not name or any(not s or not _SEGMENT.match(s) or s in (".", "..") for s in segments):
        return (
            f'invalid worktree name "{name}": each "/"-separated part must be non-empty and contain only '
            "letters, digits, dots, underscores and dashes"
        )
    return None


def random_name() -> str:
    return f"{secrets.choice(_ADJECTIVES)}-{secrets.choice(_NOUNS)}-{secrets.token_hex(2)}"


@dataclass
class SessionTree:
    tree: Worktree
    name: str
    created: bool  # made now (False: an existing worktree of this name, used again)
    workdir: Path  # where the session runs: the worktree, or the same subfolder of it the user was in

    @property
    def branch(self) -> str:
        return self.tree.branch

    def shown(self) -> str:
        """The worktree's path as the user sees it: relative to the main tree."""
        return str(self.tree.path.relative_to(self.tree.root))


async def _registered(root: Path) -> dict[Path, str]:
    """The main tree's worktrees: path -> branch ("" when detached)."""
    _, out = await Git(root).run("worktree", "list", "--porcelain")
    found: dict[Path, str] = {}
    path: Path | None = None
    for line in out.splitlines():
        if line.startswith("worktree "):
            path = Path(line[len("worktree ") :]).resolve()
            found[path] = ""
        elif line.startswith("branch ") and path is not None:
            found[path] = line[len("branch ") :].removeprefix("refs/heads/")
    return found


async def open_tree(cwd: Path, name: str) -> SessionTree:
    """The worktree ``name`` of the repository holding ``cwd``, made when it does not exist yet."""
    problem = name_problem(name)
    if problem:
        raise WorktreeError(problem)
    try:
        root = (await repo_root(cwd)).resolve()
    except WorktreeError:
        raise WorktreeError(f"{cwd} is not in a git repository (a worktree needs one)") from None
    path = root / WORKTREE_DIR / name
    branch = f"keel/{name}"
    git = Git(root)
    async with _git_lock():
        await _exclude(root)
        _, head = await git.run("rev-parse", "HEAD", check=False)
        if not re.fullmatch(r"[0-9a-f]{40,64}", head):
            raise WorktreeError(f"the repository {root} has no commit yet (a worktree starts from one)")
        await git.run("worktree", "prune", check=False)
        known = await _registered(root)
        created = False
        if path.resolve() in known:
            if known[path.resolve()] != branch:
                raise WorktreeError(
                    f"{path} is a worktree of branch {known[path.resolve()] or '(detached)'}, not {branch}"
                )
        elif path.exists():
            raise WorktreeError(f"{path} exists and is not a git worktree; move it away or choose another name")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            code, _ = await git.run("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False)
            if code == 0:  # the branch of an earlier session whose worktree is gone: go on with it
                await git.run("worktree", "add", "-q", str(path), branch)
            else:
                await git.run("worktree", "add", "-q", "-b", branch, str(path), head)
            created = True
        _, base = await git.run("merge-base", "HEAD", branch)
    try:
        sub = cwd.resolve().relative_to(root)
    except ValueError:
        sub = Path()
    workdir = path / sub if (path / sub).is_dir() else path
    return SessionTree(Worktree(root, path, branch, base), name, created, workdir)


async def main_tree_dirty(tree: SessionTree) -> bool:
    return not await tree.tree.main_tree_clean()


async def save(tree: SessionTree) -> bool:
    """Commit whatever the session left uncommitted in the worktree; True when there was some."""
    return await tree.tree.commit(f"keel -w {tree.name}: the session's work")


async def ahead(tree: SessionTree) -> int:
    """Commits on the worktree's branch that the main tree's HEAD does not have."""
    _, count = await Git(tree.tree.root).run("rev-list", "--count", f"HEAD..{tree.branch}")
    return int(count or 0)


async def diff(tree: SessionTree) -> str:
    root = Git(tree.tree.root)
    _, base = await root.run("merge-base", "HEAD", tree.branch)
    tree.tree.base = base
    return await tree.tree.diff()


async def merge(tree: SessionTree) -> tuple[bool, str]:
    ok, problem = await tree.tree.merge()
    if ok:
        await tree.tree.remove(keep_branch=False)
    return ok, problem


async def discard(tree: SessionTree) -> str:
    """Remove the worktree and its branch; the commit id the branch pointed at."""
    _, tip = await Git(tree.tree.root).run("rev-parse", tree.branch)
    await tree.tree.remove(keep_branch=False)
    return tip


def how_to_finish(tree: SessionTree) -> str:
    path = tree.shown()
    return (
        f"the session's work is on branch {tree.branch} (worktree {path}): review it with "
        f"`git diff HEAD...{tree.branch}`, merge it with `git merge {tree.branch}`, go on with `keel -w {tree.name}`, "
        f"or drop it with `git worktree remove --force {path} && git branch -D {tree.branch}`"
    )


Ask = Callable[[str], str]  # shows a question, returns the answer ("" when there is nobody to answer)


async def finish(tree: SessionTree, ask: Ask | None, say: Callable[[str], None]) -> None:
    """Save, then merge / keep / discard (see the module's doc)."""
    try:
        await save(tree)
    except WorktreeError as e:  # the work stays, uncommitted, in the worktree
        say(f"cannot commit the session's work in {tree.shown()} ({e}); the worktree is kept as it is")
        return
    if await ahead(tree) == 0:
        await tree.tree.remove(keep_branch=False)
        say(f"worktree {tree.shown()} has no changes; removed it and branch {tree.branch}")
        return
    if ask is None:
        say(how_to_finish(tree))
        return
    say(f"changes in worktree {tree.shown()} (branch {tree.branch}):\n{await diff(tree)}")
    while True:
        answer = ask(f"Merge branch {tree.branch} into the main tree? [m]erge / [k]eep / [d]iscard: ").strip().lower()
        if answer in ("m", "merge", "y", "yes"):
            ok, problem = await merge(tree)
            say(
                f"merged branch {tree.branch}; removed the worktree"
                if ok
                else f"not merged: {problem}. {how_to_finish(tree)}"
            )
            return
        if answer in ("d", "discard"):
            tip = await discard(tree)
            say(
                f"discarded worktree {tree.shown()} and branch {tree.branch} "
                f"(`git branch {tree.branch} {tip[:12]}` brings it back)"
            )
            return
        if answer in ("k", "keep", ""):
            say(how_to_finish(tree))
            return
