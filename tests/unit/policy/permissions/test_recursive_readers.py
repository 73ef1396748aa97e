"""Recursive readers (issue #11 items 3, 4): a command that reads a whole tree reads every
Read-denied file in it, and through the symlinks it follows, what they point to."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentkeel.policy.permissions import PermissionEngine, trees
from agentkeel.policy.permissions.paths import compile_path_pattern
from agentkeel.tools import builtin_tools
from permission_corpus import make_project

TOOLS = {t.name: t for t in builtin_tools()}
DENY = ["Read(./.env)", "Read(./secrets/**)"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root, home = make_project(tmp_path_factory.mktemp("trees"))
    (root / "other").mkdir()
    (root / "list").write_bytes(b".env\0")
    (root / "docs" / "keys").symlink_to(root / "secrets")  # inside the project, onto a denied directory
    return root, home


def engine(project: tuple[Path, Path], mode: str = "default", **rules: list[str]) -> PermissionEngine:
    root, home = project
    e = PermissionEngine(cwd=str(root), mode=mode, home=str(home), keel_home=str(home / ".keel"))  # type: ignore[arg-type]
    for kind, texts in rules.items():
        e.add(texts, kind, "test")  # type: ignore[arg-type]
    return e


def decide(e: PermissionEngine, command: str) -> str:
    return e.decide("Bash", {"command": command}, TOOLS["Bash"]).decision


READERS = [
    "grep -r SECRET .",
    "grep -R SECRET .",
    "grep -rn API_KEY",  # no operand: grep -r searches the working directory
    "grep --recursive API_KEY .",
    "grep -d recurse API_KEY .",
    "egrep -r API_KEY .",
    "rg API_KEY",
    "rg --hidden API_KEY",
    "rg -uu API_KEY",
    "rg API_KEY secrets/..",
    "diff -rN . other",
    "cp -r . /tmp/keel-copy",
    "tar czf /tmp/keel.tgz .",
    "find . -type f -exec cat {} +",
    "git show HEAD:.env",
    "git log -p",
    "git log --patch --all",
    "git show HEAD",
    "git diff",
    "git diff HEAD~3",
    "git grep API_KEY",
    "git stash show -p",
    "git -C src log -p",
    "sort --files0-from=list",
    "wc --files0-from=list",
    "grep -R SECRET docs",  # docs/keys -> ../secrets
]


@pytest.mark.parametrize("command", READERS)
def test_recursive_readers_of_a_tree_with_a_denied_file_do_not_run_unasked(
    project: tuple[Path, Path], command: str
) -> None:
    for rules in ({"deny": DENY}, {"deny": DENY, "allow": ["Bash(grep *)", "Bash(rg *)", "Bash(git *)"]}):
        assert decide(engine(project, **rules), command) != "allow", (command, rules)
    rules = {"deny": DENY, "allow": ["Bash(diff *)", "Bash(sort *)", "Bash(wc *)", "Bash(cp *)", "Bash(tar *)"]}
    assert decide(engine(project, **rules), command) != "allow"


@pytest.mark.parametrize(
    "command",
    ["grep -r SECRET .", "grep -R SECRET .", "rg API_KEY", "diff -rN . other", "tar czf x.tgz .", "grep -R x docs"],
)
def test_a_found_denied_file_asks_in_bypass_mode_too(project: tuple[Path, Path], command: str) -> None:
    d = engine(project, "bypassPermissions", deny=DENY).decide("Bash", {"command": command}, TOOLS["Bash"])
    assert d.decision == "ask" and "denies" in d.reason, d.reason


@pytest.mark.parametrize(
    "command",
    [
        "grep -r foo src",
        "grep -rn TODO src docs",
        "rg -n 'def ' src",
        "grep -r --exclude=.env --exclude-dir=secrets --exclude-dir=docs --exclude=list API_KEY .",
        "grep -r --include='*.py' foo .",
        "grep -r x docs",  # -r does not follow docs/keys (grep follows links given on the command line only)
        "git log --oneline",
        "git log -p -- src/app.py",
        "git diff --stat",
        "git show --name-only HEAD",
        "git status",
        "find . -name '*.py'",  # names only
        "ls -R src",
        "sort README.md",
    ],
)
def test_look_alikes_stay_allowed(project: tuple[Path, Path], command: str) -> None:
    d = engine(project, deny=DENY).decide("Bash", {"command": command}, TOOLS["Bash"])
    assert d.decision == "allow", d.reason


def test_without_deny_rules_recursive_reads_inside_run(project: tuple[Path, Path]) -> None:
    e = engine(project)
    for command in ("grep -r foo .", "rg foo", "git log -p", "git diff", "grep -r root:x ."):
        assert decide(e, command) == "allow", command


# --- symlinks out of the project (item 4) -------------------------------------------------------


@pytest.mark.parametrize(
    "command", ["grep -R root:x .", "grep --dereference-recursive root:x .", "rg -L root:x", "diff -r src etclink"]
)
def test_recursive_readers_that_follow_a_link_out_read_outside(project: tuple[Path, Path], command: str) -> None:
    d = engine(project).decide("Bash", {"command": command}, TOOLS["Bash"])
    assert d.decision == "ask", d.reason
    assert decide(engine(project), "cat etclink/passwd") == "ask"  # the same read, named


def test_keel_follows_the_links_grep_follows(project: tuple[Path, Path]) -> None:
    """The premise, checked against the real grep: -R reads /etc/passwd through etclink, -r does not."""
    root = project[0]
    run = {"cwd": root, "capture_output": True, "text": True, "timeout": 60}
    assert "etclink/passwd" in subprocess.run(["grep", "-Rl", "root:x", "."], **run).stdout  # type: ignore[call-overload]
    assert "etclink" not in subprocess.run(["grep", "-rl", "root:x", "."], **run).stdout  # type: ignore[call-overload]
    assert decide(engine(project), "grep -r root:x .") == "allow"
    assert decide(engine(project), "grep -R root:x .") == "ask"


def test_a_tree_too_large_to_check_asks(tmp_path: Path) -> None:
    for i in range(60):
        (tmp_path / f"f{i}").write_text("x")
    pattern = compile_path_pattern(".env", cwd=str(tmp_path), home=str(tmp_path), root=str(tmp_path))
    result = trees.walk(str(tmp_path), str(tmp_path), trees.TreeRead(".", follow=False), [pattern], (), limit=50)
    assert result.too_large and result.denied is None
    (tmp_path / ".env").write_text("x")
    result = trees.walk(str(tmp_path), str(tmp_path), trees.TreeRead(".", follow=False), [pattern], (), limit=100)
    assert result.denied == f"{tmp_path}/.env"


def test_tar_reads_its_operands_from_the_directory_given_by_c(project: tuple[Path, Path]) -> None:
    e = engine(project, deny=DENY, allow=["Bash(tar *)", "Bash(cd *)"])
    assert decide(e, "cd src && tar -czf ../out.tgz .") == "allow"  # src holds nothing denied
    assert decide(e, "cd src && tar -C .. -czf ../out.tgz .") == "ask"  # the whole project, with .env


def test_find_exec_reads_what_its_name_tests_let_through(project: tuple[Path, Path]) -> None:
    e = engine(project, "bypassPermissions", deny=DENY)
    assert decide(e, "find . -name '*.pem' -exec cat {} \\;") == "ask"  # secrets/key.pem reaches cat
    assert decide(e, "find . -type f -exec wc -l {} +") == "ask"
    assert decide(e, "find . -exec cat {} \\; -name '*.py'") == "ask"  # a test after the action filters nothing
    assert decide(e, "find . -name '*.py' -exec cat {} +") == "allow"
    assert decide(e, "find src -exec cat {} +") == "allow"
    # filters keel does not evaluate: it cannot tell, so bypass mode decides (outside it, this asks)
    ruled = engine(project, deny=DENY, allow=["Bash(find *)", "Bash(cat *)"])
    assert decide(ruled, "find . -size -1k -exec cat {} +") == "ask"
