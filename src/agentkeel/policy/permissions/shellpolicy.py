"""What an analysed Bash command needs before it may run without asking.

Three questions per simple command: does a deny/ask rule catch it (broad matching: full
paths, reordered and long flags, sudo), does an allow rule cover it exactly (and every
escalating flag it uses), and is it one of the few read-only commands keel allows on its
own inside the working directories.
"""

from __future__ import annotations

import itertools
import os
import posixpath
import re

import msgspec

from agentkeel.internal.globs import shell_expand
from agentkeel.policy.permissions import actions, options, safeoptions, targets, trees
from agentkeel.policy.permissions.bash import DYNAMIC
from agentkeel.policy.permissions.bashmodel import SimpleCommand
from agentkeel.policy.permissions.escalating import escalations, long_hit
from agentkeel.policy.permissions.rules import Rule, bash_matches, literal_words
from agentkeel.policy.permissions.shellstate import names_file, safe_assignment

_LONG_TO_SHORT: dict[str, dict[str, str]] = {
    "rm": {"--recursive": "-r", "--force": "-f", "--dir": "-d", "--verbose": "-v", "-R": "-r"},
    "git": {"--force": "-f", "--delete": "-d", "--all": "-a", "--hard": "--hard"},
    "chmod": {"--recursive": "-R"},
    "chown": {"--recursive": "-R"},
    "cp": {"--recursive": "-r", "-R": "-r", "--force": "-f"},
    "mv": {"--force": "-f"},
    "curl": {"--data": "-d", "--output": "-o", "--upload-file": "-T"},
}


class SafeCommand(msgspec.Struct, frozen=True):
    bad_flags: frozenset[str] = frozenset()
    paths: bool = True  # non-flag arguments are paths that must stay inside the working dirs
    max_paths: int | None = None


# read-only commands allowed without a rule when every path they name is inside the working dirs
SAFE_COMMANDS: dict[str, SafeCommand] = {
    "ls": SafeCommand(),
    "pwd": SafeCommand(),
    "cat": SafeCommand(),
    "head": SafeCommand(),
    "tail": SafeCommand(),
    "wc": SafeCommand(),
    "echo": SafeCommand(paths=False),
    "true": SafeCommand(paths=False),
    "false": SafeCommand(paths=False),
    "which": SafeCommand(paths=False),
    "whoami": SafeCommand(paths=False),
    "date": SafeCommand(frozenset({"-s", "--set"}), paths=False),
    "uname": SafeCommand(paths=False),
    "basename": SafeCommand(paths=False),
    "dirname": SafeCommand(paths=False),
    "realpath": SafeCommand(),
    "file": SafeCommand(),
    "stat": SafeCommand(),
    "du": SafeCommand(),
    "tree": SafeCommand(frozenset({"-o"})),
    "diff": SafeCommand(),
    "cmp": SafeCommand(),
    "nl": SafeCommand(),
    "tac": SafeCommand(),
    "cut": SafeCommand(),
    "grep": SafeCommand(),
    "egrep": SafeCommand(),
    "fgrep": SafeCommand(),
    "sort": SafeCommand(frozenset({"-o", "--output", "--compress-program", "-T"})),
    "uniq": SafeCommand(max_paths=1),
    "rg": SafeCommand(frozenset({"--pre", "--pre-glob", "--search-zip", "-z", "--hostname-bin"})),
    "test": SafeCommand(),
    "find": SafeCommand(
        frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"})
        | {"-files0-from"}  # the start points are read from a file
    ),
    "[": SafeCommand(),
}
_SAFE_GIT = frozenset({"status", "diff", "log", "show", "rev-parse", "ls-files", "blame", "branch"})


def command_forms(cmd: SimpleCommand) -> list[str]:
    """Every way a deny or ask rule may see this command: as written, without sudo, by basename."""
    forms = [cmd.full_text, cmd.text]
    if cmd.argv and "/" in cmd.argv[0] and DYNAMIC not in cmd.argv[0]:
        base = posixpath.basename(cmd.argv[0])
        forms.append(" ".join([base, *cmd.argv[1:]]))
    if cmd.privileged:  # /usr/bin/sudo ls is sudo ls
        forms.append(" ".join([actions.program(w) for w in cmd.privileged] + cmd.argv))
    canon = actions.canonical(cmd.argv)
    if canon:
        forms.append(" ".join(canon))
    return list(dict.fromkeys(forms))


def _split_flags(name: str, args: list[str]) -> tuple[set[str], list[str]]:
    aliases = _LONG_TO_SHORT.get(name, {})
    flags: set[str] = set()
    words: list[str] = []
    for i, a in enumerate(args):
        if a == "--":  # nothing after it is an option
            words += args[i + 1 :]
            break
        if a.startswith("-") and a.endswith("*") and len(a) > 2:
            a = a.rstrip("*")  # a rule's ``-f*``: the flag, then anything
        if a.startswith("--"):
            key = a.split("=", 1)[0]
            flags.add(aliases.get(key, key))
        elif a.startswith("-") and len(a) > 1 and not a[1:].isdigit():
            if a in aliases:
                flags.add(aliases[a])
            else:
                for ch in a[1:]:
                    flags.add(aliases.get(f"-{ch}", f"-{ch}"))
        else:
            words.append(a)
    return flags, words


def rule_catches(spec: str, cmd: SimpleCommand) -> bool:
    """Deny/ask matching, deliberately broad: literal forms, then flags as a set."""
    if any(bash_matches(spec, form) for form in command_forms(cmd)):
        return True
    words = spec.replace(":*", " *").split()
    if not words or not cmd.argv:
        return False
    rule_argv = actions.canonical(words)
    argv = actions.canonical(cmd.argv)
    if rule_argv[0] != argv[0]:
        return False
    if bash_matches(" ".join(rule_argv), " ".join(argv)) or actions.same_action(rule_argv, argv):
        return True
    return _flags_catch(rule_argv, argv)


def rule_program(spec: str) -> str:
    """The program a Bash rule names, canonical (``/usr/bin/git -C x push`` -> ``git``); "*" for any."""
    words = spec.replace(":*", " *").split()
    if not words or "*" in words[0]:
        return "*"
    return actions.canonical(words)[0]


def _flags_catch(rule_argv: list[str], argv: list[str]) -> bool:
    """The rule's flags, as a set, are among the command's (``rm -rf *`` catches ``rm -f -r x``)."""
    name = argv[0]
    rule_flags, rule_words = _split_flags(name, rule_argv[1:])
    if not rule_flags:
        return False
    cmd_flags, cmd_words = _split_flags(name, argv[1:])
    if not rule_flags <= cmd_flags:
        return False
    literal = " ".join(w for w in rule_words)
    return bash_matches(literal or "*", " ".join(cmd_words)) or bash_matches(literal + " *", " ".join(cmd_words))


def part_allowed(cmd: SimpleCommand, rules: list[Rule]) -> Rule | None:
    """The first allow rule that covers this command exactly, with every escalating flag it uses."""
    if cmd.dynamic or not cmd.argv:
        return None
    if any(not safe_assignment(k, v) for k, v in cmd.assignments):
        return None
    if option_globs(cmd):
        return None  # what the glob names may be options no rule names
    esc = escalations(cmd)
    text = cmd.full_text
    for rule in rules:
        spec = rule.specifier or ""
        if not bash_matches(spec, text):
            continue
        words = literal_words(spec)
        if all(e in words or e.split("=", 1)[0] in words for e in esc):
            return rule
    return None


def why_not_allowed(cmd: SimpleCommand) -> str:
    if not cmd.argv:
        names = ", ".join(k for k, _ in cmd.assignments)
        return f"it sets {names}, which can change what later commands run"
    if cmd.dynamic:
        return f"`{_show(cmd)}` uses a value known only at run time"
    bad = [k for k, v in cmd.assignments if not safe_assignment(k, v)]
    if bad:
        return f"`{_show(cmd)}` runs with {', '.join(bad)} set"
    globs = option_globs(cmd)
    if globs:
        return f"`{_show(cmd)}`: {', '.join(globs)} may name files that the program reads as options (add -- before it)"
    esc = escalations(cmd)
    if esc:
        return f"`{_show(cmd)}` uses {', '.join(esc)}, which no allow rule names"
    return f"`{_show(cmd)}` is not covered by an allow rule"


def _show(cmd: SimpleCommand) -> str:
    text = cmd.full_text.replace(DYNAMIC, "…")
    return text if len(text) <= 120 else text[:117] + "…"


def safe_read_only(cmd: SimpleCommand, within: tuple[str, ...], home: str) -> bool:
    """A built-in read-only command whose every path stays inside the working directories.
    Every option must be one keel models for that program (see :data:`safeoptions.SAFE_OPTIONS`),
    and every file an option names is a path it reads."""
    if cmd.dynamic or cmd.privileged or not cmd.argv or cmd.assignments:
        return False
    name = cmd.argv[0]
    args = cmd.argv[1:]
    if option_globs(cmd):
        return False
    if name == "git":
        if not args or args[0] not in _SAFE_GIT or escalations(cmd):
            return False
        if targets.bare_repository(cmd.cwd) is not None:
            return False  # an embedded bare repository: its own config runs diff.external, gpg.program
        if args[0] == "branch" and not all(_listing_branch_option(a) for a in args[1:]):
            return False  # only the listing forms: --edit-description runs the editor, -u writes config
        if any(not _inside_all(a, cmd.cwd, within, home) for a in args[1:] if not a.startswith("-")):
            # `git diff /dev/null ~/.ssh/id_rsa`: with a path outside the work tree git diff
            # compares the two files (an implied --no-index); every operand must stay inside
            return False
        if any(a.startswith("--output") or long_hit("git", a.split("=", 1)[0], _GIT_UNSAFE) for a in args):
            return False
        if any(_verifies_signatures(a) for a in args[1:]):
            return False  # git runs gpg (or gpg.program, ssh-keygen), which writes ~/.gnupg
        reads = targets.git_option_reads(args, cmd.cwd)
        if not all(_inside_all(r, cmd.cwd, within, home) for r in reads):
            return False
        return _inside_all(".", cmd.cwd, within, home)  # the repository it reads is where the shell is
    spec = SAFE_COMMANDS.get(name)
    if spec is None or escalations(cmd):
        return False
    model = safeoptions.SAFE_OPTIONS.get(name)
    if model is not None:
        parsed = safeoptions.parse(model, args)
        if parsed is None or parsed.bad:
            return False  # an option keel does not model, or one that runs, writes or reads a list
        if not all(_inside_all(r, cmd.cwd, within, home) for r in parsed.reads if r not in ("-", "/dev/stdin")):
            return False
        paths = parsed.positional
        keys = {k for k, _ in parsed.options}
        if name == "date" and any(not p.startswith("+") for p in paths):
            return False  # `date 0101202020` sets the clock (as root), as -s does; only +FORMAT reads
        if name == "date" and any(_date_reads_zone(k, v, cmd.cwd) for k, v in parsed.options):
            return False  # `date -d 'TZ="/etc/shadow" now'` opens that file; -f's lines may say the same
        if name in ("grep", "egrep", "fgrep") and paths and not keys & {"-e", "--regexp", "-f", "--file"}:
            paths = paths[1:]  # the first positional is the pattern
    else:
        if any(a.split("=", 1)[0] in spec.bad_flags for a in args):
            return False
        if name == "find" and any(
            re.fullmatch(r"-newer[aBcm]t", a) and _date_reads_zone("-d", b, cmd.cwd)
            for a, b in itertools.pairwise(args)
        ):
            return False  # `find -newermt 'TZ="/etc/shadow" now'` opens that zone file, as date -d does
        if name == "rg":
            keys = {k for k, _ in options.read_options(options.RG, args)}
            if keys & spec.bad_flags:  # -nz: -z inside a cluster runs decompressors
                return False
            if not all(_inside_all(r, cmd.cwd, within, home) for r in targets.read_targets(cmd)):
                return False
        paths = [a for a in args if not a.startswith("-")]
        if name == "rg" and paths and not any(a in ("-e", "-f", "--regexp") for a in args):
            paths = paths[1:]  # the first positional is the pattern
    if not spec.paths:
        return True
    if spec.max_paths is not None and len(paths) > spec.max_paths:
        return False
    if not all(_no_link_out(root, cmd.cwd, within, home) for root in trees.listing_follows(cmd)):
        return False  # ls -RL over a committed link to /etc lists /etc
    for g in set(paths) & set(cmd.globbed):  # what a glob names now, each (a link out is a read outside)
        expanded = expand_glob(g, cmd.cwd)
        if expanded is None or not all(_inside_all(p, cmd.cwd, within, home) for p in expanded):
            return False
    # without operands, ls, du, grep -r... read the directory the shell is in
    return all(_inside_all(p, cmd.cwd, within, home) for p in paths or ["."])


# --show-signature and the signature placeholders of --format (%G?, %GG, %GK...; %(signature)
# in git branch/for-each-ref formats) make git run the verifying program
_SIGNATURE_FORMAT = re.compile(r"%G|%\(signature")


def _verifies_signatures(arg: str) -> bool:
    key = arg.split("=", 1)[0]
    if len(key) >= 9 and "--show-signature".startswith(key):
        return True
    return bool(_SIGNATURE_FORMAT.search(arg))


_DATE_ZONE = re.compile(r'TZ="((?:[^"\\]|\\.)*)"?', re.I)


def _date_reads_zone(key: str, value: str | None, cwd: str) -> bool:
    """A date option whose time zone names a file (``-d 'TZ="/abs" now'``), or ``-f`` reading
    lines that may say the same (stdin, or a file that holds ``TZ=`` now)."""
    if key in ("-f", "--file"):
        if value is None or value in ("-", "/dev/stdin") or DYNAMIC in value:
            return True
        try:
            with open(os.path.join(cwd, value), "rb") as f:
                text = f.read((1 << 20) + 1)
        except OSError:
            return True
        return len(text) > 1 << 20 or b"tz=" in text.lower()
    if key not in ("-d", "--date") or value is None:
        return False
    return any(names_file(m.group(1)) for m in _DATE_ZONE.finditer(value))


_GIT_UNSAFE = frozenset({"--no-index", "--ext-diff", "--textconv", "--open-files-in-pager"})
_BRANCH_LISTING = frozenset(
    {"--list", "--all", "--remotes", "--verbose", "--show-current", "--merged", "--no-merged", "--contains"}
    | {"--no-contains", "--sort", "--format", "--color", "--no-color", "--points-at", "--ignore-case"}
    | {"--omit-empty", "--abbrev", "--no-abbrev", "--no-column", "--quiet"}
)


def _listing_branch_option(arg: str) -> bool:
    """An option of ``git branch`` that only lists (``-a``, ``-vv``, ``--sort=-committerdate``)."""
    if arg.startswith("--"):
        return arg.split("=", 1)[0] in _BRANCH_LISTING
    return bool(re.fullmatch(r"-[arvlqi]+", arg))


def option_globs(cmd: SimpleCommand) -> list[str]:
    """Glob arguments that may reach the program as options: ``sort *`` in a directory holding a
    file named ``--compress-program=sh``. A glob after ``--`` is only ever operands; before it,
    what it names on disk now must hold no name that starts with ``-`` (and there must be few
    enough names to look at). Returns the globs that fail."""
    if not cmd.globbed:
        return []
    args = cmd.argv[1:]
    find = posixpath.basename(cmd.argv[0]) == "find"  # after find's `--`, `-delete` is still an action
    end = args.index("--") if "--" in args and not find else len(args)
    risky: list[str] = []
    for g in dict.fromkeys(a for a in args[:end] if a in cmd.globbed):
        if g[0] not in "*?[-" and not (g[0] in "(!)" and find):
            continue  # bash keeps what the pattern starts with: `./*`, `src/*` never expand to an option
        if g.startswith("-"):
            risky.append(g)
            continue
        expanded = expand_glob(g, cmd.cwd)
        if expanded is None:
            risky.append(g)
            continue
        for p in expanded:
            shown = posixpath.relpath(p, cmd.cwd)
            if shown.startswith("-") or (find and shown[:1] in "(!)"):
                risky.append(g)
                break
    return risky


def _no_link_out(root: str, cwd: str, within: tuple[str, ...], home: str) -> bool:
    """No symlink under ``root`` leads outside the working directories (nor is the tree too
    large to tell)."""
    from agentkeel.policy.permissions.paths import candidates

    if DYNAMIC in root:
        return False
    lexical, real = candidates(root, cwd, home)
    result = trees.walk(lexical, real, trees.TreeRead(root, True), [], within)
    return result.outside is None and not result.too_large


def _inside_all(arg: str, cwd: str, within: tuple[str, ...], home: str) -> bool:
    from agentkeel.policy.permissions.paths import candidates, inside

    static = re.split(r"[*?\[]", arg, maxsplit=1)[0] or "."
    lexical, real = candidates(static, cwd, home)
    return inside(lexical, within) and inside(real, within)


def path_words(cmd: SimpleCommand) -> list[str]:
    """Arguments that may name files: plain args, ``--opt=value`` values, ``@file`` and ``of=``/``if=``."""
    out: list[str] = []
    grep = posixpath.basename(cmd.argv[0]) in ("grep", "egrep", "fgrep") if cmd.argv else False
    for a in cmd.argv[1:]:
        if DYNAMIC in a:
            continue
        if a.startswith("-"):
            if grep and a.startswith(("--include=", "--exclude=", "--exclude-dir=")):
                continue  # globs of what grep leaves out or keeps: no file is read by them
            if "=" in a:
                out.append(a.split("=", 1)[1])
            continue
        if a.startswith("@"):
            out.append(a[1:])
        if re.match(r"^(of|if)=", a):
            out.append(a[3:])
        out.append(a)
    return out


def expand_glob(arg: str, cwd: str, limit: int = 2000) -> list[str] | None:
    """What a glob names on disk now; None when there are too many to check."""
    return shell_expand(arg if arg.startswith("/") else os.path.join(cwd, arg), limit)
