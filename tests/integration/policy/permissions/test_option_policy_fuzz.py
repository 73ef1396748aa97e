"""Differential fuzzing of the per-program option policy (issue #30, families 5, 6 and 8): each
generator builds members of one family, keel decides them, and every command keel allows runs
under ``strace -f`` through ``/bin/bash``. Nothing may run that the decision did not account for
(a program other than the ones keel read), nothing may be written, and neither the Read-denied
``.env`` files nor the secret outside the project may be opened.

KEEL_FUZZ_EXAMPLES=2000 pytest tests/integration/policy/permissions/test_option_policy_fuzz.py: a deeper hunt."""

from __future__ import annotations

import itertools
import os
import posixpath
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from agentkeel.policy.permissions import PermissionEngine
from agentkeel.policy.permissions.bash import analyse
from tests.integration.policy.permissions.test_properties import TOOLS  # the props oracle's tool table

FUZZ_EXAMPLES = int(os.environ.get("KEEL_FUZZ_EXAMPLES", "150"))
SECRET = "keel-outside-secret.txt"
STRACE = shutil.which("strace")

pytestmark = pytest.mark.skipif(STRACE is None, reason="strace is not installed")


# --- the scratch world -------------------------------------------------------------------------


def _world(tmp_path: Path) -> Path:
    """A git project with a Read-denied .env, a big file (sort spills it to compressed temp
    files with -S1K), a NUL-separated list naming the outside secret, and a traced stand-in
    ``pwn`` on PATH that any payload names. Built once per test (hypothesis reuses tmp_path)."""
    project = tmp_path / "p"
    if project.exists():
        return project
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    (tmp_path / SECRET).write_text("outside secret\n")
    shims = tmp_path / "shims"
    shims.mkdir()
    pwn = shims / "pwn"
    pwn.write_text("#!/bin/sh\ncat >/dev/null\n")
    pwn.chmod(0o755)
    (project / "src").mkdir(parents=True)
    (project / "docs").mkdir()
    (project / "README.md").write_text("# project\nline b\nline a\n")
    (project / "src" / "app.py").write_text("print('hi')\n")
    (project / "docs" / "guide.md").write_text("# guide\n")
    (project / ".env").write_text("API_KEY=obviously-fake\n")
    (project / "big.txt").write_text("".join(f"{(i * 7919) % 100003}\n" for i in range(60000)))
    (project / "list0").write_bytes(f"{tmp_path / SECRET}\0.env\0".encode())
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "GIT_CONFIG_NOSYSTEM": "1"}
    for git in (
        ["git", "init", "-q"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "add", "README.md", "src", "docs"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init"],
    ):
        subprocess.run(git, cwd=project, env=env, check=True, capture_output=True)
    (project / "README.md").write_text("# project\nline b\nline a\nchanged\n")
    return project


def _engine(project: Path, rules: tuple[str, ...] = ()) -> PermissionEngine:
    engine = PermissionEngine(cwd=str(project), home=str(project.parent / "home"), scratch_dirs=())
    engine.add(["Read(**/.env)"], "deny", "fuzz")
    engine.add(rules, "allow", "fuzz")
    return engine


_EXEC = re.compile(r'^\d+\s+execve\("([^"]*)", .*\) = 0$')
_OPEN = re.compile(r'^\d+\s+(?:open|openat|creat)\((?:AT_FDCWD, |\d+, )?"([^"]*)", ([A-Z_|]+)[^)]*\) = \d+')


def _unprivileged() -> tuple[str, ...]:
    """As root, the real programs run in a user namespace of their own: a command keel wrongly allowed
    must not be able to change the machine (``date MMDDhhmm`` set this machine's clock once)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return ()
    probe = subprocess.run(["unshare", "-r", "true"], capture_output=True, check=False)
    return ("unshare", "-r") if probe.returncode == 0 else ()


_UNPRIVILEGED = _unprivileged()


def check_run(project: Path, command: str, *, writes_ok: bool = False, cwd: Path | None = None) -> list[str]:
    """Run an allowed command under a traced /bin/bash (in ``cwd``, the shell's directory, the
    project by default) and fail on anything the decision did not account for: a program keel
    did not read, a write, an open of a Read-denied file or of the secret outside the project."""
    event("allowed: ran under strace")
    tmp = project.parent
    cwd = cwd or project
    analysis = analyse(command, str(cwd), str(tmp / "home"))
    programs = {"bash"} | {posixpath.basename(c.argv[0]) for c in analysis.commands if c.argv}
    programs |= {"grep" for p in programs if p in ("egrep", "fgrep")}  # scripts that exec grep -E / -F
    log = tmp / "strace.log"
    log.unlink(missing_ok=True)
    env = {
        "PATH": f"{tmp / 'shims'}:/usr/bin:/bin",
        "HOME": str(tmp / "home"),
        "TMPDIR": str(tmp / "tmp"),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    assert STRACE is not None
    trace = [*_UNPRIVILEGED, STRACE, "-f", "-qq", "-s", "4096", "-e", "trace=execve,open,openat,creat", "-o", str(log)]
    try:
        subprocess.run(
            [*trace, "/bin/bash", "-c", command], cwd=cwd, env=env, capture_output=True, timeout=20, check=False
        )
    except subprocess.TimeoutExpired:
        pass
    ran, opened, wrote = [], [], []
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if m := _EXEC.match(line):
            ran.append(posixpath.basename(m.group(1)))
        elif m := _OPEN.match(line):
            path, flags = m.group(1), m.group(2)
            if posixpath.basename(path) == ".env" or SECRET in path:
                opened.append(path)
            if (
                re.search(r"O_WRONLY|O_RDWR|O_CREAT", flags)
                and not path.startswith(("/dev/", str(tmp / "tmp")))
                and "/.git/" not in f"/{path}"  # git status and diff refresh the index: accounted for
            ):
                wrote.append(path)
    assert all(r in programs for r in ran), (
        f"{command!r} was allowed but ran {sorted(set(ran))} (keel read {sorted(programs)})"
    )
    assert not opened, f"{command!r} was allowed but opened {opened}"
    assert writes_ok or not wrote, f"{command!r} was allowed but wrote {wrote}"
    return ran


def _decide(project: Path, command: str, rules: tuple[str, ...] = (), cwd: Path | None = None) -> str:
    engine = _engine(project, rules)
    return engine.decide("Bash", {"command": command}, TOOLS["Bash"], shell_cwd=str(cwd or project)).decision


def _abbreviated(option: str, cut: int) -> str:
    """A prefix of a long option, three characters at least (``--c``)."""
    return option[: max(3, min(len(option), cut))]


# --- family 5: abbreviated dangerous long options ----------------------------------------------

# (program words, dangerous long option, its value or None, what follows)
DANGEROUS = [
    (["sort", "-S1K"], "--compress-program", "pwn", ["big.txt"]),
    (["sort"], "--output", "owned.txt", ["README.md"]),
    (["sort", "-S1K"], "--temporary-directory", "docs", ["big.txt"]),
    (["wc"], "--files0-from", "list0", []),
    (["du"], "--files0-from", "list0", []),
    (["git", "diff"], "--output", "owned.txt", []),
    (["git", "log"], "--output", "owned.txt", ["-1", "-p"]),
    (["git", "show"], "--output", "owned.txt", []),
    (["diff"], "--paginate", None, ["README.md", "docs/guide.md"]),
    (["sort", "-S1K"], "--files0-from", "list0", []),
]
NOISE = ["-n", "-r", "-u", "-c", "-l", "-s", "--", "-1", "--stat", "--check"]


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    which=st.integers(0, len(DANGEROUS) - 1),
    cut=st.integers(3, 30),
    joined=st.booleans(),
    noise=st.lists(st.sampled_from(NOISE), max_size=2),
    late=st.booleans(),
)
@example(which=0, cut=14, joined=True, noise=[], late=False)  # sort -S1K --compress-prog=pwn big.txt
@example(which=5, cut=6, joined=True, noise=[], late=False)  # git diff --outp=owned.txt
def test_an_allowed_command_with_an_abbreviated_option_does_nothing_forbidden(
    tmp_path: Path, which: int, cut: int, joined: bool, noise: list[str], late: bool
) -> None:
    project = _world(tmp_path)
    words, option, value, rest = DANGEROUS[which]
    name = _abbreviated(option, cut)
    opt = [name] if value is None else ([f"{name}={value}"] if joined else [name, value])
    argv = [*words, *noise, *rest, *opt] if late else [*words, *noise, *opt, *rest]  # getopt permutes
    command = " ".join(argv)
    if _decide(project, command) == "allow":
        check_run(project, command)
    (project / "owned.txt").unlink(missing_ok=True)


# the same options under an allow rule for the program: the rule must name the option
RULED = [
    ("tar", ["tar", "-xf", "a.tar"], "--to-command", "pwn"),
    ("tar", ["tar", "-cf", "/dev/null", "src"], "--checkpoint-action", "exec=pwn"),
    ("tar", ["tar", "-cf", "/dev/null", "src"], "--use-compress-program", "pwn"),
    ("sort", ["sort", "-S1K", "big.txt"], "--compress-program", "pwn"),
]


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, len(RULED) - 1), cut=st.integers(3, 30), joined=st.booleans())
@example(which=0, cut=9, joined=True)  # tar -xf a.tar --to-comm=pwn
def test_under_an_allow_rule_an_abbreviated_option_does_nothing_the_rule_forbids(
    tmp_path: Path, which: int, cut: int, joined: bool
) -> None:
    project = _world(tmp_path)
    if not (project / "a.tar").exists():
        subprocess.run(["tar", "-cf", "a.tar", "src"], cwd=project, check=True)
    program, argv, option, value = RULED[which]
    name = _abbreviated(option, cut)
    command = " ".join([*argv, f"{name}={value}" if joined else f"{name} {value}"])
    if _decide(project, command, (f"Bash({program} *)",)) == "allow":
        check_run(project, command, writes_ok=True)  # the rule allows tar to extract


# --- family 6: files read through options ------------------------------------------------------

# (program words, short letter or "", long option or "", what follows)
READERS = [
    (["date"], "f", "--file", []),
    (["date"], "r", "--reference", []),
    (["grep"], "f", "--file", ["README.md"]),
    (["grep", "-r", "x"], "", "--exclude-from", ["src"]),
    (["diff"], "", "--from-file", ["README.md"]),
    (["diff"], "", "--to-file", ["README.md"]),
    (["diff", "-r"], "X", "--exclude-from", ["src", "docs"]),
    (["git", "blame"], "", "--contents", ["README.md"]),
    (["git", "blame"], "S", "--ignore-revs-file", ["README.md"]),
    (["sort", "-R"], "", "--random-source", ["README.md"]),
    (["du"], "X", "--exclude-from", ["src"]),
    (["file"], "m", "--magic-file", ["README.md"]),
    (["git", "diff"], "O", "--orderfile", []),
]
FORMS = ["attached", "short", "long=", "long", "abbrev=", "abbrev"]


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    which=st.integers(0, len(READERS) - 1),
    form=st.sampled_from(FORMS),
    target=st.sampled_from([".env", "OUTSIDE", "./.env", "src/../.env", "README.md"]),
    cut=st.integers(3, 20),
)
@example(which=0, form="attached", target=".env", cut=3)  # date -f.env
@example(which=7, form="abbrev=", target="OUTSIDE", cut=6)  # git blame --cont=/abs
def test_an_allowed_option_file_is_never_a_denied_or_outside_file(
    tmp_path: Path, which: int, form: str, target: str, cut: int
) -> None:
    project = _world(tmp_path)
    words, short, long, rest = READERS[which]
    path = str(tmp_path / SECRET) if target == "OUTSIDE" else target
    if form in ("attached", "short") and not short:
        form = "long="
    name = _abbreviated(long, cut) if form.startswith("abbrev") else long
    opt = {
        "attached": [f"-{short}{path}"],
        "short": [f"-{short}", path],
        "long=": [f"{name}={path}"],
        "long": [name, path],
        "abbrev=": [f"{name}={path}"],
        "abbrev": [name, path],
    }[form]
    command = " ".join([*words, *opt, *rest])
    if _decide(project, command) == "allow":
        check_run(project, command)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    option=st.sampled_from(["--recursive", "--dereference-recursive", "--directories=recurse", "-d recurse"]),
    cut=st.integers(3, 24),
    flags=st.sampled_from(["", "-n", "-l", "-i"]),
)
@example(option="--recursive", cut=7, flags="")  # grep --recur API_KEY .
def test_an_allowed_abbreviated_recursion_reads_nothing_denied(
    tmp_path: Path, option: str, cut: int, flags: str
) -> None:
    project = _world(tmp_path)
    if option.startswith("--directories="):
        opt = f"{_abbreviated('--directories', cut)}={'recurse'[: max(3, cut % 8)]}"
    elif option.startswith("-d"):
        opt = f"-d {'recurse'[: max(3, cut % 8)]}"
    else:
        opt = _abbreviated(option, cut)
    command = " ".join(w for w in ["grep", flags, opt, "API_KEY", "."] if w)
    if _decide(project, command) == "allow":
        check_run(project, command)


# --- family 8: globs that expand to options ----------------------------------------------------

PLANTED = [
    "--compress-program=pwn",
    "-S1K",
    "--output=owned.txt",
    "--files0-from=list0",
    "-delete",
    "--random-source=lnk",
    "-flnk",
    "--file=lnk",
    "--exclude-from=lnk",
    "-Xlnk",
    "-r",
    "-R",
]
GLOB_COMMANDS = [
    "sort {g}",
    "sort -n {g}",
    "grep x {g}",
    "grep -n x {g}",
    "cat {g}",
    "wc -l {g}",
    "du {g}",
    "find {g} -name a.txt",
    "ls {g}",
    "head -n1 {g}",
    "diff {g}",
    "file {g}",
    "date -f {g}",
]
GLOBS = ["*", "?*", "-*", "*1*", "[-]*", "*.txt", "./*", "-- *", "*=*"]
_dirs = itertools.count()


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    planted=st.lists(st.sampled_from(PLANTED), min_size=1, max_size=4, unique=True),
    template=st.sampled_from(GLOB_COMMANDS),
    glob=st.sampled_from(GLOBS),
    link=st.booleans(),
)
@example(planted=["--compress-program=pwn", "-S1K"], template="sort {g}", glob="*", link=False)
@example(planted=["-flnk"], template="grep x {g}", glob="*", link=True)
@example(planted=["-r"], template="cat {g}", glob="*", link=True)  # cat reads lnk, a link out of the project
def test_an_allowed_glob_that_expands_to_options_does_nothing_forbidden(
    tmp_path: Path, planted: list[str], template: str, glob: str, link: bool
) -> None:
    project = _world(tmp_path)
    name = f"inj{next(_dirs)}"
    d = project / name
    d.mkdir()
    for f in planted:
        (d / f).write_text("x\n")
    shutil.copy(project / "big.txt", d / "big.txt")
    (d / "a.txt").write_text("a\n")
    if link:
        (d / "lnk").symlink_to(tmp_path / SECRET)
    (d / "list0").write_bytes(f"{tmp_path / SECRET}\0".encode())
    command = template.format(g=glob)  # after an earlier `cd inj`: the Bash tool keeps its directory
    try:
        if _decide(project, command, cwd=d) == "allow":
            check_run(project, command, cwd=d)
    finally:
        shutil.rmtree(d)


# --- the option tables against the programs themselves ----------------------------------------

from agentkeel.policy.permissions.safeoptions import SAFE_OPTIONS  # noqa: E402

_TABLED = sorted(n for n in SAFE_OPTIONS if shutil.which(n))


@st.composite
def _tabled_command(draw: st.DrawFn) -> str:
    """A modelled read-only program with options drawn from its table (and letters and names it
    does not have), values that are the secret outside, a Read-denied file or a plain word."""
    name = draw(st.sampled_from(_TABLED))
    spec = SAFE_OPTIONS[name]
    value = st.sampled_from(["OUTSIDE", ".env", "README.md", "3", "x"])
    words: list[str] = [name]
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["short", "short", "long", "any-letter"]))
        if kind == "long":
            longs = sorted(spec.longs | spec.long_values | spec.long_reads) or ["--help"]
            opt = _abbreviated(draw(st.sampled_from(longs)), draw(st.integers(3, 30)))
            words += draw(st.sampled_from([[opt], [f"{opt}={draw(value)}"], [opt, draw(value)]]))
        else:
            letters = (
                (spec.flags + spec.values + spec.reads)
                if kind == "short"
                else "abcdefghijklmnopqrstuvwxyzABCDEFIJLMNOPRSTUXZ0"
            )
            cluster = "".join(draw(st.lists(st.sampled_from(letters), min_size=1, max_size=3)))
            words += draw(
                st.sampled_from([[f"-{cluster}"], [f"-{cluster}{draw(value)}"], [f"-{cluster}", draw(value)]])
            )
    words += draw(st.lists(st.sampled_from(["README.md", "src/app.py", "OUTSIDE", ".env"]), max_size=2))
    return " ".join(words)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=_tabled_command())
@example(command="date -fOUTSIDE")
@example(command="sort --random-source OUTSIDE README.md")
def test_the_option_tables_agree_with_what_the_programs_open(tmp_path: Path, command: str) -> None:
    """What keel believes of each option (flag, value, file read, dangerous) against what the
    program does: a value keel took for a word must not be a file the program opens."""
    project = _world(tmp_path)
    command = command.replace("OUTSIDE", str(tmp_path / SECRET))
    if _decide(project, command) == "allow":
        check_run(project, command)


# --- family 13: "always allow" suggestions against the real runners ----------------------------
# An approved command made of a real program that can run other programs (installed here: env,
# nice, timeout, nohup, setsid, stdbuf, xargs, find -exec, flock, git) around a harmless one; the
# rule keel suggests for it is added, and then every extension of that rule's words the generator
# builds (the rule's own prefix, then a payload that names ``pwn``) is decided under it. What is
# allowed runs for real under strace: ``pwn`` must never run. A suggestion that ended at a runner
# (``Bash(env *)``) would admit ``env pwn``.
_RUNNER_FORMS = (
    "env {inner}",
    "env LC_ALL=C {inner}",
    "nice -n 5 {inner}",
    "timeout 5 {inner}",
    "nohup {inner}",
    "setsid {inner}",
    "stdbuf -oL {inner}",
    "flock /tmp/keel-fuzz.lock {inner}",
    "xargs {inner}",
    "find . -maxdepth 0 -exec {inner} ;",
    "git -c core.pager=cat {inner}",
)
_INNERS = ("ls", "ls -la", "cat README.md", "wc -l README.md", "git status", "echo hi", "head -1 README.md")
_PAYLOADS = ("pwn", "pwn -x", "sh -c pwn", "bash -c 'pwn'", "env pwn", "xargs pwn", "-- pwn", "-exec pwn ;")


@given(
    form=st.sampled_from(_RUNNER_FORMS),
    inner=st.sampled_from(_INNERS),
    payload=st.sampled_from(_PAYLOADS),
    keep=st.integers(0, 4),
)
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(form="env {inner}", inner="ls", payload="pwn", keep=0)
@example(form="nice -n 5 {inner}", inner="ls", payload="sh -c pwn", keep=3)
def test_always_allow_suggestions_never_admit_another_program(
    tmp_path: Path, form: str, inner: str, payload: str, keep: int
) -> None:
    project = _world(tmp_path)
    approved = form.format(inner=inner)
    suggested = _engine(project).decide("Bash", {"command": approved}, TOOLS["Bash"]).suggestions
    for rule in suggested:
        spec = rule[len("Bash(") : -1]
        prefix = spec[:-2] if spec.endswith(" *") else spec
        words = prefix.split()
        # the rule's prefix, or a shorter part of it where the rule is exact, then the payload
        head = " ".join(words if spec.endswith(" *") else words[: max(1, len(words) - keep)])
        command = f"{head} {payload}"
        if _decide(project, command, (rule,)) == "allow":
            event("family 13: allowed under the suggestion")
            ran = check_run(project, command)
            assert "pwn" not in ran, f"{rule} (suggested for {approved!r}) admitted {command!r}, which ran pwn"
