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
from agentkeel.policy.permissions import actions, options, safeoptions, sed, targets, trees
from agentkeel.policy.permissions.bash import DYNAMIC, SimpleCommand
from agentkeel.policy.permissions.rules import Rule, bash_matches, literal_words
from agentkeel.policy.permissions.shellstate import names_file, safe_assignment
from agentkeel.tools import SHELL

# flags that turn a command an allow rule names into something else: they must appear in the
# rule itself. Long options also match ``--opt=value``; single letters match inside clusters.
_ESCALATING: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # command: (long or exact options, short letters)
    "find": (frozenset({"-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}), frozenset()),
    # --files0-from: the files read are named in another file, known only at run time
    "sort": (frozenset({"--output", "--compress-program", "--files0-from"}), frozenset({"o"})),
    "wc": (frozenset({"--files0-from"}), frozenset()),
    "du": (frozenset({"--files0-from"}), frozenset()),
    "rg": (frozenset({"--pre", "--pre-glob", "--hostname-bin"}), frozenset()),
    "tar": (
        frozenset(
            {
                "--to-command",
                "--checkpoint-action",
                "--use-compress-program",
                "--rsh-command",
                "--rmt-command",
                "--info-script",
                "--new-volume-script",
                "--files-from",
            }
        ),
        frozenset({"I", "F", "T"}),
    ),
    "zip": (frozenset({"--unzip-command", "-TT"}), frozenset()),
    "rsync": (frozenset({"--rsh", "--rsync-path"}), frozenset({"e"})),
    "curl": (
        frozenset({"--output", "--upload-file", "--config", "--remote-name", "--remote-name-all"}),
        frozenset({"o", "O", "T", "K"}),
    ),
    "wget": (
        # --use-askpass runs a program; --config reads a wgetrc (output_document, post_file...)
        frozenset({"--output-document", "--post-file", "--body-file", "--execute", "--use-askpass", "--config"}),
        frozenset({"O", "e"}),
    ),
    # man runs the pager, browser or preprocessors it is given; its config file defines them
    "man": (frozenset({"--pager", "--html", "--preprocessor", "--config-file"}), frozenset({"P", "H", "C", "p"})),
    # less: a log file it writes, a lesskey file that binds keys to commands
    "less": (
        frozenset({"--log-file", "--LOG-FILE", "--lesskey-file", "--lesskey-src", "--lesskey-content"}),
        frozenset({"o", "O", "k"}),
    ),
    "git": (
        frozenset(
            {
                "--output",
                "--ext-diff",
                "--upload-pack",
                "--receive-pack",
                "--exec",
                "--open-files-in-pager",
                "--extcmd",
                "--template",
                "--config",
                "--exec-path",
                "--config-env",
                # git send-email runs these programs
                "--smtp-server",
                "--sendmail-cmd",
                "--to-cmd",
                "--cc-cmd",
                "--header-cmd",
            }
        ),
        frozenset(),
    ),
}
# ssh, scp and sftp: options that run a local program or load a library (``-o ProxyCommand=``,
# ``-F`` a config file that may say the same, ``-I`` a PKCS#11 library, scp/sftp ``-S`` the
# ssh program, sftp ``-D`` a local sftp server)
_SSH_RISKY = {"ssh": "FI", "scp": "FS", "sftp": "FSD"}
_SSH_RISKY_KEYS = re.compile(
    r"\s*(Proxy|Local|Permit|KnownHostsCommand|PKCS11Provider|SecurityKeyProvider|Match|Include)",
    re.I,
)
_GIT_GLOBAL_WITH_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"})
_GIT_RISKY_GLOBALS = frozenset({"-c", "--config-env", "--exec-path", "--git-dir", "--work-tree"})
_GIT_RISKY_SUBCOMMANDS = frozenset({"config", "filter-branch", "submodule", "difftool", "mergetool", "bisect"})
_REBASE_EXEC = frozenset({"--exec"})
_GREP_PAGER = frozenset({"--open-files-in-pager"})
_AWK = frozenset({"awk", "gawk", "mawk", "nawk"})
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


def escalations(cmd: SimpleCommand) -> list[str]:
    """Options that make a usually harmless command write, execute or send elsewhere."""
    if not cmd.argv:
        return []
    name = posixpath.basename(cmd.argv[0])
    args = cmd.argv[1:]
    found: list[str] = []
    longs, shorts = _ESCALATING.get(name, (frozenset(), frozenset()))
    if name == "tar" and args and not args[0].startswith("-"):
        args = ["-" + args[0], *args[1:]]  # traditional syntax: tar cIf prog out.tar dir
    for a in args:
        if a == "--" and name != "find":  # find's expression goes on after --
            break
        key = a.split("=", 1)[0]
        hit = _long_hit(name, key, longs)
        if hit is not None:
            found.append(hit)
        elif shorts and a.startswith("-") and not a.startswith("--"):
            found += [f"-{ch}" for ch in a[1:] if ch in shorts]
        elif name == "zip" and a.startswith("-") and not a.startswith("--") and "TT" in a:
            found.append("-TT")  # zip -TTsh: the unzip command, attached
        elif name == "less" and a.startswith("+"):
            found.append("+command")  # less +!cmd: a command at start, `!` runs a shell
    if name in _SSH_RISKY:
        for key, value in targets.ssh_options(name, args):
            if key == "-o" and _SSH_RISKY_KEYS.match(value):
                found.append(f"-o{value}")
            elif key[1] in _SSH_RISKY[name]:
                found.append(key)
    if name == "git":
        found += _git_escalations(args)
    elif name == "sed":
        found += sed.dangerous(sed.read_call(args))
    elif name in _AWK:
        script = next((a for a in args if not a.startswith("-")), "")
        if re.search(r"system|\||>|getline|print\s*>", script):
            found.append("awk system()/redirect")
    found += options.escalations(cmd.argv)
    found += _tests_elsewhere(cmd)
    return list(dict.fromkeys(found))


def _tests_elsewhere(cmd: SimpleCommand) -> list[str]:
    """Test paths outside the repository the command runs in: ``pytest /tmp/x`` imports
    /tmp/x/conftest.py and the tests there, ``go test /tmp/x/...`` builds and runs them (another
    user of the machine can plant either), as ``--rootdir`` or ``-c`` would."""
    name, args = options.program(cmd.argv)
    if name == "go":
        if not args or args[0] != "test":
            return []
        args = args[1:]
    elif name != "pytest":
        return []
    cli = options.PROGRAMS[name]
    top = targets.toplevel(cmd.cwd)
    top_real = os.path.realpath(top)
    out: list[str] = []
    for key, value in options.read_options(cli, args):
        if key or not value or DYNAMIC in value:
            continue
        path = posixpath.normpath(posixpath.join(cmd.cwd, value.split("::", 1)[0]))
        if not (_under(path, top) and _under(os.path.realpath(path), top_real)):
            out.append(value)
    return out


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


# exact names of harmless long options that are prefixes of escalating ones (``tar --file``
# against ``--files-from``): written in full they are themselves, not an abbreviation
_KNOWN_LONGS: dict[str, frozenset[str]] = {
    "tar": frozenset({"--file", "--checkpoint", "--to-stdout"}),
    "git": frozenset({"--exec", "--config", "--to", "--cc"}),
    "curl": frozenset({"--remote-name"}),
    "wget": frozenset({"--content-disposition"}),
}


def _long_hit(name: str, key: str, longs: frozenset[str]) -> str | None:
    """``key`` as one of the program's escalating long options: exactly, or as an abbreviation
    (getopt_long, argp, git's parse-options and curl take any unique prefix; keel takes any
    prefix of three characters or more, ``--x``, since a prefix that is ambiguous among the
    program's options only makes it fail)."""
    if key in longs:
        return key
    if not key.startswith("--") or len(key) < 3 or key in _KNOWN_LONGS.get(name, frozenset()):
        return None
    return next((n for n in sorted(longs) if n.startswith("--") and n.startswith(key)), None)


def _git_escalations(args: list[str]) -> list[str]:
    found: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        key = args[i].split("=", 1)[0]
        hit = key if key in _GIT_RISKY_GLOBALS else _long_hit("git", key, _GIT_RISKY_GLOBALS)
        if hit is not None:
            found.append(hit)
        i += 2 if args[i] in _GIT_GLOBAL_WITH_VALUE else 1
    sub = args[i] if i < len(args) else ""
    rest = args[i + 1 :]
    reading_config = sub == "config" and any(a in ("--get", "--list", "-l", "--get-all", "--get-regexp") for a in rest)
    if sub in _GIT_RISKY_SUBCOMMANDS and not reading_config:
        found.append(sub)
    if sub == "rebase" and any(
        re.match(r"-[^-]*x", a) or _long_hit("git", a.split("=", 1)[0], _REBASE_EXEC) for a in rest
    ):
        found.append("--exec")  # -x, -x'cmd' and -ix cmd alike
    if sub == "grep" and any(
        _long_hit("git", a.split("=", 1)[0], _GREP_PAGER) or (a.startswith("-") and not a.startswith("--") and "O" in a)
        for a in rest
    ):
        found.append("-O")
    if sub in ("fetch", "pull", "clone", "ls-remote") and any(re.match(r"-[^-]*u", a) for a in rest):
        found.append("-u")  # clone/ls-remote -u is --upload-pack, attached too (-ush)
    if sub == "clone" and any(re.match(r"-[^-]*c", a) for a in rest):
        found.append("-c")  # clone -c core.fsmonitor=...: config in the new repository, used at checkout
    return found


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
        if any(a.startswith("--output") or _long_hit("git", a.split("=", 1)[0], _GIT_UNSAFE) for a in args):
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


_SUBCOMMAND_TOOLS = frozenset(
    {
        "git",
        "npm",
        "pnpm",
        "yarn",
        "bun",
        "npx",
        "cargo",
        "go",
        "docker",
        "kubectl",
        "pip",
        "uv",
        "poetry",
        "make",
        "gh",
        "terraform",
        "dotnet",
        "mvn",
        "gradle",
        "bundle",
        "rails",
        "mix",
        "deno",
        "python",
        "python3",
    }
)


# (program, subcommand) pairs that run a command, code or a request named in their arguments:
# a suggestion never ends there (``Bash(uv run *)`` would admit ``uv run rm -rf /``)
_RUNS_ANYTHING = frozenset(
    {
        ("uv", "run"),
        ("npm", "run"),  # a script by name: the suggestion keeps the name (`npm run build *`)
        ("npm", "run-script"),
        ("pnpm", "run"),
        ("yarn", "run"),
        ("uv", "tool"),
        ("uvx", ""),
        ("npx", ""),
        ("pnpx", ""),
        ("bunx", ""),
        ("npm", "exec"),
        ("npm", "x"),
        ("pnpm", "exec"),
        ("pnpm", "dlx"),
        ("yarn", "exec"),
        ("yarn", "dlx"),
        ("bun", "x"),
        ("bun", "run"),
        ("bun", "exec"),
        ("poetry", "run"),
        ("pipenv", "run"),
        ("pdm", "run"),
        ("hatch", "run"),
        ("rye", "run"),
        ("bundle", "exec"),
        ("deno", "run"),
        ("deno", "eval"),
        ("deno", "task"),  # a task by name, as npm run
        ("yarn", "workspace"),  # yarn workspace <name> <any yarn command>: exec, dlx, node...
        ("yarn", "workspaces"),
        ("docker", "run"),
        ("docker", "exec"),
        ("docker", "compose"),
        ("podman", "run"),
        ("podman", "exec"),
        ("kubectl", "exec"),
        ("kubectl", "run"),
        ("kubectl", "debug"),
        ("gh", "api"),
        ("gh", "extension"),
        ("gh", "ext"),
        ("go", "run"),
        ("cargo", "run"),
        ("dotnet", "run"),
        ("mix", "run"),
        ("rails", "runner"),
        ("git", "bisect"),
        ("git", "submodule"),
        ("git", "filter-branch"),
        ("git", "difftool"),
        ("git", "mergetool"),
        ("mvn", "exec:exec"),
        ("mvn", "exec:java"),
        ("python", "-c"),
        ("python3", "-c"),
    }
)
# programs that run what their arguments say: a suggestion never ends right after one
_INTERPRETERS = frozenset(
    {"sh", "bash", "zsh", "dash", "ksh", "fish", "env", "xargs", "exec", "eval", "sudo", "doas", "nohup"}
    | {"timeout", "nice", "setsid", "time", "watch", "node", "deno", "bun", "ruby", "perl", "php", "python"}
    | {"python3", "pip", "pip3", "npm", "npx", "uv", "uvx", "make", "cmake", "bundle", "docker", "git", "curl"}
    | {"wget", "ssh", "osascript", "powershell", "pwsh", "lua", "tclsh", "expect", "awk", "gawk", "sed", "find"}
    | {"run", "exec", "x", "dlx", "eval", "script", "shell", "repl", "console"}
    # interpreters and launchers a runner may start: each runs code or a command its arguments give
    | {"ipython", "pypy", "pypy3", "coverage", "tsx", "ts-node", "esno", "zx", "vite-node", "cross-env"}
    | {"dotenv", "dotenv-cli", "env-cmd", "concurrently", "npm-run-all", "run-p", "run-s", "nodemon", "pm2"}
    | {"xonsh", "irb", "pry", "iex", "elixir", "erl", "ghci", "runghc", "Rscript", "R", "julia", "scala"}
    | {"groovy", "jshell", "nu", "tcsh", "csh", "busybox", "strace", "ltrace", "gdb", "valgrind", "sudo"}
    | {"pnpm", "yarn", "bunx", "pnpx", "npm-exec", "tox", "nox", "invoke", "doit", "just", "watchexec"}
)
# runners whose next word names where, not what (``yarn workspace web <any yarn command>``)
_WORKSPACE_RUNNERS = frozenset({("yarn", "workspace"), ("yarn", "workspaces")})
# commands that run a command on another machine: a suggestion is exactly what was approved
_REMOTE_RUNNERS = frozenset(
    {("gcloud", "compute", "ssh"), ("gcloud", "cloud-shell", "ssh"), ("az", "vm", "run-command")}
    | {("gh", "codespace", "ssh"), ("aws", "ssm", "start-session"), ("aws", "ecs", "execute-command")}
)


# command groups whose second word is the action (`gh repo clone` / `gh repo delete`)
_TWO_LEVELS = frozenset({"gh", "aws", "gcloud", "az"})


def _runs_anything(words: list[str]) -> bool:
    return (words[0], "") in _RUNS_ANYTHING or (len(words) > 1 and (words[0], words[1]) in _RUNS_ANYTHING)


def uncovered_suggestion(cmd: SimpleCommand) -> str | None:
    """A rule the user may choose to remember for this command: never one wider than what was
    approved reaches (``uv run pytest`` suggests ``Bash(uv run pytest *)``, never ``uv run *``)."""
    if cmd.dynamic or not cmd.argv:
        return None
    words = [*cmd.privileged, *cmd.argv]
    if _runs_anything(words):
        # the runner, then the program it runs when that is a plain tool name (not an interpreter)
        at = 1 if (words[0], "") in _RUNS_ANYTHING else 2
        inner = words[at] if len(words) > at else ""
        if (
            words[0] not in ("docker", "podman", "kubectl", "gh", "git", "deno", "python", "python3")
            and tuple(words[:2]) not in _WORKSPACE_RUNNERS
            and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:-]*", inner)
            and not re.fullmatch(r"python[0-9.]*", inner)
            and inner not in _INTERPRETERS
            and not _runs_anything([inner, *words[at + 1 : at + 2]])
        ):
            return f"{SHELL}({' '.join(words[: at + 1])} *)"
        return f"{SHELL}({' '.join(words)})"  # exactly this command
    if tuple(words[:3]) in _REMOTE_RUNNERS:
        return f"{SHELL}({' '.join(words)})"
    if words[0] in _TWO_LEVELS and len(words) >= 3 and re.fullmatch(r"[a-z][a-z0-9-]*", words[2]):
        return f"{SHELL}({' '.join(words[:3])} *)"  # `gh pr list *`: approving a clone is not approving a delete
    if len(words) >= 2 and words[0] in _SUBCOMMAND_TOOLS and not words[1].startswith("-"):
        return f"{SHELL}({words[0]} {words[1]} *)"  # `npm test *`: that subcommand, any arguments
    return f"{SHELL}({' '.join(words)})"  # anything else: exactly this command, never a whole program
