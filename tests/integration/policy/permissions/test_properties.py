"""Property-based tests: an allowed prefix plus arbitrary shell syntax never reaches ``allow``
unless every part bash actually executes is allowed (bash itself is the oracle, with traced
stand-ins for the programs); and the matcher never crashes on any input."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentkeel.policy.permissions import PermissionEngine
from agentkeel.policy.permissions.bash import DYNAMIC, analyse
from agentkeel.policy.permissions.rules import parse_rule, url_host
from agentkeel.tools import builtin_tools

TOOLS = {t.name: t for t in builtin_tools()}
PROGRAMS = ("git", "ls", "rm", "curl", "cat", "touch", "head")
WRAPPERS = ("xargs", "env", "timeout")  # real programs, so what they run resolves to the traced stand-ins
FRAGMENTS = [
    ";",
    "&&",
    "||",
    "|",
    "&",
    "\n",
    "$(",
    ")",
    "`",
    "<(",
    "'",
    '"',
    " ",
    " ",
    " ",
    "rm",
    "curl",
    "git",
    "ls",
    "status",
    "-la",
    "-rf",
    "x",
    "${IFS}",
    "eval",
    "bash -c",
    "xargs",
    "{",
    "}",
    "(",
    ">",
    "<",
    "#",
    "\\",
    "=",
    "X=",
    "$X",
    "touch",
    "cat",
    "*",
    "?",
    "~",
    "..",
    "/",
    "!",
    "$'\\x72m'",
    "exec",
    "env",
    "timeout 1",
    # blanks and escapes where tree-sitter-bash and bash have been found to disagree
    "\\\n",
    "\\\r\n",
    "\r",
    "\x0b",
    "\x0c",
    "\xa0",
    "\u2028",
    "\t",
    "\\rm",
    "r\\m",
    "<<",
    "EOF",
]
# a deeper hunt: KEEL_FUZZ_EXAMPLES=25000 pytest <this file> -k allowed_prefix
FUZZ_EXAMPLES = int(os.environ.get("KEEL_FUZZ_EXAMPLES", "400"))


def _engine(project: Path) -> PermissionEngine:
    engine = PermissionEngine(cwd=str(project), home=str(project.parent / "home"), scratch_dirs=())
    engine.add(["Bash(git status)", "Bash(ls *)"], "allow", "test")
    return engine


def _allowed_invocation(line: str) -> bool:
    """What the rules allow, plus keel's built-in read-only commands (the file check below
    confirms they changed nothing)."""
    words = line.split()
    return words[:2] in (["git", "status"], ["git", "diff"]) or (bool(words) and words[0] in ("ls", "cat", "head"))


PREFIXES = ["git status", "ls -la", "ls", "git diff", "cat file.txt", "head -n 1 file.txt", "ls \\\n  -la"]


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(PREFIXES), tail=st.lists(st.sampled_from(FRAGMENTS), max_size=12))
@example(prefix="ls -la", tail=["'", "\n", ";", "'"])  # a quoted newline and ';': one ls argument, not two programs
@example(prefix="ls -la", tail=["\\", "\\", "$'\\x72m'"])  # an escaped backslash, then $'\x72m': one ls argument
@example(prefix="git status", tail=["\n", "\\", "rm"])  # tree-sitter-bash read "\n\\rm" as an argument; bash runs rm
@example(prefix="git status", tail=["\\\r\n", "rm"])  # the grammar's CRLF continuation is an escaped CR to bash
@example(prefix="git status", tail=["\x0b", "#", ";", "rm"])  # VT: whitespace to the grammar, a letter to bash
@example(prefix="git status", tail=["'", "'", "\\rm"])  # '' then \\rm: one word to bash, two to the grammar
def test_allowed_prefix_with_arbitrary_syntax_runs_only_allowed_programs(
    tmp_path: Path, prefix: str, tail: list[str]
) -> None:
    project = tmp_path / "p"
    shims = tmp_path / "shims"
    trace = tmp_path / "trace.log"
    if not shims.exists():
        project.mkdir()
        (project / "file.txt").write_text("x")
        shims.mkdir()
        for name in PROGRAMS:
            shim = shims / name
            # printf, not echo: dash's echo would turn a literal backslash-r argument into a carriage return;
            # each invocation ends with a NUL (no argument can hold one): an argument with a newline stays one entry
            shim.write_text(f'#!/bin/sh\nprintf \'%s\\0\' "{name} $*" >> "$KEEL_TRACE"\n')
            shim.chmod(0o755)
        for name in WRAPPERS:
            real = shutil.which(name)
            assert real is not None
            (shims / name).symlink_to(real)
    command = prefix + "".join(tail)
    decision = _engine(project).decide("Bash", {"command": command}, TOOLS["Bash"])
    if decision.decision != "allow":
        return
    trace.unlink(missing_ok=True)
    before = sorted(p.name for p in project.iterdir())
    env = {"PATH": str(shims), "KEEL_TRACE": str(trace), "HOME": str(tmp_path / "home")}
    try:
        subprocess.run(["/bin/bash", "-c", command], cwd=project, env=env, capture_output=True, timeout=5, check=False)
    except subprocess.TimeoutExpired:
        pass
    ran = [line for line in trace.read_text().split("\0") if line] if trace.exists() else []
    assert all(_allowed_invocation(line) for line in ran), f"{command!r} was allowed but ran {ran}"
    assert sorted(p.name for p in project.iterdir()) == before, f"{command!r} was allowed but changed files"


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200), rule=st.text(max_size=60))
def test_matcher_never_crashes(tmp_path: Path, text: str, rule: str) -> None:
    engine = PermissionEngine(cwd=str(tmp_path), home=str(tmp_path))
    for kind in ("allow", "deny", "ask"):
        engine.add([rule, f"Bash({rule})", f"Read({rule})", f"WebFetch(domain:{rule})"], kind, "fuzz")  # type: ignore[arg-type]
    for tool, tool_input in (
        ("Bash", {"command": text}),
        ("Read", {"file_path": text}),
        ("Edit", {"file_path": text, "old_string": "a", "new_string": "b"}),
        ("Glob", {"pattern": text}),
        ("WebFetch", {"url": text}),
        ("mcp__x__y", {"q": text}),
    ):
        decision = engine.decide(tool, tool_input, TOOLS.get(tool))
        assert decision.decision in ("allow", "ask", "deny")
        assert decision.stage != "error", decision.reason  # decided, not crashed into fail-closed
    try:
        parse_rule(text, "allow", "fuzz")
    except ValueError:
        pass
    url_host(text)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=10), st.one_of(st.none(), st.integers(), st.text(max_size=20)), max_size=4))
def test_any_input_shape_gets_a_decision(tool_input: dict[str, object]) -> None:
    engine = PermissionEngine(cwd=os.getcwd())
    for name in ("Bash", "Read", "Write", "WebFetch", "Task", "Skill"):
        assert engine.decide(name, tool_input, TOOLS.get(name)).decision in ("allow", "ask", "deny")


# --- what keel reads is what bash runs ---------------------------------------------------------
WORD_PIECES = ["a", "b", "rm", "-f", "x.txt", "'", '"', "\\", " ", "\t", "\n", "''", '""', "'q r'", '"q r"',
               "$'\\x41'", "\\ ", "\\\n", "\\\r\n", "\r", "\x0b", "#", ";", "&&", "|", "\\'", '\\"', "$", "{",
               "}", "~", "cat ", "git ", "=", "X=1 ", ">", "<", "2>", "<<EOF\n", "\nEOF\n", "(", ")"]  # fmt: skip


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(WORD_PIECES), min_size=1, max_size=12))
@example(pieces=["'", "'", "\\", "rm"])  # cat ''\rm: one argument "rm" to bash
@example(pieces=["\n", "\\\n", "a"])  # LF then a continuation: bash runs "a" as a new command
@example(pieces=["a", "\\ ", "\\\n", "a"])  # an escaped blank, then a continuation: one word "a a"
@example(pieces=[">", "{", " ", "a"])  # cat >{ a: bash writes "{" and passes "a" to cat
def test_every_program_bash_runs_is_one_keel_read_with_the_same_arguments(tmp_path: Path, pieces: list[str]) -> None:
    """The analyser's argv against bash's: for a confidently analysed command whose words are all
    known, every traced invocation must be one of the commands keel read, argument for argument.
    This catches a split or a join the grammar makes and bash does not, before any rule is involved."""
    project, home, shims, trace = tmp_path / "p", tmp_path / "home", tmp_path / "argv-shims", tmp_path / "argv"
    if not shims.exists():
        for d in (project, home, shims):
            d.mkdir(exist_ok=True)
        for name in PROGRAMS:
            shim = shims / name
            # one file per invocation: the programs of a pipeline run at once
            shim.write_text(f'#!/bin/sh\nprintf \'%s\\0\' "{name}" "$@" > "$(mktemp "$KEEL_TRACE/run.XXXXXX")"\n')
            shim.chmod(0o755)
    command = "cat " + "".join(pieces)
    analysis = analyse(command, str(project), str(home))
    if not analysis.confident:
        return
    read = [c.argv for c in analysis.commands]
    if any(DYNAMIC in arg for argv in read for arg in argv) or any(c.globbed for c in analysis.commands):
        return  # values known only at run time, or glob expansion: not comparable
    shutil.rmtree(trace, ignore_errors=True)
    trace.mkdir()
    env = {"PATH": f"{shims}:/usr/bin:/bin", "KEEL_TRACE": str(trace), "HOME": str(home)}
    try:
        subprocess.run(["/bin/bash", "-c", command], cwd=project, env=env, capture_output=True, timeout=5, check=False)
    except subprocess.TimeoutExpired:
        pass
    ran = [f.read_bytes().decode("utf-8", "surrogateescape").split("\0")[:-1] for f in trace.iterdir()]
    assert all(argv in read for argv in ran), f"{command!r}: keel read {read}, bash ran {ran}"


# --- issue #30: one generator per family of what the analyser must not misread -----------------
# Each builds members of a family and runs them under a traced /bin/bash: whatever keel allows
# must run only what it allowed (families 1-3, brace expansion), and in bypass mode whatever runs
# a denied program must be denied (family 7). KEEL_FUZZ_EXAMPLES sets the depth for all of them.
SAFETY_PROGRAMS = (*PROGRAMS, "sort", "printf")
REAL_PROGRAMS = ("xargs", "env", "timeout", "setsid", "nohup", "nice", "stdbuf", "bash", "sh")


def _traced_world(tmp_path: Path) -> tuple[Path, Path]:
    """A project (file.txt, .env) and a directory of stand-ins that append their argv to $KEEL_TRACE."""
    project, shims = tmp_path / "p", tmp_path / "shims"
    if not shims.exists():
        project.mkdir()
        (project / "file.txt").write_text("x")
        (project / ".env").write_text("KEY=fake")
        shims.mkdir()
        for name in SAFETY_PROGRAMS:
            shim = shims / name
            shim.write_text(f'#!/bin/sh\nprintf \'%s\\0\' "{name} $*" >> "$KEEL_TRACE"\n')
            shim.chmod(0o755)
        for name in REAL_PROGRAMS:
            real = shutil.which(name) or f"/bin/{name}"
            (shims / name).symlink_to(real)
    return project, shims


def _run_traced(tmp_path: Path, command: str) -> tuple[list[str], bool]:
    """What bash ran for ``command`` (one "program args" line per invocation), and whether the
    project's files changed."""
    project, shims = _traced_world(tmp_path)
    trace = tmp_path / "trace.log"
    trace.unlink(missing_ok=True)
    before = sorted(p.name for p in project.iterdir())
    env = {"PATH": str(shims), "KEEL_TRACE": str(trace), "HOME": str(tmp_path / "home")}
    try:
        subprocess.run(["/bin/bash", "-c", command], cwd=project, env=env, capture_output=True, timeout=5, check=False)
    except subprocess.TimeoutExpired:
        pass
    ran = [line for line in trace.read_text().split("\0") if line] if trace.exists() else []
    return ran, sorted(p.name for p in project.iterdir()) != before


def _assert_allowed_runs_only_allowed(tmp_path: Path, command: str) -> None:
    project, _ = _traced_world(tmp_path)
    decision = _engine(project).decide("Bash", {"command": command}, TOOLS["Bash"])
    if decision.decision != "allow":
        return
    ran, changed = _run_traced(tmp_path, command)
    assert all(_allowed_invocation(line) for line in ran), f"{command!r} was allowed but ran {ran}"
    assert not changed, f"{command!r} was allowed but changed files"


# family 1: words bash evaluates arithmetically (subscripts, operands, offsets, names it assigns)
_PAYLOADS = ["a[$(touch pwned)]", "a[`touch pwned`]", "a[$(touch pwned)]+1", "b[a[$(touch pwned)]]"]
_ARITH_FORMS = [
    "test -v {q}", "[ -v {q} ]", "[[ -v {q} ]]", "printf -v {q} %s x", "read {q} <<< x", "read -r {q} < file.txt",
    "declare {q}=1", "typeset {q}=1", "export {q}=1", "local {q}=1", "readonly {q}=1", "[[ {q} -eq 1 ]]",
    "[[ 1 -lt {q} ]]", "(( {u} ))", "echo $(( {u} ))", "echo ${{x:{u}}}", "let {q}", "declare -i n={q}",
    "unset {q}", "echo ${{a[{u}]}}", "mapfile {q} < file.txt", "getopts a {q}", "command test -v {q}",
    "builtin printf -v {q} x", ": $[ {u} ]", "echo \"${{x:{u}:1}}\"",
]  # fmt: skip


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    form=st.sampled_from(_ARITH_FORMS),
    payload=st.sampled_from(_PAYLOADS),
    via_variable=st.booleans(),
    prefix=st.sampled_from(["", "git status; ", "cat file.txt && "]),
    quote=st.sampled_from(["'", '"']),
)
@example(form="test -v {q}", payload="a[$(touch pwned)]", via_variable=False, prefix="", quote="'")
def test_arithmetic_words_run_nothing_unallowed(
    tmp_path: Path, form: str, payload: str, via_variable: bool, prefix: str, quote: str
) -> None:
    if via_variable:  # the code sits in a variable's value: bash expands subscripts found there again
        setup, quoted, unquoted = f"V='{payload}'; ", "V", "V"
    else:
        setup, quoted, unquoted = "", f"{quote}{payload}{quote}", payload
    command = prefix + setup + form.format(q=quoted, u=unquoted)
    _assert_allowed_runs_only_allowed(tmp_path, command)


# family 2: expansions in here-document bodies
_BODY_PIECES = [
    "plain text", "$HOME", "${HOME}", "`touch pwned`", "$(touch pwned)", "${x:-`touch pwned`}", '"`touch pwned`"',
    "\\`touch pwned\\`", "\\$(touch pwned)", "$((1+2))", "$((a[$(touch pwned)]))", "${a[$(touch pwned)]}",
    "'`touch pwned`'", "$[a[`touch pwned`]]", "${x:-$(touch pwned)}", "\\\\`touch pwned`", " ", "\n",
]  # fmt: skip


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pieces=st.lists(st.sampled_from(_BODY_PIECES), min_size=1, max_size=5),
    delimiter=st.sampled_from(["EOF", "'EOF'", '"EOF"', "\\EOF", "-EOF", "- EOF"]),
    reader=st.sampled_from(["cat", "cat -n", "head -n 3", "git status; cat"]),
)
@example(pieces=["`touch pwned`"], delimiter="EOF", reader="cat")
# found by the deep run (5000 examples): the grammar reads this body as words
@example(pieces=["\\`touch pwned\\`", "'`touch pwned`'"], delimiter="EOF", reader="cat")
def test_heredoc_bodies_run_nothing_unallowed(tmp_path: Path, pieces: list[str], delimiter: str, reader: str) -> None:
    dash = delimiter.startswith("-")
    word = delimiter.lstrip("- ")
    body = "".join(pieces)
    indent = "\t" if dash else ""
    lines = "\n".join(indent + line for line in body.split("\n"))
    command = f"{reader} <<{'-' if dash else ''}{word}\n{lines}\n{indent}EOF"
    _assert_allowed_runs_only_allowed(tmp_path, command)


# family 3: assignments whose scope is a subshell, a pipeline or a part that may not run
_SCOPES = [
    "({a})", "{{ {a}; }} &", "echo | {a}", "{a} | true", "if false; then {a}; fi", "true && {a}", "false || {a}",
    "false && {a}", "while false; do {a}; done", "case x in y) {a};; esac", "for i in; do {a}; done",
    "$({a})", "echo \"$({a})\" >/dev/null", "if true; then :; else {a}; fi", "{a} :", "local {a}",
    "readonly V=cat; {a}", "until true; do {a}; done", "{{ {a}; }}", "x=$({a}; echo)",
]  # fmt: skip


_VALUES = ["cat", "head", "ls", "echo", "touch", "rm", "sh", "curl"]


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    scopes=st.lists(st.sampled_from(_SCOPES), min_size=1, max_size=3),
    name=st.sampled_from(["DEBUG", "CI", "LANG", "V"]),  # keel lets some names be set without asking
    outer=st.sampled_from(_VALUES),
    inner=st.sampled_from(_VALUES),
    use=st.sampled_from(["$V file.txt", "$V -c 'touch pwned'", "${V} file.txt", '"$V" file.txt', "ls; $V file.txt"]),
)
@example(scopes=["({a})"], name="DEBUG", outer="sh", inner="echo", use="$V -c 'touch pwned'")
def test_scoped_assignments_run_nothing_unallowed(
    tmp_path: Path, scopes: list[str], name: str, outer: str, inner: str, use: str
) -> None:
    middle = "; ".join(s.format(a=f"V={inner}") for s in scopes)
    command = f"V={outer}; {middle}; {use}".replace("V", name)
    _assert_allowed_runs_only_allowed(tmp_path, command)


# family 7: in bypass mode a deny rule on a program holds for every way of running it
_RUN_RM = [
    "rm x", "coproc rm x", "{{rm,x}}", "../shims/[r]m x", "../shims/r? x", "echo rm x | bash", "bash -c -- 'rm x'",
    "sh -c 'rm x'", "env -C . rm x", "env -- rm x", "xargs --max-procs 1 rm < /dev/null", "xargs -P1 rm < /dev/null",
    "echo ${{x=`rm x`}}", "echo ${{x:-$(rm x)}}", "setsid rm x", "nohup rm x", "timeout --signal=KILL 5 rm x",
    "nice -n 1 rm x", "stdbuf -oL rm x", "command rm x", "exec rm x", "time rm x", "eval 'rm x'", "trap 'rm x' EXIT",
    "X=rm; (X=echo); $X x", "X=rm; echo | X=echo; $X x", "X=rm; false && X=echo; $X x", "cat <<EOF | bash\nrm x\nEOF",
    "bash <<< 'rm x'", "sh -ec 'rm x'", "test -v 'a[$(rm x)]'", "printf -v 'a[`rm x`]' x", "(( a[$(rm x)] ))",
    "cat <<EOF\n`rm x`\nEOF", "X=rm; readonly X; X=echo; $X x", "X=rm; local X=echo; $X x", "r''m x", "\\rm x",
    "$'rm' x", "env X=1 rm x", "builtin eval 'rm x'", "V='a[$(rm x)]'; echo $((V))", "{{ rm x; }}", "! rm x",
]  # fmt: skip


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    form=st.sampled_from(_RUN_RM),
    prefix=st.sampled_from(["", "git status; ", "ls && ", "cd . && "]),
    suffix=st.sampled_from(["", "; ls", " || true", " 2>/dev/null"]),
)
@example(form="coproc rm x", prefix="", suffix="")
def test_in_bypass_mode_a_deny_rule_holds_for_every_way_of_running_the_program(
    tmp_path: Path, form: str, prefix: str, suffix: str
) -> None:
    project, _ = _traced_world(tmp_path)
    engine = PermissionEngine(cwd=str(project), mode="bypassPermissions", home=str(tmp_path / "home"), scratch_dirs=())
    engine.add(["Bash(rm *)"], "deny", "test")
    command = prefix + form.format() + suffix
    decision = engine.decide("Bash", {"command": command}, TOOLS["Bash"])
    ran, _ = _run_traced(tmp_path, command)
    if any(line.split(" ", 1)[0] == "rm" for line in ran):
        assert decision.decision == "deny", (
            f"{command!r} ran {ran} but was decided {decision.decision}: {decision.reason}"
        )


# brace expansion (family 6): a brace word that bash expands into a Read-denied file
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    left=st.sampled_from(["", ".", ".e", "'.'", '".e"', "\\."]),
    alternatives=st.lists(
        st.sampled_from(["", "e", "en", "env", ".env", "nv", "v", "x", "'e'", "\\,"]), min_size=2, max_size=3
    ),
    right=st.sampled_from(["", "nv", "v", "env", "'nv'", "{v,}", "{v,x}"]),
    mode=st.sampled_from(["default", "bypassPermissions", "acceptEdits"]),
    reader=st.sampled_from(["cat", "head", "cat file.txt"]),
)
@example(left=".", alternatives=["e", ""], right="nv", mode="bypassPermissions", reader="cat")
def test_brace_expansion_never_reads_a_denied_file(
    tmp_path: Path, left: str, alternatives: list[str], right: str, mode: str, reader: str
) -> None:
    project, _ = _traced_world(tmp_path)
    command = f"{reader} {left}{{{','.join(alternatives)}}}{right}"
    ran, _ = _run_traced(tmp_path, command)
    if not any(".env" in line.split(" ")[1:] for line in ran):
        return
    engine = PermissionEngine(cwd=str(project), mode=mode, home=str(tmp_path / "home"), scratch_dirs=())  # type: ignore[arg-type]
    engine.add(["Bash(cat *)", "Bash(head *)"], "allow", "test")
    engine.add(["Read(./.env)"], "deny", "test")
    decision = engine.decide("Bash", {"command": command}, TOOLS["Bash"])
    assert decision.decision != "allow", f"{command!r} reads .env past Read(./.env): {decision.reason}"


# family 7, composed: a way of naming rm, inside any chain of wrappers, shells and evaluations
_RM_CORES = ["rm x", "{rm,x}", "../shims/[r]m x", "../shims/r? x", "r''m x", "\\rm x", "$'rm' x", "${V:-rm} x",
             "$(echo rm) x", "`echo rm` x", "\"rm\" x", "r{m,} x"]  # fmt: skip
_RM_WRAPS = [
    "command {c}", "time {c}", "nohup {c}", "setsid {c}", "timeout 5 {c}", "timeout --signal=KILL 5 {c}",
    "nice -n 1 {c}", "nice -5 {c}", "stdbuf -oL {c}", "env {c}", "env -C . {c}", "env --chdir=. {c}", "env X=1 {c}",
    "env -u X {c}", "env -- {c}", "xargs --max-procs 1 {c} < /dev/null", "xargs -P1 {c} < /dev/null",
    "bash -c -- {q}", "sh -c {q}", "bash -ec {q}", "eval {q}", "echo {q} | bash", "echo {q} | sh -s", "bash <<< {q}",
    "coproc {c}", "{{ {c}; }}", "( {c} )", "if true; then {c}; fi", "trap {q} EXIT", "cat <<EOF | sh\n{c}\nEOF",
    "echo ${{x=`{c}`}}", "cat <<EOF\n`{c}`\nEOF", "test -v {a}", "printf -v {a} x", "read {a} <<< x", "(( {u} ))",
    "V={a}; echo $((V))", "true && {c}", "false || {c}", "{c} | cat", "builtin eval {q}", "exec {c}",
]  # fmt: skip


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    core=st.sampled_from(_RM_CORES),
    wraps=st.lists(st.sampled_from(_RM_WRAPS), max_size=3),
    prefix=st.sampled_from(["", "git status; ", "V=rm; "]),
)
@example(core="rm x", wraps=["setsid {c}", "env -C . {c}"], prefix="")
def test_composed_ways_of_running_a_denied_program_are_denied(
    tmp_path: Path, core: str, wraps: list[str], prefix: str
) -> None:
    import shlex

    command = core
    for wrap in wraps:
        command = wrap.format(
            c=command,
            q=shlex.quote(command),
            a=shlex.quote(f"a[$({command})]"),
            u=f"a[$({command})]",
        )
    command = prefix + command
    project, _ = _traced_world(tmp_path)
    engine = PermissionEngine(cwd=str(project), mode="bypassPermissions", home=str(tmp_path / "home"), scratch_dirs=())
    engine.add(["Bash(rm *)"], "deny", "test")
    decision = engine.decide("Bash", {"command": command}, TOOLS["Bash"])
    if decision.decision == "deny":
        return
    ran, _ = _run_traced(tmp_path, command)
    assert not any(line.split(" ", 1)[0] == "rm" for line in ran), (
        f"{command!r} ran {ran} but was decided {decision.decision}: {decision.reason}"
    )
