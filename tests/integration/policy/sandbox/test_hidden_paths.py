"""Read deny rules written as globs hide every file and directory they match inside the sandbox
(and Edit deny globs make them read-only), run for real in bubblewrap under ``Bash(*)``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_harness import SandboxedBash, bwrap_works

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")

SECRET = "obviously-fake-secret"


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    for d in ("sub/deep", "secrets/inner", "config"):
        (p / d).mkdir(parents=True)
    for f in (".env", "sub/deep/.env", "secrets/token.txt", "secrets/inner/db.txt", "config/server.KEY"):
        (p / f).write_text(f"{SECRET} {f}\n")
    (p / "sub" / ".env.example").write_text("API_KEY=\n")
    (p / "config" / "server.pub").write_text("public\n")
    (p / "sub" / "pkg.lock").write_text("locked\n")
    return p


@pytest.fixture
def bash(proj: Path, tmp_path: Path) -> Iterator[SandboxedBash]:
    home = Path(os.environ["HOME"])
    b = SandboxedBash(
        proj,
        home,
        deny=("Read(./**/.env)", "Read(./secrets/**)", "Read(**/*.key)", "Edit(./**/*.lock)"),
    )
    yield b
    b.close()


@pytest.mark.parametrize(
    "path", [".env", "sub/deep/.env", "secrets/token.txt", "secrets/inner/db.txt", "config/server.KEY"]
)
def test_each_file_a_read_deny_glob_matches_is_hidden(bash: SandboxedBash, path: str) -> None:
    out = bash(f"cat {path}")
    assert SECRET not in out.content
    assert out.is_error and "[Sandbox denial:" in out.content, out.content


def test_a_directory_a_glob_matches_is_hidden_whole(bash: SandboxedBash) -> None:
    out = bash("ls secrets; cat secrets/*/* 2>&1; find secrets -type f")
    assert "token.txt" not in out.content and SECRET not in out.content


def test_look_alikes_the_globs_do_not_match_stay_readable(bash: SandboxedBash) -> None:
    out = bash("cat sub/.env.example config/server.pub")
    assert not out.is_error, out.content
    assert out.content == "API_KEY=\npublic"


def test_an_edit_deny_glob_makes_matching_files_read_only(bash: SandboxedBash, proj: Path) -> None:
    out = bash("echo changed >> sub/pkg.lock")
    assert "[Sandbox denial:" in out.content
    assert (proj / "sub" / "pkg.lock").read_text() == "locked\n"
    assert not bash("cat sub/pkg.lock").is_error


def test_a_bare_name_matches_at_any_depth(proj: Path) -> None:
    b = SandboxedBash(proj, Path(os.environ["HOME"]), deny=("Read(.env)",))
    try:
        for path in (".env", "sub/deep/.env"):
            out = b(f"cat {path}")
            assert SECRET not in out.content and "[Sandbox denial:" in out.content
        assert b("cat sub/.env.example").content == "API_KEY="
    finally:
        b.close()
