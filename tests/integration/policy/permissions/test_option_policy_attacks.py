"""Second adversarial round on the per-program option policy (issue #30 families 5, 6, 8 and
item 11): members of the families the earlier rounds did not list, each decided by the engine
in default mode without a rule (where keel auto-allows its read-only programs)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentkeel.policy.permissions import PermissionEngine
from agentkeel.tools import builtin_tools
from permission_corpus import make_project

TOOLS = {t.name: t for t in builtin_tools()}


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    return make_project(tmp_path)


def decide(root: Path, home: Path, command: str, *, deny: tuple[str, ...] = ("Read(./.env)",)) -> str:
    engine = PermissionEngine(cwd=str(root), home=str(home), keel_home=str(home / ".keel"))
    engine.add(deny, "deny", "test")
    return engine.decide("Bash", {"command": command}, TOOLS["Bash"]).decision


# --- family 6: an exported locale/time-zone variable reassigned to a path in the line ---------
# TZ, LANG, LC_* and LANGUAGE count as harmless assignments, and a plain `NAME=value;` reaches
# the next program when NAME is already exported (TZ often is): glibc opens TZ's file (absolute,
# or climbing out of /usr/share/zoneinfo) and loads LC_ALL=/abs/dir's locale files.

LOCALE_READS = [
    "TZ=/etc/shadow; date",
    "TZ=:/etc/shadow; date",
    "TZ=../../../../../../etc/shadow; date",
    "TZ=../../../outside/notes.txt; ls -l",
    "LC_ALL=/tmp/evil; ls",
    "LC_TIME=/tmp/evil; date",
    "LANG=/tmp/evil; sort README.md",
    "LANGUAGE=en:../../../../tmp/evil; ls",
]


@pytest.mark.parametrize("command", LOCALE_READS)
def test_locale_variable_naming_a_file_is_not_auto_allowed(project: tuple[Path, Path], command: str) -> None:
    root, home = project
    assert decide(root, home, command) != "allow", command


@pytest.mark.parametrize(
    "command", ["TZ=UTC; date", "TZ=Europe/Paris; date", "LANG=C.UTF-8; sort README.md", "LANGUAGE=en:fr; ls"]
)
def test_ordinary_locale_values_stay_allowed(project: tuple[Path, Path], command: str) -> None:
    root, home = project
    assert decide(root, home, command) == "allow", command


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_exported_tz_reassigned_in_the_line_makes_date_open_the_file(tmp_path: Path) -> None:
    """What the decision guards: with TZ exported, `TZ=/abs; date` opens /abs."""
    secret = tmp_path / "secret"
    secret.write_text("not a zone file\n")
    log = tmp_path / "trace"
    env = {**os.environ, "TZ": "UTC"}
    strace = shutil.which("strace")
    assert strace is not None
    subprocess.run(
        [strace, "-f", "-qq", "-e", "trace=open,openat", "-o", str(log), "/bin/bash", "-c", f"TZ={secret}; date"],
        env=env,
        capture_output=True,
        timeout=20,
        check=False,
    )
    assert str(secret) in log.read_text()


# --- family 6: date's -d string names a time-zone file (TZ="..." inside the date) -------------
# GNU date parses `TZ="zone" date-string` and loads that zone: an absolute path, or one that
# climbs out of /usr/share/zoneinfo, is opened; -f's lines are parsed the same way.

DATE_ZONE_READS = [
    "date -d 'TZ=\"/etc/shadow\" now'",
    "date --date='TZ=\"/etc/shadow\" now'",
    "date -d'TZ=\"../../../../../../etc/shadow\" now'",
    "date --da='TZ=\"/etc/shadow\" 2020-01-01'",
    "date -uRd 'TZ=\"../../../outside/notes.txt\" now'",
    "date -f zones.txt",  # holds a TZ="/abs" line
    "date --file=-",
]


@pytest.mark.parametrize("command", DATE_ZONE_READS)
def test_date_string_naming_a_zone_file_is_not_auto_allowed(project: tuple[Path, Path], command: str) -> None:
    root, home = project
    (root / "zones.txt").write_text('2020-01-01\nTZ="/etc/shadow" now\n')
    assert decide(root, home, command) != "allow", command


@pytest.mark.parametrize(
    "command",
    [
        "date -d yesterday",
        "date -d 'TZ=\"Europe/Paris\" now'",
        "date -d @0 +%F",
        "date -r README.md",
        "date -f README.md",
    ],
)
def test_ordinary_date_strings_stay_allowed(project: tuple[Path, Path], command: str) -> None:
    root, home = project
    assert decide(root, home, command) == "allow", command


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_date_string_zone_opens_the_file(tmp_path: Path) -> None:
    """What the decision guards: `date -d 'TZ="/abs" now'` opens /abs."""
    secret = tmp_path / "secret"
    secret.write_text("not a zone file\n")
    log = tmp_path / "trace"
    strace = shutil.which("strace")
    assert strace is not None
    subprocess.run(
        [strace, "-f", "-qq", "-e", "trace=open,openat", "-o", str(log), "date", "-d", f'TZ="{secret}" now'],
        capture_output=True,
        timeout=20,
        check=False,
    )
    assert str(secret) in log.read_text()


# --- family 5: git's read-only subcommands that verify signatures run gpg ---------------------
# `git log --show-signature` (any prefix git takes) and the %G placeholders of --format run
# gpg.program (gpg by default), which creates ~/.gnupg and a temp file: a program keel did not
# account for, writing outside the working directories.

SIGNATURE_CHECKS = [
    "git log --show-signature",
    "git log --show-sig -1",
    "git show --show-signature HEAD",
    "git log --pretty='%GG'",
    "git show -s --format='%h %G?'",
    "git log --format '%GK'",
    "git branch --format='%(signature)'",
]


@pytest.mark.parametrize("command", SIGNATURE_CHECKS)
def test_git_signature_verification_is_not_auto_allowed(project: tuple[Path, Path], command: str) -> None:
    root, home = project
    assert decide(root, home, command) != "allow", command


@pytest.mark.parametrize(
    "command",
    ["git log --oneline", "git log --format='%h %s'", "git log -g --format=%gd", "git log --no-show-signature"],
)
def test_ordinary_git_formats_stay_allowed(project: tuple[Path, Path], command: str) -> None:
    root, home = project
    assert decide(root, home, command) == "allow", command


# --- family 5/6: an abbreviated --recursive with ls -L follows the committed etclink out -------


@pytest.mark.parametrize(
    "command", ["ls -L --recursiv", "ls --recu -L", "ls -lL --recursi .", "ls -L --rec etclink/.."]
)
def test_ls_abbreviated_recursive_following_links_is_not_auto_allowed(project: tuple[Path, Path], command: str) -> None:
    root, home = project
    assert decide(root, home, command) != "allow", command


@pytest.mark.parametrize("command", ["ls -l --recursive src", "ls --recur src", "ls -L src"])
def test_ordinary_recursive_listings_stay_allowed(project: tuple[Path, Path], command: str) -> None:
    root, home = project
    assert decide(root, home, command) == "allow", command


# --- family 6/7: an embedded bare repository brings its own config ----------------------------
# A committed directory holding HEAD, objects/ and refs/ is a repository git finds from inside
# it (safe.bareRepository defaults to all): after `cd` there, `git diff A B` runs its config's
# diff.external and `git log` its gpg.program. Not auto-allowed there; ordinary repos still are.


def _bare_fixture(root: Path, marker: Path) -> Path:
    work = root.parent / "bare-src"
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root.parent)}
    git = ["git", "-c", "user.name=x", "-c", "user.email=x@example.com"]
    subprocess.run(["git", "init", "-q", str(work)], check=True, env=env)
    for text in ("a\n", "b\n"):
        (work / "a").write_text(text)
        subprocess.run([*git, "-C", str(work), "add", "a"], check=True, env=env)
        subprocess.run([*git, "-C", str(work), "commit", "-qm", text.strip()], check=True, env=env)
    bare = root / "fixtures" / "evil"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True, env=env)
    with (bare / "config").open("a") as f:
        f.write(f"[diff]\n\texternal = touch {marker}; true\n")
    return bare


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("command", ["git diff HEAD~1 HEAD", "git log -p", "git show HEAD", "git status"])
def test_git_inside_an_embedded_bare_repository_is_not_auto_allowed(project: tuple[Path, Path], command: str) -> None:
    root, home = project
    bare = _bare_fixture(root, root.parent / "PWNED")
    engine = PermissionEngine(cwd=str(bare), home=str(home), keel_home=str(home / ".keel"))
    assert engine.decide("Bash", {"command": command}, TOOLS["Bash"]).decision != "allow", command
    engine = PermissionEngine(cwd=str(root / "src"), home=str(home), keel_home=str(home / ".keel"))
    assert engine.decide("Bash", {"command": command}, TOOLS["Bash"]).decision == "allow", command


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("unshare") is None, reason="needs git, unshare")
def test_embedded_bare_repository_config_runs_diff_external(tmp_path: Path) -> None:
    """What the decision guards (run in a user namespace without network, in a scratch dir)."""
    (tmp_path / "proj").mkdir()
    marker = tmp_path / "PWNED"
    bare = _bare_fixture(tmp_path / "proj", marker)
    probe = subprocess.run(["unshare", "-r", "-n", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("user namespaces unavailable")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}
    subprocess.run(
        ["unshare", "-r", "-n", "git", "diff", "HEAD~1", "HEAD"], cwd=bare, env=env, capture_output=True, check=False
    )
    assert marker.exists()


# --- family 6: find -newerXt parses a date the way date -d does (TZ="..." opens a zone file) ---

FIND_ZONE_READS = [
    "find . -newermt 'TZ=\"/etc/shadow\" now'",
    "find . -newerat 'TZ=\"/etc/shadow\" now'",
    "find src -name '*.py' -newerct 'TZ=\":/etc/shadow\" 2020-01-01'",
]


@pytest.mark.parametrize("command", FIND_ZONE_READS)
def test_find_newer_date_naming_a_zone_file_is_not_auto_allowed(project: tuple[Path, Path], command: str) -> None:
    root, home = project
    assert decide(root, home, command) != "allow", command


@pytest.mark.parametrize("command", ["find . -newermt yesterday", "find . -newermm README.md", "find . -name x"])
def test_ordinary_find_newer_stays_allowed(project: tuple[Path, Path], command: str) -> None:
    root, home = project
    assert decide(root, home, command) == "allow", command
