"""What an analysed Bash command needs before it may run without asking.

Three questions per simple command: does a deny/ask rule catch it (broad matching: full
paths, reordered and long flags, sudo), does an allow rule cover it exactly (and every
escalating flag it uses), and is it one of the few read-only commands keel allows on its
own inside the working directories.
"""

from __future__ import annotations

import glob
import os
import posixpath
import re

import msgspec

from agentkeel.permissions import actions, options, sed
from agentkeel.permissions.bash import DYNAMIC, SimpleCommand
from agentkeel.permissions.rules import Rule, bash_matches, literal_words
from agentkeel.permissions.shellstate import safe_assignment

# flags that turn a command an allow rule names into something else: they must appear in the
# rule itself. Long options also match ``--opt=value``; single letters match inside clusters.
_ESCALATING: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # command: (long or exact options, short letters)
    "find": (frozenset({"-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}), frozenset()),
    # --files0-from: the files read are named in another file, known only at run time
    "sort": (frozenset({"--output", "--compress-program", "--files0-from"}), frozenset({"o"})),
    "wc": (frozenset({"--files0-from"}), frozenset()),
    "du": (frozenset({"--files0-from"}), frozenset()),
    "rg": (frozenset({"--pre", "--pre-glob"}), frozenset()),
    "tar": (
        frozenset(
            {
                "--to-command",
                "--checkpoint-action",
                "--use-compress-program",
                "--rsh-command",
                "--info-script",
                "--new-volume-script",
                "--files-from",
            }
        ),
        frozenset({"I", "F", "T"}),
    ),
    "zip": (frozenset({"--unzip-command", "-TT"}), frozenset()),
    "rsync": (frozenset({"--rsh", "--rsync-path"}), frozenset({"e"})),
    "curl": (frozenset({"--output", "--upload-file", "--config", "--remote-name"}), frozenset({"o", "O", "T", "K"})),
    "wget": (frozenset({"--output-document", "--post-file", "--body-file", "--execute"}), frozenset({"O", "e"})),
    "ssh": (frozenset({"-oProxyCommand", "-oLocalCommand"}), frozenset()),
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
            }
        ),
        frozenset(),
    ),
}
_GIT_GLOBAL_WITH_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"})
_GIT_RISKY_GLOBALS = frozenset({"-c", "--config-env", "--exec-path", "--git-dir", "--work-tree"})
_GIT_RISKY_SUBCOMMANDS = frozenset({"config", "filter-branch", "submodule", "difftool", "mergetool", "bisect"})
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
    "rg": SafeCommand(frozenset({"--pre", "--pre-glob"})),
    "test": SafeCommand(),
    "find": SafeCommand(
        frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"})
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
    for a in args:
        key = a.split("=", 1)[0]
        if key in longs:
            found.append(key)
        elif shorts and a.startswith("-") and not a.startswith("--"):
            found += [f"-{ch}" for ch in a[1:] if ch in shorts]
        elif name == "ssh" and a.startswith("-o") and re.match(r"-o\s*(Proxy|Local|Permit)", a, re.I):
            found.append(a)
    if name == "git":
        found += _git_escalations(args)
    elif name == "sed":
        found += sed.dangerous(sed.read_call(args))
    elif name in _AWK:
        script = next((a for a in args if not a.startswith("-")), "")
        if re.search(r"system|\||>|getline|print\s*>", script):
            found.append("awk system()/redirect")
    found += options.escalations(cmd.argv)
    return list(dict.fromkeys(found))


def _git_escalations(args: list[str]) -> list[str]:
    found: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        key = args[i].split("=", 1)[0]
        if key in _GIT_RISKY_GLOBALS:
            found.append(key)
        i += 2 if args[i] in _GIT_GLOBAL_WITH_VALUE else 1
    sub = args[i] if i < len(args) else ""
    rest = args[i + 1 :]
    reading_config = sub == "config" and any(a in ("--get", "--list", "-l", "--get-all", "--get-regexp") for a in rest)
    if sub in _GIT_RISKY_SUBCOMMANDS and not reading_config:
        found.append(sub)
    if sub == "rebase" and any(a in ("-x", "--exec") or a.startswith("--exec=") for a in rest):
        found.append("--exec")
    if sub == "grep" and any(
        a.startswith("--open-files-in-pager") or (a.startswith("-") and not a.startswith("--") and "O" in a)
        for a in rest
    ):
        found.append("-O")
    if sub in ("fetch", "pull", "clone", "ls-remote") and "-u" in rest:
        found.append("-u")
    return found


def part_allowed(cmd: SimpleCommand, rules: list[Rule]) -> Rule | None:
    """The first allow rule that covers this command exactly, with every escalating flag it uses."""
    if cmd.dynamic or not cmd.argv:
        return None
    if any(not safe_assignment(k, v) for k, v in cmd.assignments):
        return None
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
    esc = escalations(cmd)
    if esc:
        return f"`{_show(cmd)}` uses {', '.join(esc)}, which no allow rule names"
    return f"`{_show(cmd)}` is not covered by an allow rule"


def _show(cmd: SimpleCommand) -> str:
    text = cmd.full_text.replace(DYNAMIC, "…")
    return text if len(text) <= 120 else text[:117] + "…"


def safe_read_only(cmd: SimpleCommand, within: tuple[str, ...], home: str) -> bool:
    """A built-in read-only command whose every path stays inside the working directories."""
    if cmd.dynamic or cmd.privileged or not cmd.argv or cmd.assignments:
        return False
    name = cmd.argv[0]
    args = cmd.argv[1:]
    if name == "git":
        if not args or args[0] not in _SAFE_GIT or escalations(cmd):
            return False
        if args[0] == "branch" and any(
            not a.startswith("-") or a in ("-d", "-D", "-m", "-M", "-c", "-C") for a in args[1:]
        ):
            return False
        if any(a.startswith("--output") or a == "--no-index" for a in args):
            return False
        return _inside_all(".", cmd.cwd, within, home)  # the repository it reads is where the shell is
    spec = SAFE_COMMANDS.get(name)
    if spec is None or escalations(cmd):
        return False
    if any(a.split("=", 1)[0] in spec.bad_flags for a in args):
        return False
    if not spec.paths:
        return True
    paths = [a for a in args if not a.startswith("-")]
    if name in ("grep", "egrep", "fgrep", "rg") and paths and not any(a in ("-e", "-f", "--regexp") for a in args):
        paths = paths[1:]  # the first positional is the pattern
    if spec.max_paths is not None and len(paths) > spec.max_paths:
        return False
    # without operands, ls, du, grep -r... read the directory the shell is in
    return all(_inside_all(p, cmd.cwd, within, home) for p in paths or ["."])


def _inside_all(arg: str, cwd: str, within: tuple[str, ...], home: str) -> bool:
    from agentkeel.permissions.paths import candidates, inside

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
    pattern = arg if arg.startswith("/") else os.path.join(cwd, arg)
    out: list[str] = []
    for i, p in enumerate(glob.iglob(pattern, include_hidden=True)):
        if i >= limit:
            return None
        out.append(p)
    return out


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


def uncovered_suggestion(cmd: SimpleCommand) -> str | None:
    """A rule the user may choose to remember for this command."""
    if cmd.dynamic or not cmd.argv:
        return None
    words = [*cmd.privileged, *cmd.argv]
    if len(words) >= 2 and words[0] in _SUBCOMMAND_TOOLS and not words[1].startswith("-"):
        return f"Bash({words[0]} {words[1]} *)"  # `npm test *`: that subcommand, any arguments
    return f"Bash({' '.join(words)})"  # anything else: exactly this command, never a whole program
