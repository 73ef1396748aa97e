"""Issue #30 (Safety III): the shell analyser fails closed on what it does not model.

A command is auto-allowed only when every part of it is in the modelled subset (ARCHITECTURE.md,
"The modelled shell subset"); what could run a program keel cannot name counts as any program
for a Bash deny rule. One block per family; the differential generators for the same families
are in tests/integration/policy/permissions/test_properties.py, the corpus cases in tests/corpus/permissions.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkeel.policy.permissions import PermissionEngine
from agentkeel.policy.permissions.bash import analyse
from agentkeel.tools import builtin_tools
from permission_corpus import decide, engine_for, load_cases, make_project

TOOLS = {t.name: t for t in builtin_tools()}


def _decide(
    tmp_path: Path, command: str, mode: str = "default", allow: tuple[str, ...] = (), deny: tuple[str, ...] = ()
) -> str:
    project = tmp_path / "p"
    project.mkdir(exist_ok=True)
    (project / "src").mkdir(exist_ok=True)
    (project / ".env").write_text("KEY=fake")
    engine = PermissionEngine(cwd=str(project), mode=mode, home=str(tmp_path / "home"))  # type: ignore[arg-type]
    engine.add(list(allow), "allow", "test")
    engine.add(list(deny), "deny", "test")
    return engine.decide("Bash", {"command": command}, TOOLS["Bash"]).decision


# --- family 1: words bash evaluates arithmetically --------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "test -v 'a[$(touch pwned)]'",
        "[ -v 'a[`touch pwned`]' ]",
        "printf -v 'a[`touch pwned`]' %s x",
        "read 'a[`touch pwned`]' <<< x",
        "[[ 'a[`touch pwned`]' -eq 1 ]]",
        "command test -v 'a[`touch pwned`]'",
        "DEBUG='a[`touch pwned`]'; echo ${x:DEBUG}",
        "echo ${a['`touch pwned`']}",
    ],
)
def test_code_in_an_arithmetic_word_is_not_read_only(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command) == "ask"
    assert _decide(tmp_path, command, mode="dontAsk") == "deny"
    assert _decide(tmp_path, command, mode="bypassPermissions", deny=("Bash(touch *)",)) == "deny"


@pytest.mark.parametrize(
    "command", ["test -v NAME", "[ -v HOME ] && ls", "test -f src", "(( 1 + 2 )) && ls", "[[ 3 -gt 2 ]] && ls"]
)
def test_plain_names_and_literal_arithmetic_stay_allowed(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command) == "allow"


# --- family 2: here-document bodies ----------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "cat <<EOF\n`touch pwned; id`\nEOF",
        "cat <<-EOF\n\t`touch pwned`\n\tEOF",
        "cat <<-EOF\n\t$(touch pwned)\n\tEOF",
        'cat <<EOF\n"`touch pwned`"\nEOF',
        "cat <<EOF\n${x:-`touch pwned`}\nEOF",
        "cat <<EOF\n\\`x\\`'`touch pwned`'\nEOF",  # the parser reads this body as words
    ],
)
def test_commands_in_an_unquoted_heredoc_body_are_read(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command) == "ask"
    assert _decide(tmp_path, command, mode="bypassPermissions", deny=("Bash(touch *)",)) == "deny"


@pytest.mark.parametrize(
    "command", ["cat <<'EOF'\n`touch x`\nEOF", "cat <<EOF\nplain $HOME\nEOF", "cat <<-EOF\n\tplain ${HOME}\n\tEOF"]
)
def test_plain_heredocs_stay_allowed(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command) == "allow"


# --- family 3: variables without scope ------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "DEBUG=sh; (DEBUG=echo); $DEBUG -c 'touch pwned'",
        "DEBUG=sh; echo | DEBUG=echo; $DEBUG -c 'touch pwned'",
        "DEBUG=sh; false && DEBUG=echo; $DEBUG -c 'touch pwned'",
        "DEBUG=sh; if false; then DEBUG=echo; fi; $DEBUG -c 'touch pwned'",
        "DEBUG=sh; case a in b) DEBUG=echo;; esac; $DEBUG -c 'touch pwned'",
        "DEBUG=sh; local DEBUG=echo; $DEBUG -c 'touch pwned'",
    ],
)
def test_a_value_set_in_a_scope_is_not_the_value_at_use(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command) == "ask"


def test_a_subshell_keeps_the_outer_value_exactly() -> None:
    analysis = analyse("DEBUG=cat; (DEBUG=echo); $DEBUG README.md", "/tmp")
    assert [c.argv for c in analysis.commands if c.argv] == [["cat", "README.md"]]


# --- family 7: deny rules hold for every program a command can run ---------------------------


@pytest.mark.parametrize(
    "command",
    [
        "coproc rm x",
        "{rm,-rf,src}",
        "/bin/[r]m -rf src",
        "echo rm -rf src | bash",
        "bash -c -- 'rm -rf src'",
        "env -C / rm -rf src",
        "xargs --max-procs 4 rm < list",
        "echo ${x=`rm -rf src`}",
        "setsid rm -rf src",
        "uv run rm -rf src",
        "npx rm -rf src",
        "sort --compress-prog=rm x",
        "ssh -o ProxyCommand='rm -rf src' host",
        "GIT_SSH_COMMAND='rm -rf src' git fetch",
        "echo rm | xargs -I{} {} -rf src",
        "time if true; then rm -rf src; fi",
    ],
)
def test_bypass_mode_denies_every_way_of_running_a_denied_program(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command, mode="bypassPermissions", deny=("Bash(rm *)",)) == "deny"
    assert _decide(tmp_path, command, allow=("Bash(*)",), deny=("Bash(rm *)",)) == "deny"


@pytest.mark.parametrize("command", ["git status", "uv run pytest", "timeout 60 pytest -q", "python3 -m pytest"])
def test_ordinary_commands_are_not_caught(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command, mode="bypassPermissions", deny=("Bash(rm *)",)) == "allow"


# --- family 6, brace expansion --------------------------------------------------------------


@pytest.mark.parametrize("command", ["cat .{e,}nv", "cat {.,}env", "cat .e{n..n}v", 'cat ".e"{n,}v'])
def test_brace_expansion_does_not_read_past_a_read_deny_rule(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command, allow=("Bash(cat *)",), deny=("Read(./.env)",)) != "allow"
    assert _decide(tmp_path, command, mode="bypassPermissions", deny=("Read(./.env)",)) == "deny"


# --- the corpus groups that name an exact decision -------------------------------------------


def test_corpus_groups_with_an_expected_decision_get_it(tmp_path: Path) -> None:
    project, home = make_project(tmp_path)
    wrong = []
    for case in load_cases():
        if case.expect is None:
            continue
        decision = decide(case, engine_for(case, project, home))
        if decision.decision != case.expect:
            wrong.append(f"{case.label()} -> {decision.decision} ({decision.reason}), expected {case.expect}")
    assert not wrong, "\n".join(wrong)


def test_every_safety_iii_family_has_corpus_cases() -> None:
    groups = {c.group for c in load_cases()}
    for family in ("family 1", "family 2", "family 3", "family 7", "family 6 (brace expansion)"):
        assert any(g.startswith(f"Safety III {family}") for g in groups), family


@pytest.mark.parametrize("command", ["echo rm -rf src | bash", "setsid rm -rf src", "uv run rm -rf src"])
def test_an_ask_rule_asks_for_a_command_that_may_run_its_program(tmp_path: Path, command: str) -> None:
    project = tmp_path / "p"
    project.mkdir()
    engine = PermissionEngine(cwd=str(project), mode="bypassPermissions", home=str(tmp_path / "home"))
    engine.add(["Bash(rm *)"], "ask", "test")
    assert engine.decide("Bash", {"command": command}, TOOLS["Bash"]).decision == "ask"
