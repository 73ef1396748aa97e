"""What a sed invocation does beyond printing a stream: the files it writes (``w``, ``W``,
``s///w``, ``-i``), the files it reads (``r``, ``R``) and whether it runs commands (``e``,
``s///e``), read as GNU sed reads its options and scripts. Anything this reader does not know
is reported as ``unknown`` and treated as dangerous by the callers.
"""

from __future__ import annotations

import msgspec

from agentkeel.policy.permissions.words import DYNAMIC

_LONG = ("--expression", "--file", "--in-place", "--line-length", "--sandbox", "--null-data", "--zero-terminated")
_LONG_FLAGS = (
    "--quiet",
    "--silent",
    "--debug",
    "--posix",
    "--regexp-extended",
    "--separate",
    "--unbuffered",
    "--follow-symlinks",
    "--help",
    "--version",
    "--binary",
)
_NO_ARGS = frozenset("=dDgGhHlnNpPxzFqQL")  # l, q, Q, L take an optional number, skipped with the blanks
_S_FLAGS = frozenset("gpiImM0123456789")
_STD_STREAMS = frozenset({"/dev/stdout", "/dev/stderr", "/dev/stdin"})


class SedCall(msgspec.Struct):
    scripts: list[str] = msgspec.field(default_factory=list)
    script_files: list[str] = msgspec.field(default_factory=list)
    in_place: bool = False
    sandbox: bool = False
    files: list[str] = msgspec.field(default_factory=list)
    writes: list[str] = msgspec.field(default_factory=list)
    reads: list[str] = msgspec.field(default_factory=list)
    executes: bool = False
    unknown: bool = False


def read_call(args: list[str]) -> SedCall:
    """GNU sed's command line (options may follow file operands), then every script in it."""
    out = SedCall()
    positional: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            positional += args[i + 1 :]
            break
        if a.startswith("--"):
            key, eq, value = a.partition("=")
            name = _long_name(key)
            if name in ("--expression", "--file", "--line-length") and not eq:
                i += 1
                value = args[i] if i < len(args) else ""
            if name == "--expression":
                out.scripts.append(value)
            elif name == "--file":
                out.script_files.append(value)
            elif name == "--in-place":
                out.in_place = True
            elif name == "--sandbox":
                out.sandbox = True
            elif name is None:
                out.unknown = True
        elif a.startswith("-") and a != "-":
            j = 1
            while j < len(a):
                ch = a[j]
                if ch in "efl":
                    value = a[j + 1 :]
                    if not value:
                        i += 1
                        value = args[i] if i < len(args) else ""
                    if ch == "e":
                        out.scripts.append(value)
                    elif ch == "f":
                        out.script_files.append(value)
                    break
                if ch == "i":
                    out.in_place = True
                    break  # the rest is the backup suffix
                if ch not in "nrEsuzb":
                    out.unknown = True
                j += 1
        else:
            positional.append(a)
        i += 1
    if not out.scripts and not out.script_files and positional:
        out.scripts.append(positional.pop(0))
    out.files = positional
    for script in out.scripts:
        _read_script(script, out)
    return out


def _long_name(key: str) -> str | None:
    """GNU getopt takes any unambiguous prefix of a long option (``--in-pl`` is ``--in-place``)."""
    known = (*_LONG, *_LONG_FLAGS)
    if key in known:
        return key
    hits = [k for k in known if k.startswith(key)] if len(key) > 2 else []
    return hits[0] if len(hits) == 1 else None


def _read_script(script: str, out: SedCall) -> None:
    s = script
    n = len(s)
    i = 0
    while i < n:
        c = s[i]
        if c in " \t\n;":
            i += 1
            continue
        if c == "#":
            i = _line_end(s, i)
            continue
        after = _address(s, i)
        if after is None:
            out.unknown = True
            return
        i = _blanks(s, after)
        if i < n and s[i] == ",":
            i = _blanks(s, i + 1)
            if i < n and s[i] in "+~":
                i = _digits(s, i + 1)
            else:
                after = _address(s, i)
                if after is None:
                    out.unknown = True
                    return
                i = after
            i = _blanks(s, i)
        while i < n and s[i] in "! \t":
            i += 1
        if i >= n:
            return
        c = s[i]
        i += 1
        if c in "{}" or c in _NO_ARGS:
            while i < n and (s[i].isdigit() or s[i] in " \t"):
                i += 1
            continue
        if c in "aic":  # text to the end of the line, continued by a trailing backslash
            while i < n and s[i] != "\n":
                i += 2 if s[i] == "\\" else 1
            continue
        if c in ":btTv":  # a label (or a version): up to ; or a newline
            while i < n and s[i] not in ";\n":
                i += 1
            continue
        if c in "rRwW":
            eol = _line_end(s, i)
            (out.reads if c in "rR" else out.writes).append(s[i:eol].strip(" \t"))
            i = eol
            continue
        if c == "e":
            out.executes = True
            i = _line_end(s, i)
            continue
        if c in "sy":
            end = _substitution(s, i, parts=2)
            if end is None:
                out.unknown = True
                return
            if c == "s":
                end = _s_flags(s, end, out)
                if end is None:
                    return
            i = end
            continue
        out.unknown = True
        return


def _line_end(s: str, i: int) -> int:
    end = s.find("\n", i)
    return len(s) if end < 0 else end


def _blanks(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t":
        i += 1
    return i


def _digits(s: str, i: int) -> int:
    while i < len(s) and s[i].isdigit():
        i += 1
    return i


def _address(s: str, i: int) -> int | None:
    """Skip one address (a number, first~step, $, /re/ or \\cREc with I/M); None if malformed."""
    n = len(s)
    if i < n and s[i].isdigit():
        i = _digits(s, i)
        if i < n and s[i] == "~":
            i = _digits(s, i + 1)
        return i
    if i < n and s[i] == "$":
        return i + 1
    if i < n and s[i] in "/\\":
        if s[i] == "\\":
            i += 1
            if i >= n or s[i] in "\n\\":
                return None
        end = _delimited(s, i + 1, s[i])
        if end is None:
            return None
        i = end
        while i < n and s[i] in "IM":
            i += 1
    return i


def _delimited(s: str, i: int, delim: str) -> int | None:
    """The index after the next unescaped ``delim`` (GNU sed gives brackets no special meaning)."""
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s[i] == delim:
            return i + 1
        i += 1
    return None


def _substitution(s: str, i: int, parts: int) -> int | None:
    if i >= len(s) or s[i] in "\n\\":
        return None
    delim = s[i]
    i += 1
    for _ in range(parts):
        end = _delimited(s, i, delim)
        if end is None:
            return None
        i = end
    return i


def _s_flags(s: str, i: int, out: SedCall) -> int | None:
    n = len(s)
    while i < n:
        c = s[i]
        if c in _S_FLAGS:
            i += 1
        elif c == "e":
            out.executes = True
            i += 1
        elif c == "w":
            end = _line_end(s, i + 1)
            out.writes.append(s[i + 1 : end].strip(" \t"))
            return end
        elif c in " \t;\n}#":
            return i
        else:
            out.unknown = True
            return None
    return i


def dangerous(call: SedCall) -> list[str]:
    """The escalations an allow rule must name: writing or executing scripts, script files."""
    found: list[str] = []
    if call.in_place:
        found.append("-i")
    if call.script_files:
        found.append("-f (script from a file)")
    writes = [w for w in call.writes if w not in _STD_STREAMS]
    if not call.sandbox and (call.executes or writes or call.unknown):
        found.append("e/w command")
    if not call.sandbox and read_targets(call):
        found.append("r/R command")
    return found


def write_targets(call: SedCall) -> list[str]:
    """Files this call may write: in-place operands and ``w`` files; DYNAMIC for a script
    keel cannot read (a script file, or syntax this reader does not know)."""
    if call.sandbox:
        return list(call.files) if call.in_place else []
    targets = [w for w in call.writes if w not in _STD_STREAMS]
    if call.in_place:
        targets += call.files
    if call.script_files or call.unknown:
        targets.append(DYNAMIC)
    return targets


def read_targets(call: SedCall) -> list[str]:
    return [r for r in call.reads if r not in _STD_STREAMS]
