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


# --- the read-only programs keel runs without a rule ------------------------------------------
#
# Each is modelled option by option: an option keel does not know makes the command ask, so a
# new option (or a letter that takes a value keel did not know of) cannot slip a read or a
# program past the check. GNU programs take any unambiguous prefix of a long option; any
# prefix of a ``bad`` option counts as that option.


class Opts(msgspec.Struct, frozen=True):
    flags: str = ""  # short letters without a value
    values: str = ""  # short letters with a value (the rest of the word, or the next word)
    reads: str = ""  # short letters whose value is a file the program reads
    optional: str = ""  # short letters with an optional value, attached only (date -Iseconds)
    bad: str = ""  # short letters that run, write or read files named elsewhere
    longs: frozenset[str] = frozenset()  # long options without a value (or with an optional =value)
    long_values: frozenset[str] = frozenset()  # long options with a value (=value or the next word)
    long_reads: frozenset[str] = frozenset()  # long options whose value is a file read
    long_bad: frozenset[str] = frozenset()
    abbreviations: bool = True  # getopt_long: a unique prefix of a long option is that option
    digits: bool = False  # head -5, grep -3: a number as an option
    value_last: bool = False  # tree: a letter with a value ends its cluster and takes the next word


class Parsed(msgspec.Struct):
    options: list[tuple[str, str | None]]  # (option as its full name, value)
    positional: list[str]
    reads: list[str]  # files named by options the program reads
    bad: list[str]  # bad options used


_COMMON = frozenset({"--help", "--version"})


def _o(flags: str = "", values: str = "", reads: str = "", *, longs: str = "", long_values: str = "",
       long_reads: str = "", long_bad: str = "", **kw: object) -> Opts:  # fmt: skip
    def names(s: str) -> frozenset[str]:
        return frozenset(f"--{n}" for n in s.split())

    return Opts(
        flags,
        values,
        reads,
        longs=names(longs) | _COMMON,
        long_values=names(long_values),
        long_reads=names(long_reads),
        long_bad=names(long_bad),
        **kw,  # type: ignore[arg-type]
    )


_GREP_OPTS = _o(
    "EFGPiyvwxcLloqsbHhnTZzUaIrR",
    "emABCdD",
    "f",
    longs="extended-regexp fixed-strings basic-regexp perl-regexp ignore-case no-ignore-case invert-match "
    "word-regexp line-regexp count color colour files-without-match files-with-matches only-matching quiet "
    "silent no-messages byte-offset with-filename no-filename line-number line-buffered initial-tab null "
    "null-data text recursive dereference-recursive no-group-separator",
    long_values="regexp max-count label after-context before-context context binary-files devices directories "
    "include exclude exclude-dir group-separator",
    long_reads="file exclude-from",
    digits=True,
)
SAFE_OPTIONS: dict[str, Opts] = {
    "ls": _o(
        "aAbBcCdDfFgGhHiklLmnNopqQrRsStuUvxXZ1",
        "ITw",
        longs="all almost-all author escape ignore-backups directory dired classify file-type full-time "
        "group-directories-first no-group human-readable si dereference-command-line "
        "dereference-command-line-symlink-to-dir inode kibibytes dereference numeric-uid-gid literal "
        "hide-control-chars show-control-chars quote-name recursive reverse size context zero color hyperlink",
        long_values="block-size format hide ignore indicator-style quoting-style sort tabsize time time-style width",
    ),
    "cat": _o(
        "AbeEnstTuv",
        longs="show-all number-nonblank number squeeze-blank show-ends show-tabs show-nonprinting",
    ),
    "head": _o("qvz", "cn", longs="quiet silent verbose zero-terminated", long_values="bytes lines", digits=True),
    "tail": _o(
        "fFqvz",
        "cnsp",
        longs="retry quiet silent verbose zero-terminated follow",
        long_values="bytes lines max-unchanged-stats pid sleep-interval",
        digits=True,
    ),
    "wc": _o("cmlLw", longs="bytes chars lines max-line-length words", long_values="total", long_bad="files0-from"),
    "date": _o(
        "Ru",
        "d",
        "fr",
        optional="I",
        bad="s",
        longs="utc universal rfc-email rfc-2822 debug iso-8601 resolution",
        long_values="date rfc-3339",
        long_reads="file reference",
        long_bad="set",
    ),
    "uname": _o(
        "asnrvmpio",
        longs="all kernel-name nodename kernel-release kernel-version machine processor hardware-platform "
        "operating-system",
    ),
    "basename": _o("az", "s", longs="multiple zero", long_values="suffix"),
    "dirname": _o("z", longs="zero"),
    "realpath": _o(
        "eLmPqsz",
        longs="canonicalize-existing canonicalize-missing logical physical quiet strip no-symlinks zero",
        long_reads="relative-to relative-base",
    ),
    "file": _o(
        "bcdEhiklLNnprs0",
        "eFP",
        "m",
        bad="Cf",
        longs="brief checking-printout debug extension no-dereference mime mime-type mime-encoding keep-going list "
        "dereference no-pad no-buffer preserve-date raw special-files print0 apple exclude-quiet",
        long_values="exclude separator parameter",
        long_reads="magic-file",
        long_bad="compile files-from",
    ),
    "stat": _o("Lft", "c", longs="dereference file-system terse", long_values="cached format printf"),
    "du": _o(
        "0abcDHhkLlmPSsx",
        "Bdt",
        "X",
        longs="null all apparent-size bytes total dereference-args human-readable inodes dereference count-links "
        "no-dereference separate-dirs si summarize one-file-system time",
        long_values="block-size max-depth threshold time-style exclude",
        long_reads="exclude-from",
        long_bad="files0-from",
    ),
    "tree": _o(
        "adlfxqNQpugshDFvtcUriASnCXJ",
        "LPIHT",
        bad="oR",  # -R re-runs tree with -o 00Tree.html in every directory (with -H, -L)
        longs="gitignore ignore-case matchdirs metafirst prune info noreport si du inodes device dirsfirst "
        "filesfirst nolinks fromfile fflinks",
        long_values="charset filelimit timefmt sort",
        long_reads="gitfile infofile hintro houtro",
        long_bad="output",
        abbreviations=False,
        value_last=True,
    ),
    "diff": _o(
        "abBdeEfHiNnpPqrsStTuvwyZc",
        "CUDFIxWL",
        "X",
        bad="l",
        longs="normal brief report-identical-files context unified ed rcs side-by-side left-column "
        "suppress-common-lines show-c-function expand-tabs initial-tab suppress-blank-empty new-file "
        "unidirectional-new-file ignore-case ignore-file-name-case no-ignore-file-name-case "
        "ignore-tab-expansion ignore-trailing-space ignore-space-change ignore-all-space ignore-blank-lines text "
        "strip-trailing-cr recursive no-dereference minimal speed-large-files color",
        long_values="width show-function-line label tabsize ignore-matching-lines exclude starting-file "
        "line-format old-line-format new-line-format unchanged-line-format old-group-format new-group-format "
        "unchanged-group-format changed-group-format horizon-lines palette ifdef",
        long_reads="exclude-from from-file to-file",
        long_bad="paginate",
    ),
    "cmp": _o("bls", "in", longs="print-bytes verbose quiet silent", long_values="ignore-initial bytes"),
    "nl": _o(
        "p",
        "bdfhilnsvw",
        longs="no-renumber",
        long_values="body-numbering section-delimiter footer-numbering header-numbering line-increment "
        "join-blank-lines number-format number-separator starting-line-number number-width",
    ),
    "tac": _o("br", "s", longs="before regex", long_values="separator"),
    "cut": _o(
        "nsz",
        "bcdf",
        longs="complement only-delimited zero-terminated",
        long_values="bytes characters delimiter fields output-delimiter",
    ),
    "grep": _GREP_OPTS,
    "egrep": _GREP_OPTS,
    "fgrep": _GREP_OPTS,
    "sort": _o(
        "bdfgiMhnRrVcCmsuz",
        "kSt",
        bad="oT",
        longs="ignore-leading-blanks dictionary-order ignore-case general-numeric-sort ignore-nonprinting "
        "month-sort human-numeric-sort numeric-sort random-sort reverse version-sort check merge stable unique "
        "zero-terminated debug",
        long_values="sort key field-separator buffer-size parallel batch-size",
        long_reads="random-source",
        long_bad="output compress-program files0-from temporary-directory",
    ),
    "uniq": _o(
        "cdDiuz",
        "fsw",
        longs="count repeated all-repeated group ignore-case unique zero-terminated",
        long_values="skip-fields skip-chars check-chars",
    ),
}


def long_name(spec: Opts, key: str) -> tuple[str, str] | None:
    """``--key`` as (full name, kind), kind one of flag/value/read/bad; a prefix of a bad option
    is that option; None for an option the program does not have (or an ambiguous prefix)."""
    kinds = (("bad", spec.long_bad), ("read", spec.long_reads), ("value", spec.long_values), ("flag", spec.longs))
    for kind, names in kinds:
        if key in names:
            return key, kind
    if not spec.abbreviations or len(key) < 3:
        return next(((n, "bad") for n in sorted(spec.long_bad) if n.startswith(key) and len(key) >= 3), None)
    bad = sorted(n for n in spec.long_bad if n.startswith(key))
    if bad:
        return bad[0], "bad"
    hits = [(n, kind) for kind, names in kinds for n in names if n.startswith(key)]
    return hits[0] if len(hits) == 1 else None


def parse(spec: Opts, args: list[str]) -> Parsed | None:
    """``args`` as the program reads them (GNU getopt permutes: options may follow operands);
    None when an option is not one keel knows or a value is known only at run time."""
    out = Parsed([], [], [], [])
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            out.positional += args[i:]
            break
        if DYNAMIC in a and a.startswith("-"):
            return None
        if a.startswith("--"):
            key, eq, value = a.partition("=")
            found = long_name(spec, key)
            if found is None:
                return None
            name, kind = found
            if kind in ("value", "read") and not eq:
                if i >= len(args):
                    return None
                value, eq = args[i], "="
                i += 1
            if kind == "bad":
                out.bad.append(name)
            if kind == "read":
                out.reads.append(value)
            out.options.append((name, value if eq else None))
            continue
        if not a.startswith("-") or a == "-":
            out.positional.append(a)
            continue
        if spec.digits and a[1:].isdigit():
            out.options.append(("-NUM", a[1:]))
            continue
        j = 1
        while j < len(a):
            ch = a[j]
            j += 1
            if ch in spec.flags:
                out.options.append((f"-{ch}", None))
                continue
            if ch in spec.optional:
                out.options.append((f"-{ch}", a[j:] or None))
                break
            if ch not in spec.values + spec.reads + spec.bad:
                return None
            if ch in spec.bad:
                out.bad.append(f"-{ch}")  # whether it takes a value or not, the command asks
            value = a[j:]
            if spec.value_last and value:
                return None  # tree -Lo 2 x: each letter takes a word of its own, keel does not follow
            if not value:
                if i >= len(args):
                    return None
                value = args[i]
                i += 1
            if ch in spec.reads:
                out.reads.append(value)
            out.options.append((f"-{ch}", value))
            break
    if any(DYNAMIC in r for r in out.reads):
        return None
    return out
