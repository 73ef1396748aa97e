"""What a command line does to the shell's own state, as far as permission checks follow it:
the working directory (``cd``, ``pushd``, ``popd``) and environment assignments.

A directory change keel cannot follow exactly (to a directory that does not exist, a value
known only at run time, ``cd -``, a ``CDPATH`` lookup, the stack rotations of ``pushd +N``)
is a *problem*: the analysis is then not confident and the command asks.
"""

from __future__ import annotations

import os
import posixpath
import re

import msgspec

from agentkeel.policy.permissions.words import DYNAMIC

DIR_COMMANDS = frozenset({"cd", "pushd", "popd"})

# environment assignments that do not change which program runs or what it loads
_SAFE_NAMES = re.compile(
    r"(?x)^(CI|NODE_ENV|RUST_LOG|RUST_BACKTRACE|DEBUG|LANG|LANGUAGE|LC_[A-Z]+|TZ|FORCE_COLOR|NO_COLOR|TERM|COLUMNS|"
    r"PYTHONUNBUFFERED|PYTHONDONTWRITEBYTECODE|PYTHONHASHSEED|CGO_ENABLED|GOOS|GOARCH|VERBOSE|"
    r"RAILS_ENV|MIX_ENV|CARGO_TERM_COLOR|NPM_CONFIG_LOGLEVEL|LOG_LEVEL)$"
)
# these name a program or inject options, so only known values are safe: PAGER=sh runs sh,
# PYTEST_ADDOPTS='-p plugin' loads a plugin, GOFLAGS=-toolexec=prog runs prog
# TZ, LANG, LC_* and LANGUAGE name files glibc reads: TZ=/etc/shadow (or a path climbing out of
# /usr/share/zoneinfo) opens that file, LC_ALL=/abs/dir loads its locale files; an exported
# variable reassigned in the line (``TZ=.env; date``) reaches the program. Plain names only.
_LOCALE_NAMES = re.compile(r"^(TZ|LANG|LANGUAGE|LC_[A-Z]+)$")
_LOCALE_FILE = re.compile(r"(^|:)/|(^|[/:])\.\.([/:]|$)")
_SAFE_PAGERS = frozenset({"", "cat", "less", "more"})
_SAFE_GOFLAGS = re.compile(r"-(mod|tags|trimpath|race|v|buildvcs|modcacherw|count|json|p)(=[\w.,:-]*)?")


def names_file(value: str) -> bool:
    """A TZ, LANG, LC_* or LANGUAGE value that makes glibc open a file of the caller's choosing."""
    return bool(_LOCALE_FILE.search(value)) or "\\" in value


def safe_assignment(name: str, value: str) -> bool:
    if DYNAMIC in value:
        return False
    if _SAFE_NAMES.match(name):
        return not _LOCALE_FILE.search(value) if _LOCALE_NAMES.match(name) else True
    if name in ("PAGER", "GIT_PAGER"):
        return value in _SAFE_PAGERS
    if name == "GOFLAGS":
        return all(_SAFE_GOFLAGS.fullmatch(flag) for flag in value.split())
    return False


class Dirs(msgspec.Struct):
    """The working directory and pushd's stack (each Bash call starts a new shell: empty)."""

    cwd: str
    stack: list[str] = msgspec.field(default_factory=list)
    made: set[str] = msgspec.field(default_factory=set)  # directories mkdir creates earlier in the line

    def copy(self) -> Dirs:
        return Dirs(self.cwd, list(self.stack), self.made)


def change(argv: list[str], dirs: Dirs, home: str) -> str | None:
    """Apply ``cd``/``pushd``/``popd`` to ``dirs``; a problem when keel cannot follow it."""
    name, args = argv[0], argv[1:]
    if name == "popd":
        if args:
            return "popd with arguments rotates the directory stack (keel does not follow it)"
        if dirs.stack:  # with an empty stack bash fails and stays where it is
            dirs.cwd = dirs.stack.pop()
        return None
    while name == "cd" and args and args[0] in ("-P", "-L", "-e", "-@"):
        args = args[1:]
    if args and args[0] == "--":
        args = args[1:]
    if len(args) > 1:
        return f"{name} with more than one argument (bash fails and stays where it is)"
    if name == "pushd" and not args:
        if dirs.stack:  # swaps the two top directories; with none, bash fails
            dirs.stack[-1], dirs.cwd = dirs.cwd, dirs.stack[-1]
        return None
    target = args[0] if args else home
    if target.startswith("-") or (name == "pushd" and re.fullmatch(r"\+\d+", target)):
        return f"{name} {target} goes to a directory keel does not track"
    if DYNAMIC in target:
        return f"{name} to a directory known only at run time"
    if os.environ.get("CDPATH") and not target.startswith(("/", "./", "../")) and target not in (".", ".."):
        return f"{name} {target} may be looked up through CDPATH"
    new = posixpath.normpath(posixpath.join(dirs.cwd, target))
    if new not in dirs.made and not (os.path.isdir(new) and os.access(new, os.X_OK)):
        return f"{name} {target}: no such directory now, so keel cannot tell where the next commands run"
    if name == "pushd":
        dirs.stack.append(dirs.cwd)
    dirs.cwd = new
    return None


def record_mkdir(argv: list[str], dirs: Dirs) -> None:
    """``mkdir -p build && cd build``: the directory will exist when cd runs."""
    for arg in argv[1:]:
        if arg.startswith("-") or DYNAMIC in arg:
            continue
        path = posixpath.normpath(posixpath.join(dirs.cwd, arg))
        while path not in ("/", ""):
            dirs.made.add(path)
            path = posixpath.dirname(path)


def in_this_shell(wrappers: list[str], privileged: list[str]) -> bool:
    """Does a builtin (cd, eval) run in this shell? Not behind env, sudo, timeout...: they run a program."""
    return not privileged and set(wrappers) <= {"command", "builtin"}
