"""Safety III review (issue #30): further members of the landed families, found by attacking
the fixes the way the held-out checks do. This file holds the Bash commands an allow rule for
the program must not cover. Family 5: escalating options under an allow rule for the program
(attached values, clusters, options after ssh's host, programs reached through a runner) and
test paths outside the repository under a rule for the test runner. Family 13: suggestions that
ended at a launcher. Also git writing where an option or operand names, judged like a redirect
target. The reads are in test_attack_families_reads.py, the guards beyond the Bash decision in
test_attack_families_other_guards.py. Where the program is installed, a real run shows what the
decision guards."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agentkeel.policy.permissions import PermissionEngine
from permission_corpus import make_project

from .bash_decision import TOOLS, decide


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    return make_project(tmp_path)


# --- family 5: escalating options an allow rule for the program does not name -----------------


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("git clone -ush /tmp/r dst", "Bash(git clone *)"),  # -u is --upload-pack, value attached
        ("git ls-remote -ush /tmp/r", "Bash(git ls-remote *)"),
        ("git rebase -x'sh -c id' main", "Bash(git rebase *)"),  # -x is --exec
        ("git rebase -ix id main", "Bash(git rebase *)"),
        ("git send-email --smtp-server=./x a.patch", "Bash(git send-email *)"),
        ("git send-email --to-c=./x a.patch", "Bash(git send-email *)"),
        ("ssh -vo ProxyCommand=sh host", "Bash(ssh *)"),  # -o at the end of a cluster
        ("ssh -4oProxyCommand=sh host", "Bash(ssh *)"),
        ("ssh host -Fcfg", "Bash(ssh *)"),  # ssh reads options after the host
        ("ssh -F cfg host", "Bash(ssh *)"),  # a config file may say ProxyCommand
        ("ssh -Fcfg host", "Bash(ssh *)"),
        ("ssh -I ./x.so host", "Bash(ssh *)"),  # a PKCS#11 library loaded
        ("ssh -o PKCS11Provider=./x.so host", "Bash(ssh *)"),
        ("ssh -oKnownHostsCommand=sh host", "Bash(ssh *)"),
        ("scp -S ./evil a host:b", "Bash(scp *)"),
        ("scp -o ProxyCommand=sh a host:b", "Bash(scp *)"),
        ("sftp -D ./evil host", "Bash(sftp *)"),
        ("wget --use-askpass=./x https://example.com/", "Bash(wget *)"),
        ("wget --use-ask=./x https://example.com/", "Bash(wget *)"),
        ("wget --config=x https://example.com/", "Bash(wget *)"),
        ("rg --hostname-bin=./x foo", "Bash(rg *)"),
        ("less '+!id' README.md", "Bash(less *)"),
        ("less --log-f=x README.md", "Bash(less *)"),
        ("man -P sh ls", "Bash(man *)"),
        ("man --pa=sh ls", "Bash(man *)"),
        ("man -Hsh ls", "Bash(man *)"),
        ("zip -TTsh a.zip README.md", "Bash(zip *)"),  # -TT with its value attached
        ("uv run pytest -p evil", "Bash(uv run pytest *)"),  # pytest's options through the runner
        ("poetry run pytest -c /tmp/x.ini", "Bash(poetry run pytest *)"),
        ("uvx pytest -p evil", "Bash(uvx pytest *)"),
        ("mvn test exec:exec -Dexec.executable=sh", "Bash(mvn test *)"),  # a plugin goal named
        ("mvn test -DargLine=-javaagent:x.jar", "Bash(mvn test *)"),
        ("mvn test -f /tmp/pom.xml", "Bash(mvn test *)"),
        ("gradle test -I x.gradle", "Bash(gradle test *)"),  # an init script runs code
        ("./gradlew test --init-script=x.gradle", "Bash(./gradlew test *)"),
    ],
)
def test_an_allow_rule_does_not_cover_an_escalation(project: tuple[Path, Path], command: str, rule: str) -> None:
    assert decide(*project, command, allow=(rule,)) != "allow"


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("git rebase -i main", "Bash(git rebase *)"),
        ("git send-email --to=a@example.com a.patch", "Bash(git send-email *)"),
        ("ssh -p 2222 host ls", "Bash(ssh *)"),
        ("ssh -o StrictHostKeyChecking=no host", "Bash(ssh *)"),
        ("ssh host ls -F x", "Bash(ssh *)"),  # after the host and the command: the command's
        ("scp -P 22 a host:b", "Bash(scp *)"),
        ("wget -q https://example.com/x", "Bash(wget *)"),
        ("rg -n foo", "Bash(rg *)"),
        ("less -N README.md", "Bash(less *)"),
        ("man 3 printf", "Bash(man *)"),
        ("zip -r a.zip src", "Bash(zip *)"),
        ("uv run pytest -q -x", "Bash(uv run pytest *)"),
        ("uv run pytest -p no:cacheprovider", "Bash(uv run pytest *)"),
        ("mvn test -fae -q -Dtest=FooTest", "Bash(mvn test *)"),
        ("gradle test --info", "Bash(gradle test *)"),
    ],
)
def test_ordinary_use_under_the_rule_stays_allowed(project: tuple[Path, Path], command: str, rule: str) -> None:
    assert decide(*project, command, allow=(rule,)) == "allow"


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs ssh")
def test_ssh_runs_the_proxy_command_of_a_config_file_named_after_the_host(project: tuple[Path, Path]) -> None:
    """What the decision guards: ssh reads -F after the host name, and runs the file's
    ProxyCommand."""
    root, home = project
    marker = root / "ran"
    (root / "cfg").write_text(f"Host *\n  ProxyCommand touch {marker}\n")
    command = "ssh nohost.invalid -F cfg true"
    subprocess.run(["bash", "-c", f"timeout 10 {command}"], cwd=root, capture_output=True, check=False)
    assert marker.exists()
    assert decide(root, home, command, allow=("Bash(ssh *)",)) != "allow"


# --- family 13: a suggestion never ends at a launcher ----------------------------------------


@pytest.mark.parametrize(
    ("approved", "abuse"),
    [
        ("deno task build", "deno task evil"),
        ("yarn workspace web run build", "yarn workspace web exec sh -c id"),
        ("npx cross-env NODE_ENV=test jest", "npx cross-env sh -c id"),
        ("uv run ipython", "uv run ipython -c 'import os'"),
        ("uv run coverage run -m pytest", "uv run coverage run evil.py"),
        ("npx tsx build.ts", "npx tsx -e 'require(1)'"),
        ("npx ts-node build.ts", "npx ts-node -e 'require(1)'"),
        ("uv run nodemon app.js", "uv run nodemon --exec sh"),
        ("gcloud compute ssh vm", "gcloud compute ssh vm --command id"),
        ("az vm run-command invoke -g g -n vm", "az vm run-command invoke -g g -n other"),
        ("gh codespace ssh", "gh codespace ssh -- sh -c id"),
        ("mvn test", "mvn test exec:exec -Dexec.executable=sh"),
        ("gradle test", "gradle test -I evil.gradle"),
        ("uv run pytest", "uv run pytest -p evil_plugin"),
    ],
)
def test_a_suggestion_does_not_reach_a_launcher(project: tuple[Path, Path], approved: str, abuse: str) -> None:
    root, home = project
    engine = PermissionEngine(cwd=str(root), home=str(home))
    suggested = engine.decide("Bash", {"command": approved}, TOOLS["Bash"]).suggestions
    assert suggested, approved
    assert decide(root, home, approved, allow=suggested) == "allow", suggested
    assert decide(root, home, abuse, allow=suggested) != "allow", suggested


# --- git writes an option or operand names: judged like a redirect target ----------------------


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("git archive -o .git/hooks/pre-commit HEAD", "Bash(git archive *)"),
        ("git archive -o ~/.bashrc HEAD", "Bash(git archive *)"),
        ("git archive -o/tmp/x.tar HEAD", "Bash(git archive *)"),
        ("git format-patch -o .git/hooks HEAD~1", "Bash(git format-patch *)"),
        ("git bundle create .git/hooks/pre-commit HEAD", "Bash(git bundle *)"),
    ],
)
def test_a_git_output_to_a_protected_or_outside_path_asks(project: tuple[Path, Path], command: str, rule: str) -> None:
    assert decide(*project, command, allow=(rule,)) != "allow"


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("git archive -o out.tar HEAD", "Bash(git archive *)"),
        ("git archive --format=zip -o out.zip HEAD", "Bash(git archive *)"),
        ("git format-patch -o patches HEAD~1", "Bash(git format-patch *)"),
        ("git bundle create repo.bundle --all", "Bash(git bundle *)"),
    ],
)
def test_a_git_output_inside_the_project_stays_allowed(project: tuple[Path, Path], command: str, rule: str) -> None:
    assert decide(*project, command, allow=(rule,)) == "allow"


# --- family 5: test paths outside the repository under a rule for the test runner ---------------


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("pytest /tmp/evil", "Bash(pytest *)"),  # loads /tmp/evil/conftest.py
        ("pytest ../../../outside", "Bash(pytest *)"),
        ("pytest vendor", "Bash(pytest *)"),  # a committed link out of the project
        ("uv run pytest /tmp/evil_test.py", "Bash(uv run pytest *)"),
        ("python -m pytest /tmp/evil", "Bash(python -m pytest *)"),
        ("go test /tmp/evil/...", "Bash(go test *)"),
    ],
)
def test_tests_outside_the_repository_are_not_covered(project: tuple[Path, Path], command: str, rule: str) -> None:
    assert decide(*project, command, allow=(rule,)) != "allow"


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("pytest src -x", "Bash(pytest *)"),
        ("pytest src/app.py::test_x -q", "Bash(pytest *)"),
        ("pytest -k 'foo and bar' src", "Bash(pytest *)"),
        ("go test ./...", "Bash(go test *)"),
        ("go test -run TestX ./pkg", "Bash(go test *)"),
        ("go test github.com/x/y", "Bash(go test *)"),
    ],
)
def test_tests_inside_the_repository_stay_allowed(project: tuple[Path, Path], command: str, rule: str) -> None:
    assert decide(*project, command, allow=(rule,)) == "allow"


def test_pytest_runs_a_conftest_outside_the_repository(tmp_path: Path) -> None:
    """What the decision guards: pytest given a path elsewhere imports that folder's conftest."""
    import sys

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    marker = tmp_path / "conftest-ran"
    (elsewhere / "conftest.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (elsewhere / "test_x.py").write_text("def test_x():\n    pass\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(elsewhere)],
        cwd=repo,
        capture_output=True,
        check=False,
    )
    assert marker.exists()
    assert decide(repo, tmp_path, f"pytest {elsewhere}", allow=("Bash(pytest *)",)) != "allow"
