"""The shell's working directory: where a command's relative paths land. Within one command
line keel follows ``cd``, ``pushd`` and ``popd`` as bash does, and asks where it cannot tell
(issue #11 item 6, issue #12 item 1); across calls the engine is told the shell's live cwd."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkeel.policy.permissions import PermissionEngine
from agentkeel.policy.permissions.bash import analyse
from agentkeel.tools import builtin_tools
from permission_corpus import make_project

TOOLS = {t.name: t for t in builtin_tools()}


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    root, home = make_project(tmp_path)
    (root / "a" / "secrets").mkdir(parents=True)
    (root / "a" / "secrets" / "key.txt").write_text("not a real key\n")
    return root, home


def engine(project: tuple[Path, Path], mode: str = "default", **rules: list[str]) -> PermissionEngine:
    root, home = project
    e = PermissionEngine(cwd=str(root), mode=mode, home=str(home), keel_home=str(home / ".keel"))  # type: ignore[arg-type]
    for kind, texts in rules.items():
        e.add(texts, kind, "test")  # type: ignore[arg-type]
    return e


def decide(e: PermissionEngine, command: str, **kw: str) -> str:
    return e.decide("Bash", {"command": command}, TOOLS["Bash"], **kw).decision


def where(project: tuple[Path, Path], command: str) -> tuple[list[tuple[str, str]], str, list[str]]:
    root, home = project
    a = analyse(command, str(root), str(home))
    rel = [(c.argv[0], Path(c.cwd).relative_to(root).as_posix()) for c in a.commands if c.argv[0] == "cat"]
    return rel, Path(a.cwd).relative_to(root).as_posix(), a.problems


# --- within one command line -------------------------------------------------------------------


def test_pushd_and_popd_are_followed_like_cd(project: tuple[Path, Path]) -> None:
    cats, final, problems = where(project, "pushd a; pushd secrets; cat x; popd; cat y; popd; cat z")
    assert cats == [("cat", "a/secrets"), ("cat", "a"), ("cat", ".")] and final == "." and not problems
    e = engine(project, "acceptEdits", allow=["Bash(pushd *)", "Bash(popd)", "Bash(echo *)"])
    assert decide(e, "pushd .git/hooks && echo x > pre-commit") == "ask"
    assert decide(e, "pushd .git/hooks; popd; echo x > notes.txt") == "allow"


@pytest.mark.parametrize(
    ("command", "final"),
    [
        ("cd a & cat x", "."),  # in the background: a subshell
        ("(cd a); cat x", "."),
        ("echo $(cd a); cat x", "."),
        ("bash -c 'cd a'; cat x", "."),
        ("eval 'cd a'; cat x", "a"),  # eval runs in this shell
        ("builtin cd a; cat x", "a"),
        ("{ cd a; }; cat x", "a"),
        ("mkdir -p build/out && cd build/out && cat x", "build/out"),  # made earlier in the line
    ],
)
def test_directory_changes_follow_bash(project: tuple[Path, Path], command: str, final: str) -> None:
    cats, got, problems = where(project, command)
    assert cats[-1] == ("cat", final) and got == final and not problems, problems


@pytest.mark.parametrize(
    "command",
    [
        "cd nowhere; cat .env",  # cd fails in bash and cat reads ./.env
        "cd a b; cat .env",  # too many arguments: bash stays where it is
        "cd -; cat .env",
        "env cd secrets; cat key.pem",  # env runs a program named cd: this shell does not move
        "cd secrets | true; cat key.pem",  # a pipeline part is a subshell (unless lastpipe)
        "if true; then cd secrets; fi; cat key.pem",
        "for d in secrets; do cd $d; done; cat key.pem",
        "pushd +1; cat key.pem",
        "popd -n; cat key.pem",
    ],
)
def test_directory_changes_keel_cannot_follow_are_not_trusted(project: tuple[Path, Path], command: str) -> None:
    e = engine(project, allow=["Bash(cd *)", "Bash(env *)", "Bash(cat *)", "Bash(true)", "Bash(pushd *)"])
    e.add(["Bash(popd *)"], "allow", "test")
    e.add(["Read(./.env)", "Read(./secrets/**)"], "deny", "test")
    assert not analyse(command, e.cwd, e.home).confident
    assert decide(e, command) != "allow"


# --- across calls: the shell's live working directory (issue #12 item 1) ------------------------


def test_relative_paths_resolve_in_the_shells_directory(project: tuple[Path, Path]) -> None:
    root = project[0]
    e = engine(project, deny=["Read(./a/secrets/**)"], allow=["Bash(cd *)"])
    assert decide(e, "cd a") == "allow"
    # the next call runs in a/: without being told, the engine read secrets/key.txt as ./secrets/key.txt
    assert decide(e, "cat secrets/key.txt") == "allow"
    assert decide(e, "cat secrets/key.txt", shell_cwd=str(root / "a")) == "deny"
    assert decide(e, "cat secrets/key.txt", shell_cwd="a") == "deny"  # relative to the project root
    assert decide(e, "cd secrets && cat key.txt", shell_cwd="a") == "deny"


def test_a_shell_outside_the_project_reads_outside(project: tuple[Path, Path]) -> None:
    e = engine(project)
    assert decide(e, "cat etc/passwd") == "allow"  # ./etc/passwd, inside (and absent)
    assert decide(e, "cat etc/passwd", shell_cwd="/") == "ask"
    assert decide(e, "ls", shell_cwd="/") == "ask"  # no operand: the directory the shell is in
    assert decide(e, "git log", shell_cwd="/tmp") == "ask"
    assert decide(e, "ls", shell_cwd="src") == "allow"
    assert decide(e, "cat ../README.md", shell_cwd="src") == "allow"  # still inside the working directories


def test_writes_from_the_shells_directory(project: tuple[Path, Path]) -> None:
    root = project[0]
    e = engine(project, "acceptEdits", allow=["Bash(echo *)"])
    assert decide(e, "echo x > pre-commit") == "allow"
    assert decide(e, "echo x > pre-commit", shell_cwd=str(root / ".git" / "hooks")) == "ask"
    bypass = engine(project, "bypassPermissions")
    assert decide(bypass, "cp /tmp/x pre-commit", shell_cwd=str(root / ".git" / "hooks")) == "ask"


def test_rule_anchors_and_working_dirs_stay_at_the_project_root_while_paths_follow_the_shell(
    project: tuple[Path, Path],
) -> None:
    root = project[0]
    e = engine(project, deny=["Read(./secrets/**)", "Read(.env)"], allow=["Edit(./docs/**)"])
    a = str(root / "a")
    # ./secrets/** is the project's secrets/, not a/secrets/ (the shell's directory moves, rules do not)
    assert decide(e, "cat secrets/key.txt", shell_cwd=a) == "allow"
    assert decide(e, "cat ../secrets/key.pem", shell_cwd=a) == "deny"
    assert decide(e, "cat ../.env", shell_cwd=a) == "deny"
    # file tools resolve relative paths where the shell is, as the tools do (ToolContext.workdir)
    read = e.decide("Read", {"file_path": "../secrets/key.pem"}, TOOLS["Read"], shell_cwd=a)
    assert read.decision == "deny"
    assert e.decide("Read", {"file_path": "secrets/key.pem"}, TOOLS["Read"], shell_cwd=a).decision == "allow"
    write = e.decide("Write", {"file_path": "../docs/x.md", "content": "x"}, TOOLS["Write"], shell_cwd=a)
    assert write.decision == "allow"
    elsewhere = e.decide("Write", {"file_path": "docs/x.md", "content": "x"}, TOOLS["Write"], shell_cwd=a)
    assert elsewhere.decision == "ask"  # a/docs/x.md: no rule allows it
