"""The read-only programs keel runs without a rule, modelled option by option
(:data:`SAFE_OPTIONS`): an option keel does not know makes the command ask, so a new option
(or a letter that takes a value keel did not know of) cannot slip a read or a program past the
check. GNU programs take any unambiguous prefix of a long option; any prefix of a ``bad``
option counts as that option.
"""

from __future__ import annotations

import msgspec

from agentkeel.policy.permissions.words import DYNAMIC


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
