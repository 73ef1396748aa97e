"""Agents' worktrees live in ``.keel/worktrees/<name>/``: ``.keel/`` stays protected, the worktree
inside it is another working tree (its own .git, .keel/, .claude/ protected), both in the permission
engine and in the sandbox's read-only binds."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkeel.policy.permissions import PermissionEngine
from agentkeel.tools import builtin_tools
from sandbox_harness import SandboxedBash, bwrap_works

TOOLS = {t.name: t for t in builtin_tools()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    subprocess.run(["git", "init", "-q", str(p)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(p),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
        check=True,
    )
    (p / ".keel").mkdir()
    (p / ".keel" / "settings.json").write_text("{}\n")
    subprocess.run(
        ["git", "-C", str(p), "worktree", "add", "-q", str(p / ".keel" / "worktrees" / "a1"), "-b", "wt"], check=True
    )
    tree = p / ".keel" / "worktrees" / "a1"
    (tree / "src").mkdir()
    (tree / "src" / "app.py").write_text("x = 1\n")
    (tree / ".claude").mkdir()
    (tree / ".claude" / "settings.json").write_text("{}\n")
    return p


def _decide(e: PermissionEngine, tool: str, **tool_input: Any) -> str:
    return e.decide(tool, tool_input, TOOLS.get(tool)).decision


WT = ".keel/worktrees/a1"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (f"{WT}/src/app.py", "allow"),
        (f"{WT}/new.txt", "allow"),
        (".keel/settings.json", "ask"),
        (".keel/worktrees/other.txt", "ask"),
        (f"{WT}/.claude/settings.json", "ask"),
        (f"{WT}/.keel/settings.json", "ask"),
        (f"{WT}/.git", "ask"),
        (f"{WT}/.bashrc", "ask"),
        (f"{WT}/.mcp.json", "ask"),
    ],
)
def test_the_engine_protects_keel_but_not_a_worktree_inside_it(project: Path, path: str, expected: str) -> None:
    e = PermissionEngine(cwd=str(project), mode="acceptEdits", home=str(project.parent / "home"))
    assert _decide(e, "Write", file_path=str(project / path), content="y\n") == expected
    bash = f"echo y > {path}"
    assert _decide(e, "Bash", command=bash) == (
        "ask" if expected == "ask" else _decide(e, "Bash", command="echo y > x")
    )


@pytest.fixture
def bash(project: Path) -> Iterator[SandboxedBash]:
    if not bwrap_works():
        pytest.skip("bubblewrap cannot create namespaces here")
    b = SandboxedBash(project, Path(os.environ["HOME"]))
    yield b
    b.close()


def test_a_sandboxed_command_writes_inside_a_worktree(bash: SandboxedBash, project: Path) -> None:
    tree = project / WT
    out = bash(
        f"cd {WT} && echo 2 > src/app.py && mkdir -p pkg && echo n > pkg/new.py && git add -A && git status --short"
    )
    assert not out.is_error, out.content
    assert (tree / "src" / "app.py").read_text() == "2\n" and (tree / "pkg" / "new.py").read_text() == "n\n"
    assert "pkg/new.py" in out.content


@pytest.mark.parametrize(
    "command",
    [
        "echo x > .keel/settings.json",
        "echo x > .keel/worktrees/new-file",
        "rm -rf .keel/worktrees/a1",
        f"echo x > {WT}/.claude/settings.json",
        f"mkdir -p {WT}/.keel && echo x > {WT}/.keel/settings.json",
        f"echo gitdir: /elsewhere > {WT}/.git",
        f"echo x > {WT}/.bashrc",
    ],
)
def test_protected_entries_stay_read_only_around_and_inside_a_worktree(
    bash: SandboxedBash, project: Path, command: str
) -> None:
    tree = project / WT
    gitfile = (tree / ".git").read_text()
    out = bash(command)
    assert "[Sandbox denial:" in out.content, out.content
    assert (project / ".keel" / "settings.json").read_text() == "{}\n"
    assert not (project / ".keel" / "worktrees" / "new-file").exists()
    assert (tree / ".claude" / "settings.json").read_text() == "{}\n"
    assert not (tree / ".keel" / "settings.json").exists()
    assert (tree / ".git").read_text() == gitfile  # the rest of the worktree is the command's to change
    assert not (tree / ".bashrc").exists()


@pytest.mark.parametrize(
    ("rule", "path"),
    [
        ("Edit(/secrets/**)", f"{WT}/secrets/key.txt"),
        ("Edit(./config/prod.yaml)", f"{WT}/config/prod.yaml"),
        ("Read(./.env)", f"{WT}/.env"),
        ("Edit(**/*.pem)", f"{WT}/certs/a.pem"),
    ],
)
def test_deny_rules_hold_inside_a_worktree_for_what_its_merge_would_write(project: Path, rule: str, path: str) -> None:
    """A worktree is merged back into the project: a deny rule anchored at the project must deny
    the same file written (or read) inside the worktree; the look-alike elsewhere stays allowed."""
    tool = "Read" if rule.startswith("Read") else "Write"
    e = PermissionEngine(cwd=str(project), mode="acceptEdits", home=str(project.parent / "home"))
    e.add([rule], "deny", "settings", "project")
    args: dict[str, Any] = {"file_path": str(project / path)}
    if tool == "Write":
        args["content"] = "y\n"
    assert _decide(e, tool, **args) == "deny"
    other = str(project / WT / "elsewhere" / "ok.txt")
    assert _decide(e, "Write", file_path=other, content="y\n") == "allow"
