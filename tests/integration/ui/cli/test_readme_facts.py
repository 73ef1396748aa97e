"""What the README states as fact about the CLI and the setup holds (README drift is a defect)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from agentkeel.ui.cli.main import UNSUPPORTED
from kit import KeelRun

ROOT = Path(__file__).resolve().parents[4]
README = (ROOT / "README.md").read_text()


def _refused_list() -> list[str]:
    block = README.split("Those keel cannot honour yet", 1)[1].split("any other unknown flag", 1)[0]
    return re.findall(r"`(--[a-z-]+)`", block)


def test_the_flags_the_readme_says_are_refused_are_the_ones_keel_refuses() -> None:
    assert sorted(_refused_list()) == sorted(UNSUPPORTED)


def test_each_refused_flag_is_one_line_and_an_accepted_one_is_not_refused(keel: Callable[..., KeelRun]) -> None:
    for flag in _refused_list():
        run = keel("-p", "hi", flag, "x")
        assert run.code == 2 and f"{flag} is not supported by keel yet" in run.stderr, flag
        assert "Traceback" not in run.stderr
    accepted = keel("-p", "hi", "--fallback-model", "claude-haiku-4-5", "--model", "nonexistent:model")
    assert "is not supported by keel yet" not in accepted.stderr


def test_every_package_setup_installs_through_apt_is_named_in_the_readme() -> None:
    setup = (ROOT / "scripts" / "setup").read_text()
    installed = set()
    for line in setup.splitlines():
        for group in re.findall(r"apt-get install -y -qq ([a-z0-9 .+-]+?)(?: >| \|\||$)", line):
            installed.update(group.split())
    assert installed >= {"ripgrep", "tmux", "bubblewrap", "socat", "chromium", "chromium-driver"}
    setup_section = README.split("## Setup, run, test", 1)[1].split("\n## ", 1)[0]
    missing = sorted(p for p in installed if f"`{p}`" not in setup_section)
    assert not missing, f"scripts/setup installs {missing}, which the README's setup section does not name"


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    setup_section = README.split("## Setup, run, test", 1)[1].split("\n## ", 1)[0]
    assert "bash scripts/test" in setup_section and "bash scripts/test" in ci
