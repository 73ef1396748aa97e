"""Worktree isolation: an agent that writes works in its own ``git worktree``.

The worktree is ``<repo>/.keel/worktrees/<agent id>`` on a new branch ``keel/agent-<id>`` from
``HEAD`` (as Claude Code keeps its own under ``.claude/worktrees``; the folder is added to
``.git/info/exclude``, and the permission engine and the sandbox carve ``.keel/worktrees/<name>``
out of the protected ``.keel/``). When the agent stops, its changes are committed on the branch
and the diff is shown. Then:

* approved (the ``merge`` argument, or the session's permission checks for ``git merge``):
  the branch is merged into the main tree with ``--no-ff``; the worktree and branch go away;
* rejected: the worktree and the branch are removed;
* interrupted, or a merge that cannot be done (conflict, or a main tree with uncommitted
  changes, which keel never touches): the worktree is removed and the branch kept, with
  the agent's work committed on it: nothing is lost, and the message names the branch.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass
from pathlib import Path

from agentkeel.agents.defs import AgentDef
from agentkeel.agents.spawner import SubagentResult, SubagentSpawner
from agentkeel.internal.git import run_git_async

log = logging.getLogger(__name__)

WORKTREE_DIR = ".keel/worktrees"
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


def _git_lock() -> asyncio.Lock:
    """One per event loop: git's own index and ref locks do not like parallel worktree commands."""
    loop = asyncio.get_running_loop()
    lock = _locks.get(loop)
    if lock is None:
        lock = _locks[loop] = asyncio.Lock()
    return lock


class WorktreeError(Exception):
    """Worktree isolation is not possible here; the message says why."""


@dataclass
class Git:
    cwd: Path

    async def run(self, *args: str, check: bool = True) -> tuple[int, str]:
        code, text = await run_git_async(self.cwd, "-c", "user.name=keel", "-c", "user.email=keel@localhost", *args)
        if check and code != 0:
            raise WorktreeError(f"git {' '.join(args)} failed: {text.splitlines()[-1] if text else code}")
        return -1 if code is None else code, text


async def repo_root(cwd: Path) -> Path:
    code, out = await Git(cwd).run("rev-parse", "--show-toplevel", check=False)
    if code != 0:
        raise WorktreeError(f"{cwd} is not in a git repository")
    return Path(out)


async def _exclude(root: Path) -> None:
    from agentkeel.config.localfiles import ignore_local_files

    ignore_local_files(root / WORKTREE_DIR)  # .keel/.gitignore, for the other local files keel writes there
    _, common = await Git(root).run("rev-parse", "--git-common-dir")
    exclude = (root / common / "info" / "exclude").resolve()
    try:
        text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        if f"/{WORKTREE_DIR}/" not in text.split("\n"):
            exclude.parent.mkdir(parents=True, exist_ok=True)
            exclude.write_text(text + ("" if text.endswith("\n") or not text else "\n") + f"/{WORKTREE_DIR}/\n")
    except OSError as e:
        raise WorktreeError(f"cannot update {exclude}: {e.strerror or e}") from None


@dataclass
class Worktree:
    root: Path
    path: Path
    branch: str
    base: str

    @classmethod
    async def create(cls, cwd: Path, agent_id: str) -> Worktree:
        root = await repo_root(cwd)
        async with _git_lock():
            await _exclude(root)
            _, base = await Git(root).run("rev-parse", "HEAD")
            path = root / WORKTREE_DIR / agent_id
            branch = f"keel/agent-{agent_id}"
            path.parent.mkdir(parents=True, exist_ok=True)
            await Git(root).run("worktree", "add", "-q", "-b", branch, str(path), base)
        return cls(root, path, branch, base)

    async def commit(self, message: str) -> bool:
        git = Git(self.path)
        await git.run("add", "-A")
        code, _ = await git.run("diff", "--cached", "--quiet", check=False)
        if code == 0:
            return False
        await git.run("commit", "-q", "--no-verify", "-m", message)
        return True

    async def diff(self) -> str:
        # no diff.external or textconv command of the repository's config runs for keel's own diff
        _, stat = await Git(self.path).run("diff", "--no-ext-diff", "--no-textconv", "--stat", f"{self.base}..HEAD")
        _, patch = await Git(self.path).run("diff", "--no-ext-diff", "--no-textconv", f"{self.base}..HEAD")
        if len(patch) > 20_000:
            patch = patch[:20_000] + "\n[diff truncated]"
        return f"{stat}\n\n{patch}".strip()

    async def main_tree_clean(self) -> bool:
        _, out = await Git(self.root).run("status", "--porcelain")
        return not out.strip()

    async def merge(self) -> tuple[bool, str]:
        async with _git_lock():
            if not await self.main_tree_clean():
                return False, "the main tree has uncommitted changes (keel never touches them)"
            code, out = await Git(self.root).run("merge", "--no-ff", "--no-edit", self.branch, check=False)
            if code != 0:
                await Git(self.root).run("merge", "--abort", check=False)
                return False, f"the merge conflicts ({out.splitlines()[-1] if out else 'git merge failed'})"
            return True, ""

    async def remove(self, *, keep_branch: bool) -> None:
        async with _git_lock():
            await Git(self.root).run("worktree", "remove", "--force", str(self.path), check=False)
            await Git(self.root).run("worktree", "prune", check=False)
            if not keep_branch:
                await Git(self.root).run("branch", "-D", self.branch, check=False)


async def _approved(spawner: SubagentSpawner, branch: str) -> tuple[bool, str]:
    from agentkeel.agents.gatecheck import check_call
    from agentkeel.tools.views import SHELL_TOOL

    why = await check_call(spawner.parent, SHELL_TOOL, {"command": f"git merge --no-ff {branch}"})
    return why is None, why or ""


async def run_in_worktree(
    spawner: SubagentSpawner,
    agent: AgentDef,
    prompt: str,
    *,
    description: str = "",
    tool_use_id: str = "",
    merge: bool | None = None,
) -> tuple[SubagentResult, str]:
    """Run ``agent`` in a new worktree; (its result with the diff and outcome, what was merged)."""
    import uuid

    agent_id = "a" + uuid.uuid4().hex[:16]
    tree = await Worktree.create(spawner.parent.context.cwd, agent_id)
    result: SubagentResult | None = None
    kept = True
    merged = ""
    try:
        result = await spawner.run(
            agent, prompt, description=description, tool_use_id=tool_use_id, cwd=tree.path, agent_id=agent_id
        )
        changed = await tree.commit(f"keel agent {agent_id} ({agent.name}): {description or 'work'}")
        if not changed:
            kept = False
            result.text += "\n\n(no file changes)"
            return result, ""
        diff = await tree.diff()
        if result.is_error:
            result.text += f"\n\nThe agent did not finish; its changes are kept on branch {tree.branch}:\n{diff}"
            return result, ""
        approved, why = (merge, "") if merge is not None else await _approved(spawner, tree.branch)
        if not approved:
            kept = False
            result.text += f"\n\nChanges rejected ({why or 'not approved'}); discarded:\n{diff}"
            return result, ""
        ok, problem = await tree.merge()
        if not ok:
            result.text += f"\n\nNot merged: {problem}. The changes are on branch {tree.branch}:\n{diff}"
            return result, ""
        kept = False
        merged = tree.branch
        result.text += f"\n\nMerged branch {tree.branch} into the main tree:\n{diff}"
        return result, merged
    finally:
        if result is None:  # interrupted: keep what the agent wrote, on its branch
            try:
                await asyncio.shield(tree.commit(f"keel agent {agent_id}: interrupted work"))
            except Exception:
                log.exception("cannot save the interrupted work of %s", agent_id)
        await asyncio.shield(tree.remove(keep_branch=kept))
