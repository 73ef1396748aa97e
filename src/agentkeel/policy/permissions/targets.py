"""The files a simple command writes or reads beyond its plain arguments: output options
(``curl -o``, ``go build -o``), sed's ``w`` and ``r`` files, the git config file ``git config``
writes, ``rev:path`` objects git reads. Each write target is judged like a redirect target.
"""

from __future__ import annotations

import os
import posixpath
import re
from urllib.parse import urlsplit

from agentkeel.policy.permissions import options, safeoptions, sed
from agentkeel.policy.permissions.bash import DYNAMIC
from agentkeel.policy.permissions.bashmodel import SimpleCommand

WRITERS = frozenset(
    {
        "rm",
        "rmdir",
        "mv",
        "cp",
        "tee",
        "touch",
        "mkdir",
        "ln",
        "chmod",
        "chown",
        "chgrp",
        "truncate",
        "install",
        "shred",
        "unlink",
        "dd",
        "rsync",
    }
)
_CURL_WRITES = frozenset(
    {"-o", "--output", "-D", "--dump-header", "-c", "--cookie-jar", "--trace", "--trace-ascii", "--stderr"}
    | {"--etag-save", "--hsts", "--alt-svc", "--libcurl"}
)
_CURL_READS = frozenset({"-T", "--upload-file", "-K", "--config", "-b", "--cookie", "--etag-compare"})
_CURL_DATA = frozenset(
    {"-d", "--data", "--data-binary", "--data-ascii", "--data-urlencode", "--json", "-F", "--form"}
    | {"--url-query", "--variable"}
)
# options that read a file when their value starts with @ (``-H @headers.txt``, ``-w @format``)
_CURL_AT_FILE = frozenset({"-H", "--header", "--proxy-header", "-w", "--write-out"})
_CURL = options.Cli(
    frozenset(),
    short_values="oDcTKbdFHXuAeEwxmrCUYyztPQ",
    long_values=_CURL_WRITES | _CURL_READS | _CURL_DATA | _CURL_AT_FILE | {"--output-dir", "--request", "--user"},
    known=frozenset({"--remote-name", "--remote-name-all"}),
    abbreviations=True,
)
_WGET_WRITES = frozenset(
    {"-O", "--output-document", "-o", "--output-file", "-a", "--append-output", "--save-cookies"}
    | {"--warc-file", "--rejected-log"}
)
_WGET = options.Cli(
    frozenset(),
    short_values="OoaPiUeTtwQlAR",
    long_values=_WGET_WRITES | {"--directory-prefix", "--input-file", "--post-file", "--body-file", "--load-cookies"},
    known=frozenset({"--content-disposition", "--trust-server-names", "--recursive", "--mirror", "--page-requisites"}),
    abbreviations=True,
)
_GIT_READS = frozenset({"show", "cat-file", "diff", "log", "grep", "blame", "archive", "whatchanged"})
_STREAMS = frozenset({"-", "/dev/stdout", "/dev/stderr", "/dev/null"})


def write_targets(cmd: SimpleCommand) -> list[str]:
    if not cmd.argv:
        return []
    name = posixpath.basename(cmd.argv[0])
    args = cmd.argv[1:]
    if name == "dd":
        return [a[3:] for a in args if a.startswith("of=")]
    if name == "sed":
        return sed.write_targets(sed.read_call(args))
    if name in WRITERS:
        return [a for a in args if not a.startswith("-")]
    if name == "curl":
        return _curl(args)[0]
    if name == "wget":
        return _wget_writes(args)
    if name == "git":
        return _git_config_writes(args, cmd.cwd) + _git_output_writes(args, cmd.cwd)
    if name == "tar":
        return _tar_archive(args)
    if name in _SSH_VALUES:
        return [v for k, v in ssh_options(name, args) if k == "-E"]  # ssh -E log: appended to
    return [t for t in options.write_targets(cmd.argv) if t not in _STREAMS]


# short letters that take a value, per program of the ssh family (``-F`` config and ``-i``
# identity are files read, ``-E`` a log written; a value may be attached: ``-Fcfg``)
_SSH_VALUES = {"ssh": "BbcDEeFIiJLlmOoPpQRSWw", "scp": "cFiJloPSX", "sftp": "BbcDFiJloPRSs"}


def ssh_options(name: str, args: list[str]) -> list[tuple[str, str]]:
    """(``-letter``, value) for every short option of ssh/scp/sftp that takes a value, attached
    or as the next word. ssh reads options after the host too (``ssh host -oProxyCommand=x``),
    up to the command; scp and sftp take them anywhere before ``--``."""
    letters = _SSH_VALUES.get(name, "")
    out: list[tuple[str, str]] = []
    operands = 0
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            break
        if not a.startswith("-") or len(a) < 2:
            operands += 1
            if name == "ssh" and operands > 1:
                break  # the remote command
            continue
        for j, ch in enumerate(a[1:], start=2):
            if ch in letters:
                value = a[j:]
                if not value:
                    value = args[i] if i < len(args) else DYNAMIC
                    i += 1
                out.append((f"-{ch}", value))
                break
    return out


TAR = options.Cli(
    frozenset(),
    short_values="fCTXbHKLNV",
    long_values=frozenset({"--file", "--directory"}),
    known=frozenset({"--create", "--append", "--update", "--dereference", "--extract", "--list"}),
    abbreviations=True,  # argp
)


def _tar_archive(args: list[str]) -> list[str]:
    """The archive ``tar -c``/``-r``/``-u`` writes (extracting writes names from the archive,
    which keel cannot see)."""
    if args and not args[0].startswith("-"):
        args = ["-" + args[0], *args[1:]]  # traditional syntax: tar czf out.tgz dir
    opts = list(options.read_options(TAR, args))
    if not {k for k, _ in opts} & {"-c", "--create", "-r", "--append", "-u", "--update"}:
        return []
    return [v or DYNAMIC for k, v in opts if k in ("-f", "--file") and v not in _STREAMS]


def read_targets(cmd: SimpleCommand) -> list[str]:
    """Files read that are not plain arguments: ``sed 'r f'``, ``curl -d@f``, ``git show HEAD:f``
    (as absolute paths where the program resolves them elsewhere than the working directory)."""
    if not cmd.argv:
        return []
    name = posixpath.basename(cmd.argv[0])
    args = cmd.argv[1:]
    if name == "sed":
        return sed.read_targets(sed.read_call(args))
    if name == "curl":
        return _curl(args)[1]
    if name == "wget":
        reading = ("-i", "--input-file", "--post-file", "--body-file", "--load-cookies")
        return [v for k, v in options.read_options(_WGET, args) if k in reading and v]
    if name == "git":
        return git_object_paths(args, cmd.cwd) + git_option_reads(args, cmd.cwd)
    if name == "rg":
        return [v for k, v in options.read_options(options.RG, args) if k in ("-f", "--file", "--ignore-file") and v]
    if name in _SSH_VALUES:
        return [v for k, v in ssh_options(name, args) if k in ("-F", "-i") and v not in _STREAMS]
    return option_reads(name, args)


def option_reads(name: str, args: list[str]) -> list[str]:
    """Files a modelled read-only program reads through its options: ``date -f.env``,
    ``diff --from-file=/abs``, ``grep --fil=list`` (an abbreviation). Where keel cannot read
    the options, every attached short value and every ``=value`` is taken for a file (the
    deny rules see too much rather than too little)."""
    spec = safeoptions.SAFE_OPTIONS.get(name)
    if spec is None:
        return []
    parsed = safeoptions.parse(spec, args)
    if parsed is not None:
        return [r for r in parsed.reads if r not in _STREAMS]
    out: list[str] = []
    for i, a in enumerate(args):
        if a == "--":
            break
        if a.startswith("--"):
            if "=" in a:
                out.append(a.split("=", 1)[1])
            elif i + 1 < len(args):
                out.append(args[i + 1])
        elif a.startswith("-") and len(a) > 2:
            out += [a[j:] for j in range(2, len(a))]
    return [r for r in out if r and DYNAMIC not in r and r not in _STREAMS]


# git options that name a file git reads, per subcommand: (long options, short letters)
_GIT_FILE_OPTIONS: dict[str, tuple[frozenset[str], str]] = {
    "blame": (frozenset({"--contents", "--ignore-revs-file"}), "S"),
    "ls-files": (frozenset({"--exclude-from", "--exclude-per-directory"}), "X"),
    "diff": (frozenset({"--orderfile"}), "O"),
    "log": (frozenset({"--orderfile"}), "O"),
    "show": (frozenset({"--orderfile"}), "O"),
    # the message (or its template) read from a file: ``git commit -F.env`` puts it in history
    "commit": (frozenset({"--file", "--template"}), "Ft"),
    "tag": (frozenset({"--file"}), "F"),
    "merge": (frozenset({"--file"}), "F"),
    "notes": (frozenset({"--file"}), "F"),
}
_GIT_ANY_FILE_OPTIONS = frozenset({"--pathspec-from-file"})


def git_option_reads(args: list[str], cwd: str) -> list[str]:
    """Files a git command reads through an option (``git blame --contents=/abs``): git's
    parse-options takes any unique prefix, so ``--cont=/abs`` is the same option. A value git
    resolves from the directory it runs in is returned absolute."""
    where, sub, rest = git_split(args, cwd)
    longs, shorts = _GIT_FILE_OPTIONS.get(sub, (frozenset(), ""))
    longs = longs | _GIT_ANY_FILE_OPTIONS
    out: list[str] = []
    i = 0
    while i < len(rest):
        a = rest[i]
        i += 1
        if a == "--":
            break
        if a.startswith("--") and len(a) > 2:
            key, eq, value = a.partition("=")
            if len(key) >= 4 and any(n.startswith(key) for n in longs):
                if not eq:
                    value = rest[i] if i < len(rest) else DYNAMIC
                    i += 1
                out.append(value)
        elif a.startswith("-") and not a.startswith("--") and any(ch in shorts for ch in a[1:]):
            # a cluster: the first letter that takes a file takes the rest (``-qF.env``)
            at = next(j for j, ch in enumerate(a) if j > 0 and ch in shorts)
            if len(a) > at + 1:
                out.append(a[at + 1 :])
            else:
                out.append(rest[i] if i < len(rest) else DYNAMIC)
                i += 1
    return [v if v.startswith("/") or DYNAMIC in v else posixpath.join(where, v) for v in out if v != "-"]


def _curl(args: list[str]) -> tuple[list[str], list[str]]:
    writes: list[str] = []
    reads: list[str] = []
    remote_name = False
    output_dir = "."
    urls: list[str] = []
    for key, value in options.read_options(_CURL, args):
        if not key:
            if value and "://" in value:
                urls.append(value)
        elif key in _CURL_WRITES:
            writes.append(value if value is not None else DYNAMIC)
        elif key in ("-O", "--remote-name", "--remote-name-all"):
            remote_name = True
        elif key == "--output-dir":
            output_dir = value or DYNAMIC
        elif key in _CURL_READS and value:
            reads.append(value)
        elif key in _CURL_AT_FILE and value and value.startswith("@") and value != "@-":
            reads.append(value[1:])
        elif key in _CURL_DATA and value:
            # -d @file, --data-urlencode name@file, -F field=@file or field=<file
            m = re.match(r"^(?:[^=@<]*[=])?[@<](.+)$", value) or re.match(r"^[^=@]*@(.+)$", value)
            if m and m.group(1) != "-":
                reads.append(m.group(1).split(";", 1)[0])
    if remote_name:
        names = [posixpath.basename(urlsplit(u).path) for u in urls] or [DYNAMIC]
        writes += [posixpath.join(output_dir, n or DYNAMIC) for n in names]
    writes = [posixpath.join(output_dir, w) if output_dir != "." and not w.startswith("/") else w for w in writes]
    return [w for w in writes if w not in _STREAMS], [r for r in reads if r not in _STREAMS]


def _wget_writes(args: list[str]) -> list[str]:
    named: list[str] = []
    prefix = "."
    urls: list[str] = []
    server_names = False
    recursive = False
    for key, value in options.read_options(_WGET, args):
        if not key:
            if value:
                urls.append(value)
        elif key in _WGET_WRITES:
            named.append(value if value is not None else DYNAMIC)
        elif key in ("-P", "--directory-prefix"):
            prefix = value or DYNAMIC
        elif key in ("--content-disposition", "--trust-server-names"):
            server_names = True
        elif key in ("-r", "--recursive", "-m", "--mirror", "-p", "--page-requisites"):
            recursive = True
    if any(k in ("-O", "--output-document") for k, _ in options.read_options(_WGET, args)):
        return [n for n in named if n not in _STREAMS]
    saved = []
    for url in urls or [DYNAMIC]:
        parts = urlsplit(url) if DYNAMIC not in url else None
        if parts is None or server_names:
            saved.append(DYNAMIC)
        elif recursive:
            saved.append(parts.hostname or DYNAMIC)
        else:
            saved.append(posixpath.basename(parts.path) or "index.html")
    return [n for n in named if n not in _STREAMS] + [posixpath.join(prefix, s) for s in saved]


def git_split(args: list[str], cwd: str) -> tuple[str, str, list[str]]:
    """(directory git runs in, subcommand, its arguments), after global options such as -C."""
    i = 0
    where = cwd
    while i < len(args) and args[i].startswith("-"):
        a = args[i]
        if a in ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"):
            if a == "-C" and i + 1 < len(args):
                where = posixpath.normpath(posixpath.join(where, args[i + 1]))
            i += 2
            continue
        i += 1
    sub = args[i] if i < len(args) else ""
    return where, sub, args[i + 1 :]


def toplevel(start: str) -> str:
    """The work tree holding ``start`` (the nearest directory with a ``.git``), or ``start``."""
    d = start
    while True:
        if os.path.lexists(posixpath.join(d, ".git")):
            return d
        parent = posixpath.dirname(d)
        if parent == d:
            return start
        d = parent


def bare_repository(start: str) -> str | None:
    """The bare repository git would find from ``start`` (a directory holding HEAD, objects/ and
    refs/ before any ``.git``): a committed one in a project brings its own ``config``, whose
    ``diff.external`` or ``gpg.program`` an ordinary ``git diff``/``git log`` runs."""
    d = start
    while True:
        if os.path.lexists(posixpath.join(d, ".git")) or posixpath.basename(d) == ".git":
            return None
        if os.path.isfile(posixpath.join(d, "HEAD")) and all(
            os.path.isdir(posixpath.join(d, sub)) for sub in ("objects", "refs")
        ):
            return d
        parent = posixpath.dirname(d)
        if parent == d:
            return None
        d = parent


_CONFIG_READS = frozenset({"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool"})
_CONFIG_WRITES = frozenset(
    {"--unset", "--unset-all", "--add", "--replace-all", "--rename-section", "--remove-section", "-e", "--edit"}
)
_CONFIG_VALUES = frozenset({"--type", "--default", "--file", "-f", "--blob", "--comment", "--value"})


def _git_config_writes(args: list[str], cwd: str) -> list[str]:
    """``git config core.hooksPath x`` writes .git/config (``--global`` ~/.gitconfig...): a
    protected file, so it always asks, as a Write to it would. Reading config writes nothing."""
    where, sub, rest = git_split(args, cwd)
    if sub != "config":
        return []
    positional: list[str] = []
    target = posixpath.join(toplevel(where), ".git", "config")
    writing = False
    i = 0
    while i < len(rest):
        a = rest[i]
        key, eq, value = a.partition("=")
        if key in _CONFIG_VALUES and not eq:
            i += 1
            value = rest[i] if i < len(rest) else DYNAMIC
        if key in ("--file", "-f"):
            target = value
        elif key == "--global":
            target = "~/.gitconfig"
        elif key == "--system":
            target = "/etc/gitconfig"
        elif key == "--worktree":
            target = posixpath.join(toplevel(where), ".git", "config.worktree")
        elif key == "--blob" or key in _CONFIG_READS or key in ("-l", "--list"):
            return []
        elif key in _CONFIG_WRITES:
            writing = True
        elif not a.startswith("-"):
            positional.append(a)
        i += 1
    if positional and positional[0] in ("get", "list"):
        return []
    if positional and positional[0] in ("set", "unset", "rename-section", "remove-section", "edit"):
        writing = True
    if writing or len(positional) >= 2:
        return [target]
    return []


# git subcommands that write a file or directory an option or operand names:
# (long options, short letters with the path as value)
_GIT_OUTPUTS: dict[str, tuple[frozenset[str], str]] = {
    "archive": (frozenset({"--output"}), "o"),
    "format-patch": (frozenset({"--output-directory", "--output"}), "o"),
    "diff": (frozenset({"--output"}), ""),
    "log": (frozenset({"--output"}), ""),
    "show": (frozenset({"--output"}), ""),
}


def _git_output_writes(args: list[str], cwd: str) -> list[str]:
    """``git archive -o .git/hooks/x``, ``git format-patch -o dir``, ``git bundle create f``:
    the paths git writes (relative to where it runs), judged like a redirect target."""
    where, sub, rest = git_split(args, cwd)
    out: list[str] = []
    if sub == "bundle" and len(rest) >= 2 and rest[0] == "create":
        out.append(next((a for a in rest[1:] if not a.startswith("-")), DYNAMIC))
    longs, shorts = _GIT_OUTPUTS.get(sub, (frozenset(), ""))
    i = 0
    while i < len(rest):
        a = rest[i]
        i += 1
        if a == "--":
            break
        if a.startswith("--"):
            key, eq, value = a.partition("=")
            if len(key) >= 4 and any(n.startswith(key) for n in longs):
                if not eq:
                    value = rest[i] if i < len(rest) else DYNAMIC
                    i += 1
                out.append(value)
        elif a.startswith("-") and shorts and any(ch in shorts for ch in a[1:]):
            at = next(j for j, ch in enumerate(a) if j > 0 and ch in shorts)
            if len(a) > at + 1:
                out.append(a[at + 1 :])
            else:
                out.append(rest[i] if i < len(rest) else DYNAMIC)
                i += 1
    return [v if v.startswith("/") or DYNAMIC in v else posixpath.join(where, v) for v in out if v not in _STREAMS]


def git_object_paths(args: list[str], cwd: str) -> list[str]:
    """``git show HEAD:.env`` reads .env from the repository: ``rev:path`` names a path from the
    top of the work tree (``rev:./path`` from the current directory)."""
    where, sub, rest = git_split(args, cwd)
    if sub not in _GIT_READS:
        return []
    out: list[str] = []
    for a in rest:
        if a.startswith("-") or ":" not in a or DYNAMIC in a or "://" in a:
            continue
        path = a.split(":", 1)[1]
        if re.fullmatch(r"\d:.*", path):  # :0:path, a stage of the index
            path = path[2:]
        if not path:
            continue
        base = where if path.startswith(("./", "../")) else toplevel(where)
        out.append(posixpath.normpath(posixpath.join(base, path)))
    return out
