"""Every target of every command is judged and the strongest verdict wins (issue #11 item 1),
with a hypothesis property: a command with several write targets is decided at least as
strictly as the strictest of its targets alone, in every mode."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkeel.permissions import PermissionEngine
from agentkeel.tools import builtin_tools
from permission_corpus import make_project

TOOLS = {t.name: t for t in builtin_tools()}
STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_project(tmp_path_factory.mktemp("targets"))


def engine(project: tuple[Path, Path], mode: str = "default", **rules: list[str]) -> PermissionEngine:
    root, home = project
    e = PermissionEngine(cwd=str(root), mode=mode, home=str(home), keel_home=str(home / ".keel"))  # type: ignore[arg-type]
    for kind, texts in rules.items():
        e.add(texts, kind, "test")  # type: ignore[arg-type]
    return e


def decide(e: PermissionEngine, command: str, **kw: Any) -> str:
    return e.decide("Bash", {"command": command}, TOOLS["Bash"], **kw).decision


@pytest.mark.parametrize(
    "command",
    [
        "cp /tmp/evil.sh .git/hooks/pre-commit",
        "mv /tmp/x ~/.bashrc",
        "echo x > /tmp/a; echo y > .git/hooks/pre-commit",
        "touch /tmp/a .git/hooks/pre-commit",
        "echo x | tee /tmp/a .git/hooks/pre-commit",
        "install /tmp/evil.sh .git/hooks/pre-commit",
        "rsync /tmp/evil.sh .git/hooks/pre-commit",
        "chmod +x /tmp/a .git/hooks/pre-commit",
        "ln -s /tmp/evil.sh .git/hooks/pre-commit",
        "echo x > ../elsewhere >.git/hooks/pre-commit",  # two redirects: the outside one came first
        "cp $SRC .git/hooks/pre-commit",  # a target known only at run time came first
        "f() { :; }; cp README.md .git/hooks/pre-commit",  # not confidently analysed: the writes still count
    ],
)
def test_bypass_mode_still_asks_for_a_protected_target_after_a_weaker_one(
    project: tuple[Path, Path], command: str
) -> None:
    e = engine(project, "bypassPermissions")
    d = e.decide("Bash", {"command": command}, TOOLS["Bash"])
    assert d.decision == "ask", d.reason
    assert "always asks" in d.reason or "protected" in d.reason, d.reason


def test_the_single_target_controls_behave_as_before(project: tuple[Path, Path]) -> None:
    e = engine(project, "bypassPermissions")
    assert decide(e, "cp README.md .git/hooks/pre-commit") == "ask"
    assert decide(e, "cp /tmp/evil.sh docs/") == "allow"  # bypass lifts an outside write on its own
    assert decide(e, "echo x > /tmp/a; echo y > docs/b") == "allow"


# --- the property ---------------------------------------------------------------------------

TARGETS = [
    "docs/out.txt",  # inside the project
    "src/app.py",
    "/tmp/keel-prop-scratch",  # outside the working directories (the project lives under the temp dir)
    "../sibling.txt",
    ".git/hooks/pre-commit",  # protected
    "~/.bashrc",
    ".claude/settings.json",
    ".env",  # Read/Edit-denied below
    "/dev/null",
    "$OUT",  # known only at run time
]
WRITERS = ["cp", "mv", "touch", "tee", "install", "chmod", "ln -s", "rsync", "rm -f", "echo x >", "echo x >>"]
RULES: dict[str, list[str]] = {"allow": ["Bash(cp *)", "Bash(touch *)", "Bash(echo *)", "Edit(./docs/**)"]}
RULES_DENY: dict[str, list[str]] = {**RULES, "deny": ["Edit(./.env)"]}


def _piece(writer: str, targets: list[str]) -> str:
    if writer.startswith("echo"):
        op = writer.split()[-1]
        return "echo x " + " ".join(f"{op} {t}" for t in targets)  # one command, a redirect per target
    if writer == "tee":
        return "echo x | tee " + " ".join(targets)
    return f"{writer} {' '.join(targets)}"


# KEEL_FUZZ_EXAMPLES=3000 for a deeper run
@settings(
    max_examples=int(os.environ.get("KEEL_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    pieces=st.lists(
        st.tuples(st.sampled_from(WRITERS), st.lists(st.sampled_from(TARGETS), min_size=1, max_size=3)),
        min_size=1,
        max_size=3,
    ),
    joiner=st.sampled_from(["; ", " && ", " || ", "\n"]),
    mode=st.sampled_from(["default", "acceptEdits", "bypassPermissions", "dontAsk"]),
    deny=st.booleans(),
)
def test_several_targets_are_at_least_as_strict_as_the_strictest_one(
    project: tuple[Path, Path], pieces: list[tuple[str, list[str]]], joiner: str, mode: str, deny: bool
) -> None:
    e = engine(project, mode, **(RULES_DENY if deny else RULES))
    command = joiner.join(_piece(w, ts) for w, ts in pieces)
    combined = e.decide("Bash", {"command": command}, TOOLS["Bash"])
    for writer, targets in pieces:
        for target in targets:
            alone = e.decide("Bash", {"command": _piece(writer, [target])}, TOOLS["Bash"])
            assert STRICTNESS[combined.decision] >= STRICTNESS[alone.decision], (
                f"{command!r} -> {combined.decision} ({combined.reason}), "
                f"but {_piece(writer, [target])!r} alone -> {alone.decision} ({alone.reason})"
            )
