"""Property: whatever an allowed command does in the sandbox, no file outside the writable set
changes. Random sequences of file operations aimed at the project, its protected entries, the
home directory, a directory outside, and the same places through symlinks and /proc, run for
real in bubblewrap; the whole scratch tree is hashed before and after."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
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


def _writable(rel: str) -> bool:
    """Inside the project and not in a protected entry."""
    if not rel.startswith("P/") and rel != "P":
        return False
    parts = rel.split("/")
    protected = {".claude", ".keel", ".bashrc"}
    if len(parts) > 1 and parts[1] in protected:
        return False
    return not (len(parts) > 2 and parts[1] == ".git" and parts[2] in ("hooks", "config"))


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
    return project, home


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
