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

from agentkeel.permissions import PermissionEngine
from agentkeel.permissions.bash import DYNAMIC, analyse
from agentkeel.permissions.rules import parse_rule, url_host
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
# KEEL_FUZZ_EXAMPLES=25000 pytest tests/test_permissions_props.py -k allowed_prefix: a deeper hunt
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
