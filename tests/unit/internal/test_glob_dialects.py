"""The glob dialects of ``agentkeel.internal.globs`` agree where Claude Code's do: a ``paths:``
glob, a ``Read(...)`` rule and the Grep tool's ``glob`` on the same pattern pick the same files;
grep's ``--include`` and ``find -name`` read a name the same way; and a glob keel cannot read as
glibc's ``fnmatch`` does counts as one the program may match (fail closed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkeel.internal import globs
from agentkeel.policy.permissions import PermissionEngine
from agentkeel.policy.permissions.paths import compile_path_pattern
from agentkeel.tools import builtin_tools
from agentkeel.tools.search import GrepInput, python_grep
from permission_corpus import make_project

BASE = "/nonexistent-keel-glob-base"  # no directory on disk: a rule's trailing-slash test is lexical

FILES = [
    "x.py",
    "y.ts",
    "README.md",
    "src/a.py",
    "src/b.tsx",
    "src/deep/c.py",
    "src/deep/d.md",
    "docs/guide.md",
    "docs/src/e.py",
    "web/app/f.ts",
]

# patterns a user writes the same way in a rule's or skill's ``paths:`` and in Read(...)/Edit(...)
# (no braces: Claude Code expands none in permission rules; no leading ./ or /: those are the
# rules' own anchors)
SHARED = [
    "*.py",
    "*.md",
    "src/*.py",
    "src/**/*.py",
    "**/*.md",
    "src/",
    "src/**",
    "docs/**/*",
    "?.ts",
    "[xy].*",
    "src/deep",
    "**/deep/*",
    "web/**/f.ts",
    "*/src/*.py",
]


def _rule_hits(pattern: str) -> set[str]:
    rule = compile_path_pattern(pattern, cwd=BASE, home="/nonexistent-home", root=BASE)
    return {rel for rel in FILES if rule.matches(f"{BASE}/{rel}")}


@pytest.mark.parametrize("pattern", SHARED)
def test_a_paths_glob_and_a_read_rule_on_the_same_pattern_pick_the_same_files(pattern: str) -> None:
    assert {rel for rel in FILES if globs.matches([pattern], rel)} == _rule_hits(pattern)


_PART = st.sampled_from(["src", "deep", "a.py", "*", "**", "?.py", "*.py", "[ab]*", "d*", "x"])
_NAME = st.sampled_from(["src", "deep", "a.py", "b.py", "x", "dd", "ab.md"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_PART, min_size=1, max_size=4).map("/".join),
    st.booleans(),
    st.lists(_NAME, min_size=1, max_size=4).map("/".join),
)
def test_paths_globs_and_rule_patterns_are_one_dialect(body: str, trailing: bool, rel: str) -> None:
    pattern = body + ("/" if trailing else "")
    rule = compile_path_pattern(pattern, cwd=BASE, home="/nonexistent-home", root=BASE)
    assert globs.matches([pattern], rel) is rule.matches(f"{BASE}/{rel}"), (pattern, rel)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dialects")
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("NEEDLE\n")
    return root


@pytest.mark.parametrize(
    "pattern",
    ["*.py", "*.{ts,tsx}", "*.md", "[xy].*", "?.ts", "src/*.py", "src/**/*.py", "web/**/*.ts", "**/*.md"],
)
def test_the_grep_tools_glob_picks_the_files_a_paths_glob_does(tree: Path, pattern: str) -> None:
    """Both match a slash-free glob against the name at any depth and anchor one with a slash
    (ripgrep's ``--glob`` is gitignore's)."""
    found = python_grep(GrepInput(pattern="NEEDLE", glob=pattern), tree)
    assert {Path(p).relative_to(tree).as_posix() for p in found} == {
        rel for rel in FILES if globs.matches([pattern], rel)
    }


GREP_GLOBS = [
    *("*.py", "*.{ts,tsx}", "*.md", "[xy].*", "?.ts", "[!x].py", "a.py", "src/*.py", "src/**/*.py"),
    *("web/**/*.ts", "**/*.md", "src/**", "src/", "src", "*/src/*.py", "**/deep/*", "s*/*.py", "src/deep"),
]


@pytest.mark.skipif(shutil.which("rg") is None, reason="needs ripgrep")
@pytest.mark.parametrize("pattern", GREP_GLOBS)
def test_the_grep_tools_glob_without_ripgrep_is_ripgreps(tree: Path, pattern: str) -> None:
    """The fallback search picks the files ``rg --glob`` does (the real program)."""
    out = subprocess.run(
        ["rg", "-l", "--no-ignore", "--glob", pattern, "NEEDLE", "."], cwd=tree, capture_output=True, text=True
    ).stdout
    found = python_grep(GrepInput(pattern="NEEDLE", glob=pattern), tree)
    assert {Path(p).relative_to(tree).as_posix() for p in found} == {p.removeprefix("./") for p in out.split()}


# --- one name, fnmatch(3): grep --include/--exclude, find -name ---------------------------------

TOOLS = {t.name: t for t in builtin_tools()}
DENY = ["Read(./.env)", "Read(./secrets/**)"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_project(tmp_path_factory.mktemp("names"))


def _decide(project: tuple[Path, Path], command: str) -> str:
    root, home = project
    e = PermissionEngine(cwd=str(root), mode="default", home=str(home), keel_home=str(home / ".keel"))
    e.add(DENY, "deny", "test")
    e.add(["Bash(grep *)", "Bash(find *)", "Bash(cat *)"], "allow", "test")
    return e.decide("Bash", {"command": command}, TOOLS["Bash"]).decision


@pytest.mark.parametrize(
    ("glob", "reads_denied"),
    [
        ("*.py", False),
        (".e*", True),
        ("*", True),
        ("?env", True),
        ("[!.]*", True),  # secrets/key.pem
        ("[!.k]*", False),
        ("*.pe[mn]", True),
        ("*.PEM", False),  # both programs match case
    ],
)
def test_grep_include_and_find_name_read_a_name_alike(
    project: tuple[Path, Path], glob: str, reads_denied: bool
) -> None:
    """The name dialect is fnmatch's for both programs: what one reads of the tree, so does the other."""
    grep = _decide(project, f"grep -r --include='{glob}' API_KEY .")
    find = _decide(project, f"find . -name '{glob}' -exec cat {{}} +")
    assert grep == find == ("ask" if reads_denied else "allow"), (grep, find)


@pytest.mark.parametrize(
    "command",
    [
        "grep -r --include='[^x]*' API_KEY .",  # glibc reads [^x] as "not x"; Python's fnmatch as "^ or x"
        "grep -r --include='\\.env' API_KEY .",  # a backslash escape: glibc reads \. as .
        "grep -r --include='[[:punct:]]env' API_KEY .",  # a character class
        "grep -r --exclude='[^.]*' --exclude-dir=secrets API_KEY .",  # excludes what does not start with a dot
        "find . -name '[^x]*' -exec cat {} +",
    ],
)
def test_a_name_glob_keel_cannot_read_as_glibc_does_counts_as_read(project: tuple[Path, Path], command: str) -> None:
    """Before: keel read these globs with Python's fnmatch, thought grep skipped .env, and allowed
    a command that prints it."""
    assert _decide(project, command) == "ask", command


@pytest.mark.skipif(shutil.which("grep") is None, reason="needs grep")
def test_grep_does_read_the_file_those_globs_name(project: tuple[Path, Path]) -> None:
    """The real program, so the case above is not keel's guess: GNU grep prints .env for each."""
    root, _ = project
    version = subprocess.run(["grep", "--version"], capture_output=True, text=True, check=False).stdout
    if "GNU grep" not in version:
        pytest.skip("GNU grep's fnmatch")
    for args in (["--include=[^x]*"], ["--include=\\.env"], ["--include=[[:punct:]]env"], ["--exclude=[^.]*"]):
        out = subprocess.run(
            ["grep", "-r", *args, "--exclude-dir=secrets", "API_KEY", "."],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        assert "./.env:" in out, (args, out)


def test_name_matching_is_fnmatch_case_sensitive_and_program_matching_says_when_it_cannot_tell() -> None:
    assert globs.name_matches("github", "git*") and not globs.name_matches("GitHub", "git*")
    assert globs.program_name_matches("a.py", "*.py") is True
    assert globs.program_name_matches("a.py", "*.md") is False
    assert globs.program_name_matches("a.py", "[^x]*") is True  # glibc's negation, read exactly
    assert globs.program_name_matches("x.py", "[^x]*") is False
    assert globs.program_name_matches("*x", "\\*x") is True and globs.program_name_matches("ax", "\\*x") is False
    assert globs.program_name_matches("a.py", "[[:alpha:]]*") is None  # a class: keel cannot tell


# --- the shell: bash's bracket expressions ---------------------------------------------------------


@pytest.fixture
def home_project(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".npmrc").write_text("//registry.example/:_authToken=obviously-fake\n")
    return home


@pytest.mark.parametrize(
    "command",
    [
        "cat ~/.np[^x]rc",  # bash reads [^x] as "not x"; Python's glob and fnmatch as "^ or x"
        "cat .np[^x]rc",
        "cat .np[[:alpha:]]rc",  # a character class
        "cat .[^a]pmrc",
        "cat .np[!x]rc",  # worked before too
    ],
)
def test_a_shell_glob_naming_a_credential_store_asks(home_project: Path, command: str) -> None:
    """Before: in a working directory that holds the home, ``cat .np[^x]rc`` (bash: .npmrc) ran
    unasked: keel read the glob as Python does and found no credential store in it."""
    e = PermissionEngine(
        cwd=str(home_project), mode="default", home=str(home_project), keel_home=str(home_project / ".keel")
    )
    d = e.decide("Bash", {"command": command}, TOOLS["Bash"])
    assert d.decision == "ask" and "credential store" in d.reason, (command, d.reason)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_does_expand_those_globs_to_the_store(home_project: Path) -> None:
    out = subprocess.run(
        ["bash", "-c", "echo .np[^x]rc .np[[:alpha:]]rc .[^a]pmrc"],
        cwd=home_project,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == [".npmrc", ".npmrc", ".npmrc"]
    assert globs.shell_expand(f"{home_project}/.np[^x]rc", 10) == [f"{home_project}/.npmrc"]
    assert globs.shell_expand(f"{home_project}/.np[[:alpha:]]rc", 10) == [f"{home_project}/.npmrc"]


def test_a_path_naming_a_user_with_a_nul_gets_a_decision(tmp_path: Path) -> None:
    """Found by the matcher fuzzer: ``~\\x00`` crashed the check (expanduser raises on a NUL)."""
    e = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path))
    d = e.decide("Edit", {"file_path": "~\x00", "old_string": "a", "new_string": "b"}, TOOLS["Edit"])
    assert d.stage != "error", d.reason
