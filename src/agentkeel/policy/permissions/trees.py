"""Recursive reads: the trees a command reads file by file (``grep -r``, ``rg``, ``diff -r``,
``cp -r``, ``find -exec``), the repository history git prints (``git log -p``, ``git show``),
and a bounded walk over a tree on disk for Read-denied files and symlinks that lead out.

A command that reads a whole tree reads every Read-denied file in it, and through a followed
symlink (``grep -R`` over a committed ``etclink -> /etc``) it reads the link's target: such a
read is judged by what it reaches, not by the one directory it names.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable

import msgspec

from agentkeel.internal import globs
from agentkeel.policy.permissions import options, safeoptions, targets
from agentkeel.policy.permissions.bashmodel import SimpleCommand
from agentkeel.policy.permissions.paths import PathPattern, inside
from agentkeel.policy.permissions.targets import git_split, toplevel
from agentkeel.policy.permissions.words import DYNAMIC

WALK_LIMIT = 10_000  # entries looked at before a tree counts as too large to check (it then asks)


class TreeRead(msgspec.Struct, frozen=True):
    root: str  # as written (relative to the command's directory)
    follow: bool  # follows symlinks met inside the tree
    certain: bool = True  # reads every file (grep -r); False when filters decide (find -exec)
    skip_files: tuple[str, ...] = ()  # base-name globs the program leaves out (grep --exclude)
    only_files: tuple[str, ...] = ()  # ... or the only ones it reads (grep --include)
    skip_dirs: tuple[str, ...] = ()  # grep --exclude-dir


_GREP = options.Cli(
    frozenset(),
    short_values="efmABCdD",
    long_values=frozenset(
        {"--regexp", "--file", "--max-count", "--after-context", "--before-context", "--context", "--directories"}
        | {"--devices", "--include", "--exclude", "--exclude-dir", "--exclude-from", "--label", "--binary-files"}
    ),
)
_RG = options.RG
_DIFF = options.Cli(frozenset(), short_values="CUDIxXSWLF", long_values=frozenset({"--exclude", "--exclude-from"}))
_COPY = options.Cli(frozenset(), short_values="tSe", long_values=frozenset({"--target-directory", "--suffix"}))


def tree_reads(cmd: SimpleCommand) -> list[TreeRead]:
    """The trees this command reads every file of (beyond the paths it names)."""
    if not cmd.argv or DYNAMIC in cmd.argv[0]:
        return []
    name = posixpath.basename(cmd.argv[0])
    args = cmd.argv[1:]
    if name in ("grep", "egrep", "fgrep", "zgrep"):
        return _grep(args)
    if name in ("rg", "ag", "ack", "ack-grep"):
        return _searcher(name, args)
    if name == "diff":
        parsed = safeoptions.parse(safeoptions.SAFE_OPTIONS["diff"], args)  # --recur is --recursive
        opts = (
            [*parsed.options, *(("", p) for p in parsed.positional)]
            if parsed is not None
            else list(options.read_options(_DIFF, args))
        )
        if not any(k in ("-r", "--recursive") for k, _ in opts):
            return []
        follow = not any(k == "--no-dereference" for k, _ in opts)
        return [TreeRead(v, follow) for k, v in opts if not k and v]
    if name in ("cp", "rsync", "scp"):
        opts = list(options.read_options(_COPY, args))
        flags = {k for k, _ in opts}
        if not flags & {"-r", "-R", "-a", "--recursive", "--archive"}:
            return []
        follow = bool(flags & {"-L", "--dereference", "--copy-links"})
        sources = [v for k, v in opts if not k and v]
        if not any(k in ("-t", "--target-directory") for k, _ in opts):
            sources = sources[:-1]  # the last operand is the destination
        return [TreeRead(s, follow) for s in sources]
    if name == "tar":
        return _tar(args)
    if name == "zip" and any(a.startswith("-") and not a.startswith("--") and "r" in a for a in args):
        positional = [a for a in args if not a.startswith("-")]
        return [TreeRead(p, "-L" not in args) for p in positional[1:]]
    if name in ("find", "fd", "fdfind") and any(a in _FIND_ACTIONS for a in args):
        return _find(name, args)
    return []


_FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-x", "-X", "--exec", "--exec-batch"})
# tests and options keel can account for before the first action; with anything else (-o, !,
# -path, -size...) it cannot tell which files reach the command, and the read is uncertain
_FIND_KNOWN = frozenset({"-name", "-type", "-maxdepth", "-mindepth", "-L", "-follow", "-H", "-P", "-print", "-xdev"})


def _find(name: str, args: list[str]) -> list[TreeRead]:
    """``find . -name '*.pem' -exec cat {} +`` reads what find finds: the tree, through its
    ``-name`` tests (keel ignores the other filters it can account for, which only narrow)."""
    follow = any(a in ("-L", "-follow", "--follow") for a in args)
    rest = args
    while rest and rest[0] in ("-H", "-L", "-P"):
        rest = rest[1:]
    roots: list[str] = []
    while rest and not rest[0].startswith(("-", "(", ")", "!")):
        roots.append(rest.pop(0))
    if name != "find":  # fd PATTERN [PATH...]: the pattern is a filter keel does not evaluate
        return [TreeRead(r, follow, certain=False) for r in roots[1:] or ["."]]
    names: list[str] = []
    certain = True
    i = 0
    while i < len(rest) and rest[i] not in _FIND_ACTIONS:
        a = rest[i]
        if a not in _FIND_KNOWN:
            certain = False
        if a in ("-name", "-type", "-maxdepth", "-mindepth") and i + 1 < len(rest):
            if a == "-name":
                names.append(rest[i + 1])
            i += 1
        i += 1
    only = tuple(names) if certain else ()
    return [TreeRead(r, follow, certain=certain, only_files=only) for r in roots or ["."]]


def _grep_options(args: list[str]) -> list[tuple[str, str | None]]:
    """grep's options by their full names (``--recur`` is ``--recursive``, ``--direc=rec`` is
    ``--directories=recurse``: getopt_long and argmatch take unique prefixes); where keel cannot
    read them all, each long option by the name it may abbreviate, read broadly."""
    parsed = safeoptions.parse(safeoptions.SAFE_OPTIONS["grep"], args)
    if parsed is not None:
        return [*parsed.options, *(("", p) for p in parsed.positional)]
    out: list[tuple[str, str | None]] = []
    for k, v in options.read_options(_GREP, args):
        if k.startswith("--") and len(k) >= 3:
            k = next((n for n in _GREP_LONGS if n.startswith(k)), k)
        out.append((k, v))
    return out


_GREP_LONGS = ("--dereference-recursive", "--recursive", "--directories", "--regexp", "--file", "--include")


def _grep(args: list[str]) -> list[TreeRead]:
    opts = _grep_options(args)
    keys = {k for k, _ in opts}
    recursive = bool(keys & {"-r", "-R", "--recursive", "--dereference-recursive"}) or any(
        k in ("-d", "--directories") and v and "recurse".startswith(v) for k, v in opts
    )
    if not recursive:
        return []
    follow = bool(keys & {"-R", "--dereference-recursive", "-S"})  # -S: BSD grep follows all links
    positional = [v for k, v in opts if not k and v]
    if not keys & {"-e", "--regexp", "-f", "--file"}:
        positional = positional[1:]  # the pattern
    only = tuple(v for k, v in opts if k == "--include" and v)
    skip = tuple(v for k, v in opts if k == "--exclude" and v)
    dirs = tuple(v for k, v in opts if k == "--exclude-dir" and v)
    return [TreeRead(p, follow, True, skip, only, dirs) for p in positional or ["."]]


def _searcher(name: str, args: list[str]) -> list[TreeRead]:
    """rg, ag, ack: recursive by default. Hidden and ignored files count as read: an ignore file
    in the tree can whitelist them (``!.env`` in .gitignore makes plain rg search .env)."""
    opts = list(options.read_options(_RG, args))
    keys = {k for k, _ in opts}
    if "--files" in keys or "--type-list" in keys or (name == "ag" and "-g" in keys):
        return []  # file names only
    follow = bool(keys & {"-L", "--follow"}) if name == "rg" else True
    positional = [v for k, v in opts if not k and v]
    if not keys & {"-e", "--regexp", "-f", "--file"}:
        positional = positional[1:]
    return [TreeRead(p, follow) for p in positional or ["."]]


def _tar(args: list[str]) -> list[TreeRead]:
    if args and not args[0].startswith("-"):
        args = ["-" + args[0], *args[1:]]  # traditional syntax: tar czf out.tgz dir
    opts = list(options.read_options(targets.TAR, args))
    keys = {k for k, _ in opts}
    if not keys & {"-c", "--create", "-r", "--append", "-u", "--update"}:
        return []
    follow = bool(keys & {"-h", "--dereference"})
    where = next((v for k, v in opts if k in ("-C", "--directory") and v), "")  # tar reads from there
    return [TreeRead(posixpath.join(where, v), follow) for k, v in opts if not k and v]


# --- git history -------------------------------------------------------------------------------

_GIT_CONTENT = frozenset({"show", "diff", "grep", "cat-file", "archive", "range-diff"})
_GIT_HISTORY = frozenset({"log", "whatchanged", "reflog"})
_PATCH = (
    *("-p", "-u", "--patch", "-U", "--unified", "-L", "--word-diff", "--color-words", "-S", "-G", "--pickaxe"),
    *("--cc", "-c", "-m", "--diff-merges", "--remerge-diff", "--full-diff", "--ext-diff", "--textconv", "--binary"),
)
_NAMES_ONLY = frozenset(
    {"--stat", "--name-only", "--name-status", "--numstat", "--shortstat", "--dirstat", "--summary", "--raw"}
    | {"--quiet", "--exit-code", "--compact-summary", "-s", "--no-patch"}
)
# git options that take no value: the word after one of them is a revision or a path
_GIT_FLAGS = frozenset(
    {"-p", "-u", "--patch", "--stat", "--oneline", "--name-only", "--name-status", "--graph", "--all", "--follow"}
    | {"--decorate", "--no-merges", "--cached", "--staged", "--raw", "--numstat", "--shortstat", "--summary"}
    | {"--color", "--no-color", "--reverse", "--first-parent", "--word-diff", "--abbrev-commit", "-w", "-b"}
    | {"--ignore-all-space", "--ignore-space-change", "--minimal", "--patience", "--histogram", "--no-renames"}
    | {"--full-diff", "--quiet", "--exit-code", "--merges", "--no-ext-diff", "--ita-invisible-in-index", "-M"}
    | {"-C", "-R", "--check", "--no-index", "-q", "-s", "--no-patch", "-l", "-i", "-n", "-v", "-w", "-E"}
)


def history_reads(cmd: SimpleCommand) -> list[str]:
    """The paths (absolute) whose contents a git command prints from the repository, where no
    walk can tell what history holds: the pathspecs given, or the whole work tree."""
    if not cmd.argv or posixpath.basename(cmd.argv[0]) != "git":
        return []
    where, sub, rest = git_split(cmd.argv[1:], cmd.cwd)
    if sub == "stash" and rest[:1] == ["show"]:
        sub, rest = "log", rest[1:]
    if sub not in _GIT_CONTENT and sub not in _GIT_HISTORY:
        return []
    if "--" in rest:
        cut = rest.index("--")
        before, specs = rest[:cut], rest[cut + 1 :]
    else:
        before, specs = rest, []
    patch = any(a.startswith(_PATCH) for a in before)
    if sub in _GIT_HISTORY and not patch:
        return []
    if not patch and any(a in _NAMES_ONLY or a.startswith("--stat=") for a in before) and sub in ("show", "diff"):
        return []
    words = _positional(before)
    if sub == "grep" and not any(a in ("-e", "-f") for a in before):
        words = words[1:]  # the pattern
    revisions = [w for w in words if not os.path.lexists(posixpath.join(where, w))]
    specs += [w for w in words if w not in revisions]
    top = toplevel(where)
    if specs:
        magic = [s for s in specs if s.startswith(":") or any(c in s for c in "*?[")]  # :/, :!x, globs
        return [top] if magic else [posixpath.normpath(posixpath.join(where, s)) for s in specs]
    if revisions and all(":" in r for r in revisions):
        return []  # rev:path objects only: each is checked as a read of that path
    return [top]


def _positional(args: list[str]) -> list[str]:
    out: list[str] = []
    for i, a in enumerate(args):
        if a.startswith("-") or DYNAMIC in a:
            continue
        prev = args[i - 1] if i else ""
        if prev.startswith("-") and "=" not in prev and prev not in _GIT_FLAGS:
            continue  # may be that option's value: neither a path nor a revision for sure
        out.append(a)
    return out


def _full_long(name: str, key: str) -> str:
    """A long option as getopt_long reads it: ``ls -L --recursiv`` is ``--recursive``."""
    spec = safeoptions.SAFE_OPTIONS.get(name)
    hit = safeoptions.long_name(spec, key) if spec is not None else None
    return hit[0] if hit is not None else key


def listing_follows(cmd: SimpleCommand) -> list[str]:
    """The roots a command lists (names, sizes) through the symlinks it follows: ``ls -RL``,
    ``du -L``, ``tree -l``, ``find -L``. Through a committed ``etclink -> /etc`` they list a tree
    outside the working directories."""
    if not cmd.argv:
        return []
    name, args = posixpath.basename(cmd.argv[0]), cmd.argv[1:]
    shorts = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
    longs = {_full_long(name, a.split("=", 1)[0]) for a in args if a.startswith("--")}
    positional = [a for a in args if not a.startswith("-")]
    if name == "ls" and "L" in shorts and ("R" in shorts or "--recursive" in longs):
        return positional or ["."]
    if name == "ls" and "--dereference" in longs and ("R" in shorts or "--recursive" in longs):
        return positional or ["."]
    if name == "du" and ("L" in shorts or "--dereference" in longs):
        return positional or ["."]
    if name == "tree" and ("l" in shorts or "--followlinks" in longs):
        return positional or ["."]
    if name == "find" and any(a in ("-L", "-follow") for a in args):
        rest = [a for a in args if a not in ("-H", "-L", "-P")]
        roots: list[str] = []
        while rest and not rest[0].startswith(("-", "(", ")", "!")):
            roots.append(rest.pop(0))
        return roots or ["."]
    return []


def listed_reads(cmd: SimpleCommand) -> bool:
    """``sort --files0-from=list``, ``tar -T list``: the files read are named in another file."""
    return any(a.startswith("--files0-from") or a.startswith("--files-from") for a in cmd.argv[1:])


# --- the walk ----------------------------------------------------------------------------------


class WalkResult(msgspec.Struct):
    denied: str | None = None  # a path a deny pattern covers
    denied_by: int = -1  # the index of that pattern
    outside: str | None = None  # "link -> target", the first followed symlink that leads out
    too_large: bool = False
    seen: int = 0
    visited: set[str] = msgspec.field(default_factory=set)


def walk(
    lexical: str, real: str, read: TreeRead, patterns: list[PathPattern], within: Iterable[str], limit: int = WALK_LIMIT
) -> WalkResult:
    """Look through the tree ``read`` reads for an entry a pattern covers (as its own path or,
    through a symlink, its target's) and, when it follows symlinks, one that leads outside
    ``within``. Directories no pattern can reach are not opened unless links are followed."""
    res = WalkResult()
    within = tuple(within)
    if not os.path.isdir(real):
        return res
    filters = read.skip_files or read.only_files or read.skip_dirs
    stack = [(lexical, real)]
    while stack:
        lex_dir, real_dir = stack.pop()
        if real_dir in res.visited:
            continue
        res.visited.add(real_dir)
        live = [i for i, p in enumerate(patterns) if p.may_match_under(lex_dir) or p.may_match_under(real_dir)]
        if not live and not read.follow:
            continue
        try:
            entries = list(os.scandir(real_dir))
        except OSError:
            continue
        tests = _tests(patterns, live, lex_dir, real_dir)
        for entry in entries:
            res.seen += 1
            if res.seen > limit:
                res.too_large = True
                return res
            name = entry.name
            try:
                link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if filters and _skipped(read, name, is_dir or (link and os.path.isdir(entry.path))):
                continue
            lex_path = f"{lex_dir}/{name}"
            if link:
                if not read.follow:
                    continue
                target = os.path.realpath(f"{real_dir}/{name}")
                is_dir = os.path.isdir(target)
                if res.outside is None and not inside(target, within):
                    res.outside = f"{lex_path} -> {target}"
                # a link may lead where any pattern reaches: its path and its target's
                hit = next((i for i, p in enumerate(patterns) if p.matches(lex_path, broad=True)), None)
                hit = (
                    hit
                    if hit is not None
                    else next((i for i, p in enumerate(patterns) if p.matches(target, broad=True)), None)
                )
                if hit is not None:
                    res.denied, res.denied_by = lex_path, hit
                    return res
                if is_dir:
                    stack.append((lex_path, target))
            else:
                for i, p, prefix in tests:
                    # a denied directory is read only through its files when grep --include filters them
                    if p.matches_entry(prefix, name, is_dir) and not (is_dir and read.only_files):
                        res.denied, res.denied_by = lex_path, i
                        return res
                if is_dir:
                    stack.append((lex_path, lex_path if lex_dir == real_dir else f"{real_dir}/{name}"))
            if res.outside is not None and not patterns:
                return res
    return res


def _tests(
    patterns: list[PathPattern], live: list[int], lex_dir: str, real_dir: str
) -> list[tuple[int, PathPattern, str]]:
    """(index, pattern, prefix) for the entries of one directory: each live pattern against the
    directory's lexical path and, where it differs, its resolved one."""
    out: list[tuple[int, PathPattern, str]] = []
    for i in live:
        p = patterns[i]
        for d in (lex_dir, real_dir) if real_dir != lex_dir else (lex_dir,):
            prefix = p.entry_prefix(d)
            if prefix is not None:
                out.append((i, p, prefix))
    return out


def _skipped(read: TreeRead, name: str, is_dir: bool) -> bool:
    """Left out by grep's own filters. A file both included and excluded counts as read (grep
    lets the last matching option win; keel does not order them), and so does one that a glob
    keel cannot read as grep does may include (or fail to exclude)."""
    if is_dir:
        return any(globs.program_name_matches(name, g) is True for g in read.skip_dirs)
    included = any(globs.program_name_matches(name, g) is not False for g in read.only_files)
    if read.only_files and not included:
        return True
    return not included and any(globs.program_name_matches(name, g) is True for g in read.skip_files)
