"""Action normalisation: what a command *does*, however the program lets it be spelled.

A deny or ask rule names an action (``Bash(git reset --hard*)``, ``Bash(git push --force *)``).
Before such a rule is matched, each simple command is rewritten into its canonical form:

1. the program is named by its basename (``/usr/bin/rm``, ``./rm`` -> ``rm``), and ``python -m
   MODULE`` by the module (``python3 -u -m pip install x`` -> ``pip install x``);
2. the program's global options, which may stand before its subcommand, are dropped
   (:data:`GLOBALS`: ``git -C dir --no-pager reset --hard`` -> ``git reset --hard``);
3. the semantic *actions* it performs are named (:func:`actions`): a refspec ``+main`` forces a
   push as ``--force`` does, ``:main`` deletes as ``--delete`` does.

A rule is analysed the same way, and catches a command when the command's canonical form
matches the rule's, or when both perform the same action on the same operands. Where keel
cannot tell which program runs (``$(which rm) -rf x``), a Bash deny or ask rule makes it ask
(see ``PermissionEngine._ask_stage``).
"""

from __future__ import annotations

import posixpath
import re

import msgspec

from agentkeel.policy.permissions.words import DYNAMIC


class Globals(msgspec.Struct, frozen=True):
    """The options a program takes before its subcommand (or, ``anywhere``, wherever they stand)."""

    values: frozenset[str]  # take a value: the next word, or ``--opt=value`` / ``-Xvalue``
    flags: frozenset[str] = frozenset()  # take none
    anywhere: bool = False  # kubectl, make: global options may follow the subcommand too
    plus_first: bool = False  # cargo: ``+toolchain`` as the first word
    any_flag: bool = False  # every other ``-x``/``--x`` before the subcommand is a flag too
    assignments: bool = False  # make: ``VAR=value`` words set variables, they name no target


def _f(*names: str) -> frozenset[str]:
    return frozenset(names)


# program -> its global options. Read as: ``git -C DIR reset --hard`` is ``git reset --hard``.
GLOBALS: dict[str, Globals] = {
    "git": Globals(
        values=_f(
            "-C",
            "-c",
            "--git-dir",
            "--work-tree",
            "--namespace",
            "--config-env",
            "--super-prefix",
            "--list-cmds",
            "--attr-source",
        ),
        flags=_f(
            "--no-pager",
            "-P",
            "-p",
            "--paginate",
            "--bare",
            "--exec-path",
            "--no-replace-objects",
            "--literal-pathspecs",
            "--glob-pathspecs",
            "--noglob-pathspecs",
            "--icase-pathspecs",
            "--no-optional-locks",
            "--no-lazy-fetch",
            "--no-advice",
            "--html-path",
            "--man-path",
            "--info-path",
        ),
    ),
    "docker": Globals(
        values=_f(
            "-H", "--host", "--context", "-c", "--config", "-l", "--log-level", "--tlscacert", "--tlscert", "--tlskey"
        ),
        flags=_f("-D", "--debug", "--tls", "--tlsverify"),
    ),
    "podman": Globals(
        values=_f(
            "-H",
            "--host",
            "--context",
            "-c",
            "--config",
            "--connection",
            "--url",
            "--identity",
            "--root",
            "--runroot",
            "--storage-driver",
            "--log-level",
            "--cgroup-manager",
            "--events-backend",
            "--network-cmd-path",
            "--tmpdir",
            "--module",
        ),
        flags=_f("-r", "--remote", "-D", "--debug", "--syslog"),
    ),
    "kubectl": Globals(
        values=_f(
            "--context",
            "-n",
            "--namespace",
            "--kubeconfig",
            "--cluster",
            "--user",
            "-s",
            "--server",
            "--token",
            "--as",
            "--as-group",
            "--as-uid",
            "--request-timeout",
            "-v",
            "--v",
            "--certificate-authority",
            "--client-certificate",
            "--client-key",
            "--cache-dir",
            "--tls-server-name",
            "--profile",
            "--profile-output",
        ),
        flags=_f("--insecure-skip-tls-verify", "--match-server-version", "--warnings-as-errors"),
        anywhere=True,
    ),
    "npm": Globals(
        values=_f(
            "--prefix",
            "-C",
            "--dir",
            "--cwd",
            "-w",
            "--workspace",
            "--userconfig",
            "--globalconfig",
            "--cache",
            "--registry",
            "--loglevel",
        ),
        any_flag=True,
    ),
    "pnpm": Globals(
        values=_f(
            "--prefix",
            "-C",
            "--dir",
            "--cwd",
            "-w",
            "--workspace",
            "--filter",
            "-F",
            "--reporter",
            "--loglevel",
            "--store-dir",
        ),
        any_flag=True,
    ),
    "yarn": Globals(
        values=_f(
            "--prefix",
            "-C",
            "--dir",
            "--cwd",
            "-w",
            "--workspace",
            "--modules-folder",
            "--cache-folder",
            "--global-folder",
            "--registry",
        ),
        any_flag=True,
    ),
    "cargo": Globals(
        values=_f("-Z", "--config", "-C", "--color", "--manifest-path", "--target-dir", "--explain"),
        flags=_f("-v", "-vv", "--verbose", "-q", "--quiet", "--locked", "--offline", "--frozen"),
        plus_first=True,
    ),
    "make": Globals(
        values=_f(
            "-C",
            "--directory",
            "-f",
            "--file",
            "--makefile",
            "-I",
            "--include-dir",
            "-o",
            "--old-file",
            "-W",
            "--what-if",
            "--new-file",
            "--assume-new",
            "-l",
            "--load-average",
            "-O",
            "--output-sync",
            "--eval",
        ),
        anywhere=True,
        any_flag=True,
        assignments=True,
    ),
}
GLOBALS["gmake"] = GLOBALS["make"]

# python's own options before ``-m MODULE`` (those taking a value, then the letters that take none)
_PYTHON_VALUES = _f("-X", "-W", "--check-hash-based-pycs")
_PYTHON = re.compile(r"python(?:[23](?:\.\d+)?)?")
# ``python -m MODULE`` runs these as the program of the same name
PYTHON_MODULES: dict[str, str] = {
    "pip": "pip",
    "pip3": "pip",
    "pytest": "pytest",
    "venv": "venv",
    "http.server": "http.server",
    "twine": "twine",
    "poetry": "poetry",
    "uv": "uv",
}


def program(word: str) -> str:
    """``/usr/bin/rm`` and ``./rm`` are ``rm``; a name known only at run time stays unknown."""
    if DYNAMIC in word:
        return DYNAMIC
    return posixpath.basename(word) if "/" in word else word


def canonical(argv: list[str]) -> list[str]:
    """The command with the program by name, ``python -m`` resolved and global options dropped."""
    if not argv:
        return argv
    name = program(argv[0])
    args = argv[1:]
    if _PYTHON.fullmatch(name):
        module = _python_module(args)
        if module is not None:
            name, args = module
    spec = GLOBALS.get(name)
    if spec is not None:
        args = _drop_globals(spec, args)
    return [name, *args]


def _python_module(args: list[str]) -> tuple[str, list[str]] | None:
    i = 0
    while i < len(args):
        a = args[i]
        if a in _PYTHON_VALUES:
            i += 2
            continue
        if a.startswith("-m"):
            module = a[2:] or (args[i + 1] if i + 1 < len(args) else "")
            rest = args[i + 1 :] if a[2:] else args[i + 2 :]
            return PYTHON_MODULES.get(module, module), rest
        if a.startswith("-") and not a.startswith("--") and a not in ("-", "-c"):
            if any(ch in "cm" for ch in a[1:]):  # -Im pip, -uc script: the letter takes the rest
                j = min(a.index(ch) for ch in "cm" if ch in a[1:])
                if a[j] == "m":
                    return _python_module(["-" + a[j:], *args[i + 1 :]])
                return None
            i += 1
            continue
        return None  # a script, -c, or --: no module
    return None


def _drop_globals(spec: Globals, args: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    seen_sub = False
    if spec.plus_first and args and args[0].startswith("+"):
        i = 1
    while i < len(args):
        a = args[i]
        if a == "--":
            out += args[i:]
            break
        if seen_sub and not spec.anywhere:
            out.append(a)
            i += 1
            continue
        key = a.split("=", 1)[0]
        if key in spec.values:
            i += 1 if "=" in a else 2
            continue
        short_joined = next((v for v in spec.values if len(v) == 2 and a.startswith(v) and len(a) > 2), None)
        if short_joined is not None and not a.startswith("--"):
            i += 1  # -Cdir, -nkube-system
            continue
        if key in spec.flags or (spec.any_flag and a.startswith("-") and not seen_sub and a != "-"):
            i += 1
            continue
        if spec.assignments and not a.startswith("-") and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", a):
            i += 1
            continue
        if not a.startswith("-"):
            seen_sub = True
        out.append(a)
        i += 1
    return out


# --- semantic actions -------------------------------------------------------------------------

_PUSH_FORCE = ("--force", "--force-with-lease", "--force-if-includes", "--mirror")
_PUSH_DELETE = ("--delete", "--mirror", "--prune")


def _shorts(args: list[str]) -> set[str]:
    """Letters of short option clusters (``-uf`` -> u, f), up to ``--``."""
    out: set[str] = set()
    for a in args:
        if a == "--":
            break
        if a.startswith("-") and not a.startswith("--") and len(a) > 1:
            out.update(a[1:])
    return out


def _longs(args: list[str]) -> set[str]:
    out: set[str] = set()
    for a in args:
        if a == "--":
            break
        if a.startswith("--"):
            out.add(a.split("=", 1)[0])
    return out


def _positional(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("-")]


class Action(msgspec.Struct, frozen=True):
    """A named effect and the operands it acts on (refspecs without ``+``/``:``, paths)."""

    name: str
    operands: tuple[str, ...] = ()


def actions(argv: list[str]) -> list[Action]:
    """The actions a canonical command performs, from :data:`ACTION_TABLE`'s families."""
    if len(argv) < 1:
        return []
    name, args = argv[0], argv[1:]
    if name == "rm":
        if {"r", "R"} & _shorts(args) or "--recursive" in _longs(args):
            return [Action("rm recursive", tuple(_positional(args)))]
        return []
    if name != "git" or not args:
        return []
    sub, rest = args[0], args[1:]
    shorts, longs, pos = _shorts(rest), _longs(rest), _positional(rest)
    found: list[Action] = []
    if sub == "push":
        refs = tuple(p.lstrip("+").lstrip(":") for p in pos)
        if "f" in shorts or longs & set(_PUSH_FORCE) or any(p.startswith("+") for p in pos[1:]):
            found.append(Action("git force-push", refs))
        if "d" in shorts or longs & set(_PUSH_DELETE) or any(p.startswith(":") and len(p) > 1 for p in pos[1:]):
            found.append(Action("git delete-ref", refs))
    elif sub in ("branch", "tag"):
        if {"d", "D"} & shorts or "--delete" in longs:
            found.append(Action("git delete-ref", tuple(pos)))
    elif _discards(sub, rest, shorts, longs, pos):
        found.append(Action("git discard-changes"))
    return found


def _discards(sub: str, rest: list[str], shorts: set[str], longs: set[str], pos: list[str]) -> bool:
    """Throws away uncommitted work: reset --hard, checkout -- PATH / -f, restore, clean -f, switch -f."""
    if sub == "reset":
        return "--hard" in longs or "--merge" in longs or "--keep" in longs
    if sub == "checkout":
        return "--" in rest or "f" in shorts or "--force" in longs or any(p in (".", ":/", "*") for p in pos)
    if sub == "restore":
        staged_only = ("S" in shorts or "--staged" in longs) and not ("W" in shorts or "--worktree" in longs)
        return not staged_only
    if sub == "clean":
        return ("f" in shorts or "--force" in longs) and not ("n" in shorts or "--dry-run" in longs)
    if sub == "switch":
        return "f" in shorts or "--force" in longs or "--discard-changes" in longs
    if sub == "stash":
        return bool(pos) and pos[0] in ("drop", "clear")
    return False


# a readable summary of the families above, for the README and ``keel permissions``
ACTION_TABLE: dict[str, str] = {
    "git force-push": "push -f / --force / --force-with-lease / --force-if-includes / --mirror / +refspec",
    "git delete-ref": "push -d / --delete / --prune / --mirror / :ref; branch -d / -D / --delete; tag -d",
    "git discard-changes": "reset --hard|--merge|--keep; checkout -- P / -f / .; restore (not --staged alone); "
    "clean -f (not -n); switch -f / --discard-changes; stash drop|clear",
    "rm recursive": "rm -r / -R / --recursive, in any cluster (-rf, -fR)",
}


def same_action(rule_argv: list[str], cmd_argv: list[str]) -> bool:
    """The rule names an action the command performs, on operands the command names too.

    The rule's operands must each appear among the command's (``git push --force origin main``
    catches ``git push origin +main``, not ``git push origin +dev``); a rule naming the whole
    tree (``git checkout -- .``) names the action alone."""
    if not rule_argv or not cmd_argv or rule_argv[0] != cmd_argv[0]:
        return False
    mine = actions(cmd_argv)
    if not mine:
        return False
    for wanted in actions([w for w in rule_argv if w != "*"]):
        for have in mine:
            if have.name != wanted.name:
                continue
            operands = [o for o in wanted.operands if o not in (".", ":/", "*") and "*" not in o]
            if all(o in have.operands for o in operands):
                return True
    return False
