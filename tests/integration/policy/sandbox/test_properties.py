"""Property: whatever an allowed command does in the sandbox, no file outside the writable set
changes. Random sequences of file operations aimed at the project, its protected entries, the
home directory, a directory outside, and the same places through symlinks and /proc, run for
real in bubblewrap; the whole scratch tree is hashed before and after."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandbox_harness import SandboxedBash, bwrap_works

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")

# relative to the scratch root: P is the project, H the home directory, O a directory outside
TARGETS = [
    "P/a.txt",
    "P/sub/b.txt",
    "P/.git/hooks/pre-commit",
    "P/.git/config",
    "P/.claude/settings.json",
    "P/.keel/settings.json",
    "P/.bashrc",
    "H/.bashrc",
    "H/notes.txt",
    "H/.ssh/id_rsa",
    "O/file.txt",
    "O/new.txt",
    "P/homelink/.bashrc",
    "P/outlink/file.txt",
    "P/outlink/new.txt",
    "P/.git",
    "P/.claude",
    "O",
    "P/.git/modules/vendor/lib/config",
    "P/.git/modules/vendor/lib/hooks/post-checkout",
    "P/.git/modules/new/config",
    "P/.git/worktrees/wt/commondir",
    "P/.git/commondir",
    "P/vendor/lib/.git",
    "P/vendor",
    "P/wt/.git",
]
OPS = [
    "echo data > {t}",
    "echo data >> {t}",
    "touch {t}",
    "mkdir -p {t}",
    "rm -rf {t}",
    "cp /etc/hostname {t}",
    "mv {t} {u}",
    "ln -sfn {u} {t}",
    "chmod 777 {t}",
    "truncate -s 0 {t}",
    "echo data | tee {t}",
    'python3 -c \'import sys; open(sys.argv[1], "w").write("x")\' {t}',
]


# in a git directory: what names programs git runs, or another git directory whose config does
_GIT_PROTECTED = ("hooks", "config", "config.worktree", "commondir", "gitdir")
# the git directories inside .git/modules and .git/worktrees (written by commits; bound writable)
_INNER_GITDIRS = (("modules", "vendor", "lib"), ("worktrees", "wt"))


def _writable(rel: str) -> bool:
    """Inside the project and not in a protected entry: the git directories' config, hooks and
    pointers (the submodule's and the worktree's too), the containers of git directories, the
    checkouts' .git files."""
    if not rel.startswith("P/") and rel != "P":
        return False
    parts = rel.split("/")
    protected = {".claude", ".keel", ".bashrc"}
    if len(parts) > 1 and parts[1] in protected:
        return False
    if rel in ("P/vendor/lib/.git", "P/wt/.git"):
        return False
    return parts[1:2] != [".git"] or _git_writable(parts[2:])


def _git_writable(rest: list[str]) -> bool:
    if not rest:
        return True
    if rest[0] in _GIT_PROTECTED:
        return False
    if rest[0] in ("modules", "worktrees"):
        inner = next((g for g in _INNER_GITDIRS if tuple(rest[: len(g)]) == g), None)
        return inner is not None and _git_writable(rest[len(inner) :])
    return True


def _snapshot(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            st_ = p.lstat()
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = f"dir:{st_.st_mode:o}"
            elif stat.S_ISSOCK(st_.st_mode):
                out[rel] = f"sock:{st_.st_mode:o}:{st_.st_ino}"
            else:
                out[rel] = f"file:{st_.st_mode:o}:" + hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _scratch(root: Path) -> tuple[Path, Path]:
    if root.exists():
        shutil.rmtree(root)
    project, home, outside = root / "P", root / "H", root / "O"
    for d in (project / "sub", home / ".ssh", outside):
        d.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text("{}")
    (project / "a.txt").write_text("a\n")
    (home / ".bashrc").write_text("# rc\n")
    (home / ".ssh" / "id_rsa").write_text("obviously-fake-key\n")
    (outside / "file.txt").write_text("outside\n")
    (project / "homelink").symlink_to(home)
    (project / "outlink").symlink_to(outside)
    for rel in CREDENTIALS:  # credential stores the sandbox hides
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text("token=obviously-fake-credential\n")
    _nested_git(project, root.parent / "lib-src")
    return project, home


CREDENTIALS = (
    ".npmrc",
    ".pypirc",
    ".config/gh/hosts.yml",
    ".claude/.credentials.json",
    ".config/gcloud/credentials.db",
    ".azure/msal_token_cache.json",
    ".keel/settings.json",
)


def _nested_git(project: Path, lib: Path) -> None:
    """A submodule at vendor/lib (``git submodule add`` of a local repository), a linked worktree at wt."""
    git = ["git", "-c", "protocol.file.allow=always", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    if lib.exists():
        shutil.rmtree(lib)
    lib.mkdir()
    subprocess.run([*git, "init", "-q"], cwd=lib, check=True)
    (lib / "lib.txt").write_text("lib\n")
    subprocess.run([*git, "add", "."], cwd=lib, check=True)
    subprocess.run([*git, "commit", "-qm", "lib"], cwd=lib, check=True)
    subprocess.run([*git, "add", "a.txt"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-qm", "a"], cwd=project, check=True)
    subprocess.run([*git, "submodule", "add", "-q", str(lib), "vendor/lib"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-qm", "submodule"], cwd=project, check=True)
    subprocess.run([*git, "worktree", "add", "-q", "wt"], cwd=project, check=True, capture_output=True)


def _path(root: Path, rel: str, via_proc: bool) -> str:
    full = str(root / rel)
    return shlex.quote(f"/proc/self/root{full}" if via_proc else full)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(OPS), st.sampled_from(TARGETS), st.sampled_from(TARGETS), st.booleans(), st.booleans()
        ),
        min_size=1,
        max_size=6,
    )
)
def test_no_file_outside_the_writable_set_changes(
    tmp_path: Path, steps: list[tuple[str, str, str, bool, bool]]
) -> None:
    root = tmp_path / "scratch"
    project, home = _scratch(root)
    parts = []
    for op, t, u, relative, via_proc in steps:
        target = shlex.quote(os.path.relpath(root / t, project)) if relative else _path(root, t, via_proc)
        parts.append(op.format(t=target, u=_path(root, u, False)))
    command = "; ".join(parts)
    before = _snapshot(root)
    bash = SandboxedBash(project, home, allow=("Bash(*)",))
    try:
        bash(command)
    finally:
        bash.close()
    after = _snapshot(root)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    escaped = sorted(k for k in changed if not _writable(k))
    assert not escaped, f"{command!r} changed {escaped}"
