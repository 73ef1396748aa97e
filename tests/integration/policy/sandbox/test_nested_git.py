"""Nested git directories under the Bash sandbox (issue #30, item 9): a project with a submodule
(``git submodule add`` of a local repository) and a linked worktree. A sandboxed call cannot
change what git runs at the user's next command: the submodule's and the worktree's config,
hooks, commondir, their checkouts' ``.git`` files, nor plant a git directory for a submodule;
ordinary work (a build, ``git add`` + ``git commit`` in the main repository, the submodule and
the worktree) still passes."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_harness import SandboxedBash, bwrap_works

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")

DENIAL = "[Sandbox denial:"
IDENT = "GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com"


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    lib = tmp_path / "lib"
    lib.mkdir()
    _git("init", "-q", cwd=lib)
    (lib / "lib.txt").write_text("lib\n")
    _git("add", ".", cwd=lib)
    _git("commit", "-qm", "lib", cwd=lib)
    proj = tmp_path / "proj"
    proj.mkdir()
    _git("init", "-q", cwd=proj)
    (proj / "main.txt").write_text("main\n")
    _git("add", ".", cwd=proj)
    _git("commit", "-qm", "main", cwd=proj)
    _git("submodule", "add", "-q", str(lib), "vendor/lib", cwd=proj)
    _git("commit", "-qm", "submodule", cwd=proj)
    _git("worktree", "add", "-q", "wt", cwd=proj)
    return proj


@pytest.fixture
def bash(repo: Path) -> Iterator[SandboxedBash]:
    b = SandboxedBash(repo, Path(os.environ["HOME"]))
    yield b
    b.close()


def _state(repo: Path) -> dict[str, str]:
    """Every file of the git directories and the checkouts' .git files."""
    out: dict[str, str] = {}
    for base in (repo / ".git", repo / "vendor" / "lib" / ".git", repo / "wt" / ".git"):
        if base.is_file():
            out[str(base)] = base.read_text()
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            for name in filenames:
                p = Path(dirpath) / name
                if not {"objects", "logs", "refs"} & set(p.parts) and p.name != "index":  # ordinary writes
                    out[str(p)] = p.read_bytes().hex()
            for name in dirnames:
                out[str(Path(dirpath) / name)] = "dir"
    return out


ATTACKS = [
    "printf '[core]\\n\\tfsmonitor = touch {M}\\n' >> .git/modules/vendor/lib/config",
    "git -C vendor/lib config core.fsmonitor 'touch {M}'",
    "printf '#!/bin/sh\\ntouch {M}\\n' > .git/modules/vendor/lib/hooks/post-checkout",
    "rm -rf .git/modules/vendor/lib/hooks && mkdir .git/modules/vendor/lib/hooks",
    "printf '[core]\\n\\tfsmonitor = touch {M}\\n' > .git/worktrees/wt/config",
    "printf '[core]\\n\\tfsmonitor = touch {M}\\n' > .git/worktrees/wt/config.worktree",
    "mkdir -p evil && echo $PWD/evil > .git/worktrees/wt/commondir",
    "mkdir -p evil && echo $PWD/evil > .git/commondir",
    "echo 'gitdir: {T}/evil' > wt/.git",
    "echo 'gitdir: {T}/evil' > vendor/lib/.git",
    "rm -f vendor/lib/.git; git init -q vendor/lib",
    "mv vendor vendor2 && mkdir -p vendor/lib && git init -q vendor/lib",
    "mv vendor/lib vendor/lib2 && git init -q vendor/lib",
    "mv .git/modules .git/modules2",
    "mkdir -p .git/modules/other && printf '[core]\\n\\tfsmonitor = touch {M}\\n' > .git/modules/other/config",
    "git worktree add -q ../elsewhere",
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_nested_git_config_hooks_and_pointers_stay_as_they_were(
    bash: SandboxedBash, repo: Path, tmp_path: Path, attack: str
) -> None:
    marker = tmp_path / "fsmonitor-ran"
    before = _state(repo)
    out = bash(attack.replace("{M}", str(marker)).replace("{T}", str(tmp_path)))
    assert DENIAL in out.content, out.content
    assert _state(repo) == before
    # the user's next git commands, on the host: nothing planted runs
    for where in (repo, repo / "vendor" / "lib", repo / "wt"):
        _git("status", "--short", cwd=where)
    _git("submodule", "update", "--init", cwd=repo)
    assert not marker.exists()


def test_ordinary_work_in_the_repository_its_submodule_and_worktree_passes(bash: SandboxedBash, repo: Path) -> None:
    build = "mkdir -p build && echo artefact > build/out.txt && cat build/out.txt"
    out = bash(build)
    assert not out.is_error and out.content == "artefact", out.content
    steps = [
        (repo, "echo more >> main.txt && git add main.txt && git commit -qm work && git log --oneline -1"),
        (
            repo / "vendor" / "lib",
            "echo more >> lib.txt && git add lib.txt && git commit -qm sub && git log --oneline -1",
        ),
        (repo / "wt", "echo w > w.txt && git add w.txt && git commit -qm wt && git log --oneline -1"),
        (repo, "git add vendor/lib && git commit -qm bump && git status --short"),
    ]
    for where, command in steps:
        out = bash(f"cd {where} && {IDENT} bash -c '{command}'")
        assert not out.is_error and DENIAL not in out.content, (where, out.content)
    assert _git("log", "--format=%s", "-1", cwd=repo).strip() == "bump"
    assert _git("log", "--format=%s", "-1", cwd=repo / "vendor" / "lib").strip() == "sub"
    assert _git("log", "--format=%s", "-1", cwd=repo / "wt").strip() == "wt"
    assert "vendor/lib" not in _git("status", "--porcelain", cwd=repo)  # the bump was committed


def test_an_uninitialised_submodule_gets_no_planted_git_dir_and_no_leftovers(tmp_path: Path) -> None:
    """Where .gitmodules names a submodule that is not checked out yet, a git directory planted in
    ``.git/modules/<name>`` would be adopted by the user's ``git submodule update --init``: the
    missing ``.git/modules`` is covered by an empty directory bubblewrap makes on the host, which
    goes with the session. A repository without submodules gets no such directory at all."""
    lib = tmp_path / "lib"
    lib.mkdir()
    _git("init", "-q", cwd=lib)
    (lib / "f").write_text("f\n")
    _git("add", ".", cwd=lib)
    _git("commit", "-qm", "lib", cwd=lib)
    source = tmp_path / "source"
    source.mkdir()
    _git("init", "-q", cwd=source)
    _git("submodule", "add", "-q", str(lib), "lib", cwd=source)
    _git("commit", "-qm", "sub", cwd=source)
    proj = tmp_path / "clone"
    _git("clone", "-q", str(source), str(proj), cwd=tmp_path)  # the submodule is not initialised
    assert not (proj / ".git" / "modules").exists()
    marker = tmp_path / "fsmonitor-ran"
    bash = SandboxedBash(proj, Path(os.environ["HOME"]))
    try:
        out = bash(
            f"git clone -q --bare {lib} .git/modules/lib && git -C .git/modules/lib config core.bare false && "
            f"git -C .git/modules/lib config core.fsmonitor 'touch {marker}'"
        )
        assert DENIAL in out.content, out.content
    finally:
        bash.close()
    assert not (proj / ".git" / "modules").exists()
    _git("submodule", "update", "--init", cwd=proj)
    _git("status", cwd=proj / "lib")
    assert not marker.exists()
    plain = tmp_path / "plain"
    plain.mkdir()
    _git("init", "-q", cwd=plain)
    bash = SandboxedBash(plain, Path(os.environ["HOME"]))
    try:
        assert not bash("ls .git").is_error
        assert not (plain / ".git" / "modules").exists() and not (plain / ".git" / "worktrees").exists()
    finally:
        bash.close()
