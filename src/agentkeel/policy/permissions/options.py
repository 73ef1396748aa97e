"""How programs read their options, enough to find the ones that change what they run or
where they write. :data:`PROGRAMS` describes the package managers, test runners and build
tools whose allow rules are usually prefixes (``Bash(npm run test:*)``), so an option added
after the prefix (``--script-shell /tmp/evil.sh``) must not ride on the rule.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

import msgspec

from agentkeel.policy.permissions.words import DYNAMIC


class Cli(msgspec.Struct, frozen=True):
    escalating: frozenset[str]  # options an allow rule must name: they run other code or read other config
    writes: frozenset[str] = frozenset()  # options whose value is a file or directory the program writes
    short_values: str = ""  # short letters that take a value (the rest of a cluster, or the next word)
    long_values: frozenset[str] = frozenset()  # long options that take the next word when written without "="
    known: frozenset[str] = frozenset()  # harmless long options that are prefixes of escalating ones
    ends: frozenset[str] = frozenset({"--"})  # nothing after these is this program's option
    until_positional: bool = False  # npx: its options come before the command it runs
    dash_longs: bool = False  # go: -flag and --flag are the same long option
    abbreviations: bool = False  # getopt/optparse/nopt take any unambiguous prefix of a long option


_NPM = frozenset(
    {
        "--script-shell",
        "--node-options",
        "--userconfig",
        "--globalconfig",
        "--prefix",
        "--onload-script",
        "--git",
        "--shell",
        "--editor",
        "--browser",
        "--viewer",
        "--init-module",
        "--node-gyp",
        "--call",
        "-C",
        "-c",
    }
)
_NPM_KNOWN = frozenset({"--global", "--version", "--save", "--silent", "--save-dev", "--save-exact", "--verbose"})
_PIP_VALUES = frozenset(
    {
        "--index-url",
        "--extra-index-url",
        "--find-links",
        "--python",
        "--global-option",
        "--build-option",
        "--config-settings",
        "--target",
        "--prefix",
        "--root",
        "--src",
        "--log",
        "--dest",
        "--wheel-dir",
        "--report",
        "--requirement",
        "--constraint",
        "--editable",
        "--cache-dir",
        "--trusted-host",
        "--proxy",
        "--timeout",
        "--retries",
        "--exists-action",
        "--upgrade-strategy",
        "--platform",
        "--python-version",
        "--no-binary",
        "--only-binary",
    }
)
_PYTEST_VALUES = frozenset(
    {
        "--config-file",
        "--override-ini",
        "--rootdir",
        "--confcutdir",
        "--pdbcls",
        "--pastebin",
        "--basetemp",
        "--junitxml",
        "--junit-xml",
        "--log-file",
        "--resultlog",
        "--report-log",
        "--maxfail",
        "--deselect",
        "--ignore",
        "--ignore-glob",
        "--durations",
        "--tb",
        "--capture",
        "--import-mode",
        "--log-level",
        "--log-cli-level",
        "--junit-prefix",
        "--timeout",
        "--dist",
        "--numprocesses",
    }
)
_GO_VALUES = frozenset(
    {
        "-exec",
        "-toolexec",
        "-overlay",
        "-modfile",
        "-C",
        "-vettool",
        "-ldflags",
        "-gcflags",
        "-asmflags",
        "-gccgoflags",
        "-tags",
        "-o",
        "-coverprofile",
        "-cpuprofile",
        "-memprofile",
        "-blockprofile",
        "-mutexprofile",
        "-trace",
        "-outputdir",
        "-pkgdir",
        "-run",
        "-bench",
        "-count",
        "-timeout",
        "-p",
        "-mod",
        "-coverpkg",
        "-covermode",
        "-parallel",
        "-cpu",
        "-benchtime",
        "-shuffle",
        "-pgo",
        "-buildmode",
        "-compiler",
        "-installsuffix",
        "-fuzz",
        "-fuzztime",
        "-skip",
        "-list",
    }
)

PROGRAMS: dict[str, Cli] = {
    "npm": Cli(_NPM, short_values="wCc", known=_NPM_KNOWN, abbreviations=True),
    "pnpm": Cli(_NPM | {"--dir", "--config"}, short_values="wCcF", known=_NPM_KNOWN, abbreviations=True),
    "yarn": Cli(
        frozenset(
            {
                "--cwd",
                "--use-yarnrc",
                "--script-shell",
                "--prefix",
                "--modules-folder",
                "--global-folder",
                "--link-folder",
                "--node-options",
                "--userconfig",
            }
        )
    ),
    "npx": Cli(
        frozenset(
            {
                "--call",
                "-c",
                "--shell",
                "--script-shell",
                "--node-options",
                "--userconfig",
                "--globalconfig",
                "--prefix",
                "--package",
                "-p",
            }
        ),
        short_values="cp",
        until_positional=True,
        abbreviations=True,  # npm's nopt
    ),
    "pip": Cli(
        frozenset(
            {
                "--index-url",
                "-i",
                "--extra-index-url",
                "--find-links",
                "-f",
                "--python",
                "--global-option",
                "--build-option",
                "--config-settings",
                "-C",
            }
        ),
        writes=frozenset(
            {"--target", "-t", "--prefix", "--root", "--src", "--log", "--dest", "-d", "--wheel-dir", "-w", "--report"}
        ),
        short_values="rcetifCdw",
        long_values=_PIP_VALUES,
        known=frozenset({"--pre", "--proxy", "--progress-bar", "--constraint", "--force-reinstall", "--editable"}),
        abbreviations=True,
    ),
    "pytest": Cli(
        frozenset(
            {"-p", "-c", "--config-file", "--inifile", "-o", "--override-ini", "--rootdir", "--confcutdir"}
            | {"--pdbcls", "--pastebin"}
        ),
        writes=frozenset({"--basetemp", "--junitxml", "--junit-xml", "--log-file", "--resultlog", "--report-log"}),
        short_values="kmpcorWn",
        long_values=_PYTEST_VALUES,
        known=frozenset({"--co", "--collect-only", "--cov", "--cov-report", "--color", "--capture"}),
        abbreviations=True,
    ),
    "make": Cli(
        frozenset({"-f", "--file", "--makefile", "-C", "--directory", "-I", "--include-dir", "-E", "--eval"}),
        short_values="fCIEjloWO",
        long_values=frozenset({"--file", "--makefile", "--directory", "--include-dir", "--eval", "--load-average"}),
        known=frozenset({"--debug", "--dry-run", "--ignore-errors", "--environment-overrides", "--keep-going"}),
        abbreviations=True,
    ),
    "cargo": Cli(
        frozenset({"--config", "-Z", "--manifest-path", "-C"}),
        writes=frozenset({"--target-dir", "--root", "--artifact-dir", "--out-dir"}),
        short_values="pjFZC",
        long_values=frozenset(
            {"--config", "--manifest-path", "--target-dir", "--root", "--package", "--jobs", "--features"}
            | {"--target", "--bin", "--example", "--test", "--bench", "--profile", "--color", "--message-format"}
        ),
    ),
    "go": Cli(
        frozenset({"-exec", "-toolexec", "-overlay", "-modfile", "-C", "-vettool"}),
        writes=frozenset(
            {"-o", "-coverprofile", "-cpuprofile", "-memprofile", "-blockprofile", "-mutexprofile", "-trace"}
            | {"-outputdir", "-pkgdir"}
        ),
        long_values=_GO_VALUES,
        ends=frozenset({"--", "-args", "--args"}),
        dash_longs=True,
    ),
    # gradle: an init script, another build or settings file, another project runs other code
    "gradle": Cli(
        frozenset(
            {"-I", "--init-script", "-b", "--build-file", "-c", "--settings-file", "-p", "--project-dir"}
            | {"--include-build", "-g", "--gradle-user-home", "--project-cache-dir"}
        ),
        short_values="IbcpgDPx",
        long_values=frozenset(
            {"--init-script", "--build-file", "--settings-file", "--project-dir", "--include-build"}
            | {"--gradle-user-home", "--project-cache-dir", "--exclude-task", "--console", "--warning-mode"}
        ),
    ),
}
RG = Cli(
    frozenset(),
    short_values="efgtTmABCMjErd",
    long_values=frozenset(
        {"--regexp", "--file", "--glob", "--iglob", "--type", "--type-not", "--max-count", "--after-context"}
        | {"--before-context", "--context", "--max-columns", "--threads", "--encoding", "--replace", "--max-depth"}
        | {"--pre", "--pre-glob", "--type-add", "--ignore-file", "--sort", "--sortr", "--max-filesize"}
    ),
)
_ALIASES = {
    "pip3": "pip",
    "py.test": "pytest",
    "pytest-3": "pytest",
    "pnpx": "npx",
    "gmake": "make",
    "gradlew": "gradle",
    "mvnw": "mvn",
}
# runners whose ``run X`` runs the program X with the arguments after it: X's options are X's
# (``uv run pytest -p evil`` loads a plugin as ``pytest -p evil`` does)
_RUNNERS = frozenset({"uv", "poetry", "pipenv", "pdm", "hatch", "rye"})


def program(argv: list[str]) -> tuple[str, list[str]]:
    """The program an argv runs and its arguments: ``python3 -m pytest -x`` is pytest with ``-x``."""
    if not argv or DYNAMIC in argv[0]:
        return (argv[0] if argv else ""), argv[1:]
    name, args = posixpath.basename(argv[0]), argv[1:]
    if name in _RUNNERS and len(args) >= 2 and args[0] == "run" and not args[1].startswith("-"):
        if DYNAMIC in args[1]:
            return args[1], args[2:]
        name, args = posixpath.basename(args[1]), args[2:]
    elif name == "uvx" and args and not args[0].startswith("-") and DYNAMIC not in args[0]:
        name, args = posixpath.basename(args[0]), args[1:]
    if name.startswith("python") and re.fullmatch(r"python[0-9.]*", name) and len(args) >= 2 and args[0] == "-m":
        name, args = args[1], args[2:]
    if name.startswith("pip") and re.fullmatch(r"pip[0-9.]+", name):
        name = "pip"
    return _ALIASES.get(name, name), args


def read_options(cli: Cli, args: list[str]) -> Iterator[tuple[str, str | None]]:
    """(option, value) pairs in order; a positional argument comes as ("", word)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in cli.ends:
            return
        if a.startswith("--") or (cli.dash_longs and a.startswith("-") and a != "-"):
            key, eq, value = a.partition("=")
            if cli.dash_longs and key.startswith("--"):
                key = key[1:]
            if cli.abbreviations:
                key = _full_name(cli, key)
            if not eq and key in cli.long_values:
                i += 1
                yield key, args[i] if i < len(args) else DYNAMIC
            else:
                yield key, value if eq else None
        elif a.startswith("-") and len(a) > 1:
            for j, ch in enumerate(a[1:], start=2):
                if ch in cli.short_values:
                    value = a[j:]
                    if not value:
                        i += 1
                        value = args[i] if i < len(args) else DYNAMIC
                    yield f"-{ch}", value
                    break
                yield f"-{ch}", None
        else:
            if cli.until_positional:
                return
            yield "", a
        i += 1


def _full_name(cli: Cli, key: str) -> str:
    """``--out`` as ``--output`` when it is the one long option keel knows of the program that
    starts so (getopt_long reads it so; an ambiguous prefix stays as written: the tool refuses it)."""
    names = cli.escalating | cli.writes | cli.long_values | cli.known
    if not key.startswith("--") or len(key) < 3 or key in names:
        return key
    hits = [n for n in names if n.startswith(key)]
    return hits[0] if len(hits) == 1 else key


def _named(cli: Cli, key: str, names: frozenset[str]) -> str | None:
    """``key`` as one of ``names``, directly or (for programs that take them) as an abbreviation."""
    if key in names:
        return key
    if cli.abbreviations and key.startswith("--") and len(key) >= 3 and key not in cli.known:
        hits = [n for n in names if n.startswith(key)]
        if hits:
            return hits[0]
    return None


# maven: a plugin goal named on the command line (``exec:exec``, ``antrun:run``) runs what its
# properties say; these options read other poms, settings or extensions
_MAVEN_FILES = frozenset(
    {"-f", "--file", "-s", "--settings", "-gs", "--global-settings", "-t", "--toolchains", "-gt"}
    | {"--global-toolchains", "-l", "--log-file", "-emp", "--encrypt-master-password"}
)
_MAVEN_FLAGS = frozenset({"-fae", "-ff", "-fn", "-llr"})  # flags that start like a file option (-f...)
_MAVEN_RISKY_PROPERTY = re.compile(r"-D(exec\.|[^=]*ext\.class\.path|argLine|[^=]*jvm|[^=]*agent)", re.I)


def _maven(args: list[str]) -> list[str]:
    found: list[str] = []
    for a in args:
        key = a.split("=", 1)[0]
        file_option = key in _MAVEN_FILES or (key[:2] in ("-f", "-s", "-t", "-l") and key not in _MAVEN_FLAGS)
        if file_option or _MAVEN_RISKY_PROPERTY.match(a):
            found.append(key)
        elif not a.startswith("-") and ":" in a:
            found.append(a)  # a plugin goal: group:artifact:goal or prefix:goal
    return found


def escalations(argv: list[str]) -> list[str]:
    name, args = program(argv)
    if name == "mvn":
        return _maven(args)
    cli = PROGRAMS.get(name)
    if cli is None:
        return []
    found: list[str] = []
    for key, value in read_options(cli, args):
        if not key:
            if name == "make" and value is not None and "=" in value and not value.startswith("="):
                found.append(value)  # make CC=/tmp/evil: a variable override runs what the Makefile runs
            continue
        if name == "pytest" and key == "-p" and value is not None and value.startswith("no:"):
            continue  # disables a plugin
        if name == "pnpm" and key.startswith("--config."):
            found.append(key)
            continue
        if name == "go" and key == "-ldflags" and value is not None and re.search(r"-ext(ld|ar)", value):
            found.append("-ldflags")  # -extld runs another linker
            continue
        hit = _named(cli, key, cli.escalating)
        if hit is not None:
            found.append(hit)
    return found


def write_targets(argv: list[str]) -> list[str]:
    """Files and directories the program is told to write (output, log and install locations)."""
    name, args = program(argv)
    cli = PROGRAMS.get(name)
    if cli is None or not cli.writes:
        return []
    out: list[str] = []
    for key, value in read_options(cli, args):
        if key and _named(cli, key, cli.writes) is not None:
            out.append(value if value is not None else DYNAMIC)
    return out
