"""Review of issue #30 families 1, 2, 3, 7 and brace expansion: members the first fixes missed.

Each block is a member of a family found by attacking the analyser after those fixes (other
members than the issue's examples and the first tests). Every attack is decided under default,
dontAsk, bypassPermissions with a Bash deny rule, and a ``Bash(*)`` allow rule with a deny rule;
for the ones bash alone can run, a traced ``/bin/bash`` (the stand-ins of
tests/integration/policy/permissions/test_properties.py) shows that the command really runs the denied program, so the
test cannot pass on a command that is harmless anyway."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentkeel.policy.permissions import PermissionEngine
from agentkeel.policy.permissions.bash import DYNAMIC, analyse
from agentkeel.tools import builtin_tools
from tests.integration.policy.permissions.test_properties import (
    FUZZ_EXAMPLES,
    _assert_allowed_runs_only_allowed,
    _run_traced,
    _traced_world,
)

TOOLS = {t.name: t for t in builtin_tools()}


def _decide(
    tmp_path: Path, command: str, mode: str = "default", allow: tuple[str, ...] = (), deny: tuple[str, ...] = ()
) -> str:
    project = tmp_path / "p"
    if not project.exists():
        _traced_world(tmp_path)  # the project the traced runs use (file.txt, .env, the stand-ins)
    engine = PermissionEngine(cwd=str(project), mode=mode, home=str(tmp_path / "home"), scratch_dirs=())  # type: ignore[arg-type]
    engine.add(list(allow), "allow", "test")
    engine.add(list(deny), "deny", "test")
    return engine.decide("Bash", {"command": command}, TOOLS["Bash"]).decision


def _never_runs_rm_unnoticed(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command) == "ask", command
    assert _decide(tmp_path, command, mode="dontAsk") == "deny", command
    assert _decide(tmp_path, command, mode="bypassPermissions", deny=("Bash(rm *)",)) == "deny", command
    assert _decide(tmp_path, command, allow=("Bash(*)",), deny=("Bash(rm *)",)) == "deny", command


def _runs_rm(tmp_path: Path, command: str) -> bool:
    ran, _ = _run_traced(tmp_path, command)
    return any(line.split(" ", 1)[0] == "rm" for line in ran)


# --- family 1: a name declared -i evaluates whatever is assigned to it, by any builtin ---------

FAMILY1 = [
    "declare -i n; read n <<< 'a[$(rm x)]'",
    "typeset -i n; printf -v n 'a[$(rm x)]'",
    "declare -i n; for n in 'a[$(rm x)]'; do :; done",
    "declare -i n; : ${n:='a[$(rm x)]'}",
    "declare -i n; : ${n='a[$(rm x)]'}",
    "declare -ia n; mapfile n <<< 'a[$(rm x)]'",
    "declare -gi n; read -r n <<< 'a[$(rm x)]'",
    "declare -i n=1; declare n='a[$(rm x)]'",  # a later declare of the integer name evaluates too
    "declare -i n=1; export n='a[$(rm x)]'",
]


@pytest.mark.parametrize("command", FAMILY1)
def test_an_integer_name_assigned_at_run_time_is_opaque(tmp_path: Path, command: str) -> None:
    assert _runs_rm(tmp_path, command), f"the attack no longer runs rm under bash: {command!r}"
    _never_runs_rm_unnoticed(tmp_path, command)


def test_an_integer_name_read_from_a_file_is_opaque(tmp_path: Path) -> None:
    """The value comes from the project's files (a hostile repository), not from the command line."""
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "data.txt").write_text("a[$(rm x)]\n")
    command = "declare -i n; read n < data.txt"
    assert _decide(tmp_path, command, mode="bypassPermissions", deny=("Bash(rm *)",)) == "deny"


@pytest.mark.parametrize(
    "command",
    [
        '[ "$(wc -l < file.txt)" -gt 0 ]',  # test compares integers; it evaluates nothing (asked since the first fixes)
        '[ "$(wc -l < file.txt)" -gt 0 ] && cat file.txt',
        "test 3 -gt 2",
        "[[ 3 -gt 2 ]] && ls",
    ],
)
def test_integer_comparisons_of_test_stay_allowed(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command) == "allow"


def test_test_evaluates_nothing_in_its_integer_operands(tmp_path: Path) -> None:
    """Why ``[ x -gt y ]`` may stay allowed: bash's test builtin does not evaluate its operands."""
    assert not _runs_rm(tmp_path, "[ 1 -eq 'a[$(rm x)]' ]; test 1 -lt 'a[`rm x`]'")


# --- family 3: values that change between the assignment and the use --------------------------

FAMILY3 = [
    "DEBUG=cat; declare -l DEBUG=RM; $DEBUG x",  # -l/-u/-c store the value in another case
    "declare -l DEBUG; DEBUG=RM; $DEBUG x",
    "trap 'DEBUG=rm' DEBUG; DEBUG=cat; $DEBUG x",  # a trap action assigns before every later command
    "trap 'read DEBUG <<< rm' DEBUG; DEBUG=cat; $DEBUG x",
    "trap 'DEBUG=rm' ERR; DEBUG=cat; false; $DEBUG x",
    "trap 'declare -l DEBUG' DEBUG; DEBUG=RM; $DEBUG x",
    "DEBUG=cat; export DEBUG; DEBUG=rm sh -c '$DEBUG x'",  # a shell -c sees its environment, not ours
    "DEBUG=rm; bash -c 'DEBUG=cat'; $DEBUG x",  # and what it assigns does not come back
    "time X=1 rm x",  # time and coproc are reserved words: X=1 is an assignment, rm the program
    "time -p X=1 rm x",
    "coproc X=1 rm x",
]


@pytest.mark.parametrize("command", FAMILY3)
def test_values_keel_cannot_follow_never_run_rm_unnoticed(tmp_path: Path, command: str) -> None:
    assert _runs_rm(tmp_path, command), f"the attack no longer runs rm under bash: {command!r}"
    _never_runs_rm_unnoticed(tmp_path, command)


def test_a_shell_c_script_sees_only_its_own_assignments() -> None:
    analysis = analyse("DEBUG=cat; bash -c '$DEBUG file.txt'", "/tmp")
    assert [c.argv for c in analysis.commands] == [[DYNAMIC, "file.txt"]], "keel read the inner $DEBUG as cat"
    inner = analyse("DEBUG=cat bash -c '$DEBUG file.txt'", "/tmp")
    assert [c.argv for c in inner.commands if c.argv] == [["cat", "file.txt"]]


# --- family 7: deny rules hold for every program a command can run -----------------------------

FAMILY7_BASH = [
    "echo rm x | xargs -i sh -c '{}'",  # was allowed in default mode: the input goes where {} stands
    "echo rm x | xargs -I{} sh -c '{}'",
    "echo rm x | xargs -I% sh -c %",
    "echo 'rm x' | xargs --replace=Z sh -c Z",
    "env =1 rm x",  # env putenv()s "=1" and runs rm
    "env a=b =c rm x",
    "echo `echo \\`rm x\\``",  # inside `..` bash unescapes \\` and runs the inner command
    "ls `echo \\`rm x\\``",
]


@pytest.mark.parametrize("command", FAMILY7_BASH)
def test_ways_of_running_rm_that_only_bash_reveals_never_run_it_unnoticed(tmp_path: Path, command: str) -> None:
    assert _runs_rm(tmp_path, command), f"the attack no longer runs rm under bash: {command!r}"
    _never_runs_rm_unnoticed(tmp_path, command)


FAMILY7_PROGRAMS = [
    "script -qc 'true; rm x' /dev/null",  # a runner's argument that is a shell command line
    "script --command='rm x' /dev/null",
    "su -c 'true; rm x'",
    "flock /tmp/l -c 'true; rm x'",
    "ssh host 'true; rm x'",
    "awk -v x=1 'BEGIN{system(\"rm x\")}'",  # the program after -v's value
    "awk -F, -v a=b 'BEGIN{system(\"rm x\")}'",
    "awk --source='BEGIN{system(\"rm x\")}'",
    "rbash -c 'rm x'",
    "/bin/rbash -c 'rm x'",
    "bash5 -c 'rm x'",
    "vim +'!rm x' +q",  # editors, debuggers and database shells run commands from their arguments
    "ex -c '!rm x' -c q",
    "gdb -batch -ex 'shell rm x'",
    "sqlite3 :memory: '.shell rm x'",
    "make --eval='all:; rm x'",
    "make -f - <<< $'all:\\n\\trm x'",  # a makefile read from standard input
    "make --file=/dev/stdin <<< $'all:\\n\\trm x'",
    "man -P 'rm x' ls",
    "find . -maxdepth 0 -exec sh -c 'echo {}' \\;",  # a file name inside a shell script
    "sh -c '{}'",  # a command named {} (the grammar reads an empty group)
]


@pytest.mark.parametrize("command", FAMILY7_PROGRAMS)
def test_programs_that_run_commands_from_their_arguments_never_run_rm_unnoticed(tmp_path: Path, command: str) -> None:
    _never_runs_rm_unnoticed(tmp_path, command)


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "echo x | xargs -I{} cat {}",
        "find . -name '*.py' -exec grep -l foo {} +",
        "awk '{print $1}' file.txt",
        "less +G file.txt",
        "vim +10 file.txt",
        "bash -c 'echo $HOME'",
        "timeout 60 pytest -q",
    ],
)
def test_ordinary_commands_stay_allowed_in_bypass_mode(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command, mode="bypassPermissions", deny=("Bash(rm *)",)) == "allow"


# --- family 3: HOME assigned in the line is what ~ and a bare cd use ------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "HOME=$PWD; cat ~/.env",
        "HOME=.; cat ~/.env",
        "export HOME=$PWD; cat ~/.env",
        "HOME=$PWD; cd; cat .env",
        "HOME=$PWD; cd ~; cat .env",
        "HOME=$PWD bash -c 'cat ~/.env'",
    ],
)
def test_home_assigned_in_the_line_is_what_tilde_and_cd_use(tmp_path: Path, command: str) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "home").mkdir()  # a home keel can follow a cd into
    (tmp_path / "p" / ".env").write_text("KEY=fake")
    for mode in ("bypassPermissions", "default"):
        assert _decide(tmp_path, command, mode=mode, allow=("Bash(*)",), deny=("Read(./.env)",)) == "deny", mode


def test_a_prefix_home_does_not_change_this_commands_tilde() -> None:
    """bash expands ~ before the command's own assignments take effect."""
    analysis = analyse("HOME=/elsewhere cat ~/notes", "/tmp", "/home/u")
    assert [c.argv for c in analysis.commands] == [["cat", "/home/u/notes"]]


# --- generators: the next member of these families should be found by the fuzzer ---------------
# KEEL_FUZZ_EXAMPLES sets the depth, as for tests/integration/policy/permissions/test_properties.py.

_ATTRIBUTES = [
    "",
    "declare -i n; ",
    "typeset -i n; ",
    "declare -ia n; ",
    "declare -l n; ",
    "declare -u n; ",
    "declare -c n; ",
]
_SETTERS = [
    "read n <<< {q}", "printf -v n {q}", "for n in {q}; do :; done", ": ${{n:={q}}}", ": ${{n={q}}}",
    "mapfile n <<< {q}", "n={q}", "export n={q}", "trap 'n={q}' DEBUG; :", "time n={q}",
    "getopts a n -a; n={q}", "read -a n <<< {q}",
]  # fmt: skip
_VALUES = ["'a[$(rm x)]'", "RM", "rm", "Rm", "'a[`rm x`]'", "cat"]
_USES = ["$n x", "${n} x", "echo $((n))", ": ${a[n]}", "${n,,} x", "bash -c '$n x'", "n=$n bash -c '$n x'"]


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    attribute=st.sampled_from(_ATTRIBUTES),
    setter=st.sampled_from(_SETTERS),
    value=st.sampled_from(_VALUES),
    use=st.sampled_from(_USES),
    outer=st.sampled_from(["", "n=cat; ", "n=rm; "]),
)
@example(attribute="declare -i n; ", setter="read n <<< {q}", value="'a[$(rm x)]'", use="$n x", outer="")
@example(attribute="declare -l n; ", setter="n={q}", value="RM", use="$n x", outer="")
@example(attribute="", setter="trap 'n={q}' DEBUG; :", value="rm", use="$n x", outer="n=cat; ")
def test_attributes_and_later_assignments_never_hide_a_denied_program(
    tmp_path: Path, attribute: str, setter: str, value: str, use: str, outer: str
) -> None:
    command = outer + attribute + setter.format(q=value) + "; " + use
    decision = _decide(tmp_path, command, mode="bypassPermissions", deny=("Bash(rm *)",))
    if decision == "deny":
        return
    assert not _runs_rm(tmp_path, command), f"{command!r} ran rm but was decided {decision}"


_FEEDERS = ["echo 'rm x'", "printf 'rm x\\n'", "echo rm x"]
_RUNNERS = [
    "xargs -I{{}} {s} {{}}", "xargs -i {s} '{{}}'", "xargs -I% {s} %", "xargs --replace=Z {s} Z",
    "xargs -I{{}} {s} 'echo {{}}'",
    "xargs -0 -I{{}} {s} {{}}", "xargs -L1 -I{{}} {s} '{{}}'", "xargs -I{{}} env {s} '{{}}'", "xargs {s}",
    "xargs -I{{}} timeout 5 {s} '{{}}'",
]  # fmt: skip
_SHELL_C = ["sh -c", "bash -c", "bash -ec", "sh -c --", "dash -c", "rbash -c"]


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(feeder=st.sampled_from(_FEEDERS), runner=st.sampled_from(_RUNNERS), shell=st.sampled_from(_SHELL_C))
@example(feeder="echo rm x", runner="xargs -i {s} '{{}}'", shell="sh -c")
def test_input_a_runner_puts_into_a_script_is_any_program(tmp_path: Path, feeder: str, runner: str, shell: str) -> None:
    command = f"{feeder} | {runner.format(s=shell)}"
    _assert_allowed_runs_only_allowed(tmp_path, command)
    decision = _decide(tmp_path, command, mode="bypassPermissions", deny=("Bash(rm *)",))
    if decision != "deny":
        assert not _runs_rm(tmp_path, command), f"{command!r} ran rm but was decided {decision}"


# --- family 3/7: variables that choose the program, set by a builtin or a loop --------------------


@pytest.mark.parametrize(
    "command",
    [
        "for PATH in .; do ls; done",  # was allowed in default mode: runs ./ls from the project
        "read PATH <<< .; ls",
        "getopts a PATH -a; ls",
        "unset PATH; ls",  # bash then searches its default path, "." included
        "BASH_CMDS[0]=/usr/bin/rm; 0 x",  # the command hash: "0" runs /usr/bin/rm
        "read 'BASH_CMDS[0]' <<< /usr/bin/rm; 0 x",
        "printf -v 'BASH_CMDS[0]' /usr/bin/rm; 0 x",
        "mapfile -t BASH_ENV <<< x",
    ],
)
def test_a_variable_that_chooses_programs_set_at_run_time_is_opaque(tmp_path: Path, command: str) -> None:
    _never_runs_rm_unnoticed(tmp_path, command)


# --- family 7: a program named by a path is the file there ----------------------------------------


@pytest.mark.parametrize(
    "command",
    ["ln -s /usr/bin/rm ./r; ./r x", "cp /usr/bin/rm ./r && ./r x", "./lister x", "src/../lister x", "$PWD/lister x"],
)
def test_a_link_or_a_program_the_line_creates_meets_deny_rules(tmp_path: Path, command: str) -> None:
    """A repository can ship ``lister -> /usr/bin/rm``; a line can create the program it then runs."""
    project = tmp_path / "p"
    (project / "src").mkdir(parents=True)
    (project / "lister").symlink_to("/usr/bin/rm")
    assert _decide(tmp_path, command, mode="bypassPermissions", deny=("Bash(rm *)",)) == "deny"
    assert _decide(tmp_path, command, allow=("Bash(*)",), deny=("Bash(rm *)",)) == "deny"


def test_a_missing_program_alone_on_the_line_is_not_any_program(tmp_path: Path) -> None:
    """Alone on the line a missing program just fails: an allow rule naming it still holds."""
    assert _decide(tmp_path, "./tool x", allow=("Bash(./tool *)",), deny=("Bash(rm *)",)) == "allow"


# --- family 7: what a runner runs is read as a command of its own -------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "uv run awk 'BEGIN{system(\"rm x\")}'",
        "uv run python -c 'import os; os.system(\"rm x\")'",
        "npx -y sh -c 'cd . && rm x'",
        "poetry run bash -c 'X=r; ${X}m x'",
    ],
)
def test_code_a_runner_runs_meets_deny_rules(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command, mode="bypassPermissions", deny=("Bash(rm *)",)) == "deny"
    assert _decide(tmp_path, command, allow=("Bash(*)",), deny=("Bash(rm *)",)) == "deny"


@pytest.mark.parametrize(
    "command",
    [
        "npx eslint 'src/**/*.{js,ts}'",
        "uv run pytest -k 'a or b'",
        "timeout 5 npx tsc",
        "poetry run python manage.py test",
    ],
)
def test_a_runners_ordinary_arguments_are_not_read_as_code(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command, mode="bypassPermissions", deny=("Bash(rm *)",)) == "allow"


# --- family 7: environment that makes a program run another one ---------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "env 'BASH_FUNC_ls%%=() { rm x; }' bash -c ls",  # bash imports exported functions from the environment
        "env 'BASH_FUNC_cat%%=() { rm x; }' bash -c 'cat file.txt'",
    ],
)
def test_an_exported_function_in_the_environment_is_opaque(tmp_path: Path, command: str) -> None:
    assert _runs_rm(tmp_path, command), f"the attack no longer runs rm under bash: {command!r}"
    _never_runs_rm_unnoticed(tmp_path, command)


@pytest.mark.parametrize(
    "command",
    [
        "GIT_CONFIG_PARAMETERS=\"'core.fsmonitor'='rm x'\" git status",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='rm x' git status",
        "export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='rm x'; git status",
        "env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='rm x' git status",
        "GIT_DIR=elsewhere/.git git status",
    ],
)
def test_git_configuration_from_the_environment_is_opaque(tmp_path: Path, command: str) -> None:
    """The environment's form of ``git -c core.fsmonitor=rm``: git runs the monitor at ``status``."""
    _never_runs_rm_unnoticed(tmp_path, command)


# --- family 1: the shell's own variables that evaluate what is assigned to them -------------------


@pytest.mark.parametrize(
    "command",
    [
        "for OPTIND in 'a[$(rm x)]'; do :; done",  # was allowed in default mode
        "for RANDOM in 'a[$(rm x)]'; do ls; done",
        "for SECONDS in 'a[$(rm x)]'; do :; done",
        "OPTIND='a[$(rm x)]'",
        "SRANDOM='a[$(rm x)]'; ls",
        "read HISTCMD <<< 'a[$(rm x)]'",
    ],
)
def test_shell_variables_that_evaluate_their_value_never_run_rm_unnoticed(tmp_path: Path, command: str) -> None:
    assert _runs_rm(tmp_path, command), f"the attack no longer runs rm under bash: {command!r}"
    _never_runs_rm_unnoticed(tmp_path, command)


@pytest.mark.parametrize(
    "command",
    [
        "nohup nice npx sh -c '${X:-rm} x'",  # a runner after wrappers keel strips
        "timeout 9 npx sh -c '\\rm x'",
        "script -qc '\\rm x' /dev/null",  # quotes and escapes in a runner's command line
        "flock /tmp/l -c 'X=1 rm x'",
        "env -i flock /tmp/l -c 'env -- rm x'",
        'su -c "\\\\rm x"',
        "time -p ! bash -c 'rm x'",  # ! is a reserved word after time -p too
    ],
)
def test_a_runners_command_line_behind_wrappers_and_quotes_meets_deny_rules(tmp_path: Path, command: str) -> None:
    assert _decide(tmp_path, command, mode="bypassPermissions", deny=("Bash(rm *)",)) == "deny"
    assert _decide(tmp_path, command, allow=("Bash(*)",), deny=("Bash(rm *)",)) == "deny"
