"""Options that make a usually harmless command write, execute or send elsewhere: an allow
rule that names the command must name each of them too (``Bash(git diff *)`` does not cover
``git diff --ext-diff``). Per program, :data:`_ESCALATING` lists the long options and short
letters; ssh's, git's, sed's and awk's are read more closely, the package managers' and test
runners' through :func:`options.escalations`, and test paths outside the repository count too.
"""

from __future__ import annotations

import os
import posixpath
import re

from agentkeel.policy.permissions import options, sed, targets
from agentkeel.policy.permissions.bash import DYNAMIC
from agentkeel.policy.permissions.bashmodel import SimpleCommand

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
        hit = long_hit(name, key, longs)
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


def long_hit(name: str, key: str, longs: frozenset[str]) -> str | None:
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
        hit = key if key in _GIT_RISKY_GLOBALS else long_hit("git", key, _GIT_RISKY_GLOBALS)
        if hit is not None:
            found.append(hit)
        i += 2 if args[i] in _GIT_GLOBAL_WITH_VALUE else 1
    sub = args[i] if i < len(args) else ""
    rest = args[i + 1 :]
    reading_config = sub == "config" and any(a in ("--get", "--list", "-l", "--get-all", "--get-regexp") for a in rest)
    if sub in _GIT_RISKY_SUBCOMMANDS and not reading_config:
        found.append(sub)
    if sub == "rebase" and any(
        re.match(r"-[^-]*x", a) or long_hit("git", a.split("=", 1)[0], _REBASE_EXEC) for a in rest
    ):
        found.append("--exec")  # -x, -x'cmd' and -ix cmd alike
    if sub == "grep" and any(
        long_hit("git", a.split("=", 1)[0], _GREP_PAGER) or (a.startswith("-") and not a.startswith("--") and "O" in a)
        for a in rest
    ):
        found.append("-O")
    if sub in ("fetch", "pull", "clone", "ls-remote") and any(re.match(r"-[^-]*u", a) for a in rest):
        found.append("-u")  # clone/ls-remote -u is --upload-pack, attached too (-ush)
    if sub == "clone" and any(re.match(r"-[^-]*c", a) for a in rest):
        found.append("-c")  # clone -c core.fsmonitor=...: config in the new repository, used at checkout
    return found
