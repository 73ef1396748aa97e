"""Turning a skill's (or a custom command's) body into the text the model reads, as Claude Code does.

In order: ``${CLAUDE_SKILL_DIR}`` / ``${CLAUDE_PLUGIN_ROOT}``; the author's shell commands are found
(```` ```! ```` fenced blocks, and `` !`cmd` `` where the ``!`` starts a line or follows white space,
not inside an inline code span), so that an argument never becomes a command; arguments are
substituted (``$ARGUMENTS``, ``$ARGUMENTS[N]``, ``$N`` counted from 0, and ``$name`` for the
frontmatter's ``arguments``; a ``$N`` or ``$ARGUMENTS[N]`` with no argument N stays as written, as do
``$1.00`` and ``awk '{print $1}'`` then; ``\\$1`` is a literal ``$1``; with no placeholder, the
arguments are appended as ``ARGUMENTS: ...``), inside a command each value quoted for where it stands
(the literal text the user typed, split into shell words where it stands bare); every command
is checked by the session's permission checks and, when one is refused, none runs (Claude Code then
refuses the whole invocation; keel shows each command's note instead); each command is replaced by its
output; ``@path`` is replaced by the whole file's contents, read through the same checks.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from agentkeel.internal import procs
from agentkeel.tools.views import READ_TOOL, SHELL_TOOL

Check = Callable[[str, dict[str, object]], Awaitable[str | None]]  # (tool, input) -> None if allowed, else why

_FENCED = re.compile(r"```!\s*\n?([\s\S]*?)\n?```")  # Claude Code's own patterns
_INLINE = re.compile(r"(?:^|(?<=\s))!`([^`]+)`", re.MULTILINE)
_CODE_SPAN = re.compile(r"`[^`\n]+`")
_AT = re.compile(r"(?:(?<=\s)|^)@([A-Za-z0-9_./~-]*[A-Za-z0-9_/-])", re.MULTILINE)
_WORD = r"(?![\[A-Za-z0-9_])"
MAX_OUTPUT = 20_000
BANG_TIMEOUT_S = 30.0
MAX_FILE_BYTES = 256 * 1024  # Claude Code attaches an @file whole up to its Read limit, and none of a larger one
MAX_NAMED = 64  # Claude Code reads at most 64 named arguments of at most 64 characters


def split_args(args: str) -> list[str]:
    try:
        return shlex.split(args)
    except ValueError:
        return args.split()


class _Arguments:
    """One substitution of a text's placeholders, done in a single pass so that a value is never read
    again as a placeholder; ``used`` tells whether any placeholder took an argument."""

    def __init__(self, args: str, named: Sequence[str]) -> None:
        self.args = args
        self.words = split_args(args) if args.strip() else []
        names = [n for n in named if n and len(n) <= MAX_NAMED and not n.isdigit()][:MAX_NAMED]
        self.index = {n: i for i, n in reversed(list(enumerate(names)))}
        alts = "|".join(re.escape(n) for n in sorted(self.index, key=len, reverse=True))
        named_re = rf"|\$(?P<name>{alts}){_WORD}" if alts else ""
        held = rf"\d|ARGUMENTS|(?:{alts}){_WORD}" if alts else r"\d|ARGUMENTS"
        self.pattern = re.compile(
            rf"(?<!\\)\\(?P<escaped>\$)(?={held}){named_re}"
            r"|\$ARGUMENTS\[(?P<item>[0-9]+)\]|\$(?P<n>[0-9]+)(?![A-Za-z0-9_])|\$ARGUMENTS"
        )
        self.used = False

    def sub(self, text: str, quote: bool = False) -> str:
        """``text`` with its placeholders filled; ``quote``: ``text`` is a shell command, and each value
        goes in as the literal text of shell words, quoted for where it stands (bare, in ``"..."``,
        in ``'...'``), so that nothing an argument says runs."""

        def fill(m: re.Match[str], value: str, words: list[str]) -> str:
            if not quote:
                return value
            where = _quoting(text, m.start())
            if where == '"':
                return re.sub(r'([\\"$`])', r"\\\1", value)
            if where == "'":
                return value.replace("'", "'\\''")
            return " ".join(shlex.quote(w) for w in words)

        def value(m: re.Match[str]) -> str:
            if m.group("escaped"):
                return "$"
            name = m.groupdict().get("name")
            if name is not None:  # a named argument not given is empty, as in Claude Code
                index = self.index[name]
                self.used = True
                word = self.words[index] if index < len(self.words) else ""
                return fill(m, word, [word] if word else [])
            number = m.group("item") or m.group("n")
            if number is not None:
                index = int(number)
                if index >= len(self.words):
                    return m.group(0)  # no such argument: left as written ($1.00, awk '{print $1}', SQL $1)
                self.used = True
                return fill(m, self.words[index], [self.words[index]])
            self.used = True
            return fill(m, self.args, self.words)

        return self.pattern.sub(value, text)

    def tail(self, text: str) -> str:
        if not self.used and self.args.strip():
            return text.rstrip("\n") + f"\n\nARGUMENTS: {self.args}"
        return text


def _quoting(command: str, at: int) -> str:
    """The shell quoting in force at ``command[at]``: ``'`` or ``"`` inside such quotes, else ``""``."""
    state, i = "", 0
    while i < at:
        c = command[i]
        if state == "'":
            state = "" if c == "'" else state
        elif c == "\\":
            i += 1  # the next character is escaped
        elif c == '"':
            state = "" if state == '"' else '"'
        elif c == "'" and not state:
            state = "'"
        i += 1
    return state


def substitute_arguments(body: str, args: str, named: Sequence[str] = ()) -> str:
    arguments = _Arguments(args, named)
    return arguments.tail(arguments.sub(body))


def find_commands(body: str) -> list[tuple[int, int, str]]:
    """The author's shell commands as Claude Code finds them: (start, end, command), in order.
    Inline code spans are blanked first (`` `!`x`` `` is an example, not a command); a fenced
    ```` ```! ```` block is one command."""
    found = [(m.start(), m.end(), m.group(1).strip()) for m in _FENCED.finditer(body)]
    if "!`" in body:

        def blank(m: re.Match[str]) -> str:
            before = body[m.start() - 1] if m.start() else ""
            return m.group(0) if before in ("!", "`") and before else "`" + " " * (len(m.group(0)) - 2) + "`"

        blanked = _CODE_SPAN.sub(blank, body)
        for m in _INLINE.finditer(blanked):
            if not any(s < m.end() and m.start() < e for s, e, _ in found):
                found.append((m.start(), m.end(), m.group(1).strip()))
    return sorted(f for f in found if f[2])


async def run_bang(cmd: str, cwd: Path, env: dict[str, str] | None = None, timeout: float | None = None) -> str:
    """The command's output (stderr with it), run in its own process group: on the timeout the
    whole group is killed, also what the command left running in the background."""
    import os

    timeout = BANG_TIMEOUT_S if timeout is None else timeout
    ran = await procs.run(
        ["/bin/sh", "-c", cmd], cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout, merge_stderr=True
    )
    if ran.timed_out:
        return f"[!`{cmd}` timed out after {timeout:g}s]"
    if ran.exit_code is None:
        return f"[!`{cmd}` {ran.error}]"
    text = ran.stdout.decode("utf-8", errors="replace").rstrip("\n")
    if len(text) > MAX_OUTPUT:
        text = text[:MAX_OUTPUT] + "\n[output truncated]"
    if ran.exit_code:
        text += f"\n[exit {ran.exit_code}]"
    return text


async def _run_all(commands: list[str], cwd: Path, check: Check | None, env: dict[str, str] | None) -> list[str]:
    """Every command's output; when the checks refuse one, none runs (as in Claude Code)."""
    refusals: list[str | None] = []
    for cmd in commands:
        why = await check(SHELL_TOOL, {"command": cmd}) if check is not None else "no permission checks are available"
        refusals.append(why)
    first = next((i for i, why in enumerate(refusals) if why), None)
    if first is not None:
        blocker = commands[first]
        return [
            f"[!`{cmd}` was not run: {why}]"
            if why
            else f"[!`{cmd}` was not run: !`{blocker}` in the same text was refused]"
            for cmd, why in zip(commands, refusals, strict=True)
        ]
    return [await run_bang(cmd, cwd, env) for cmd in commands]


async def substitute_commands(body: str, cwd: Path, check: Check | None, env: dict[str, str] | None = None) -> str:
    """The author's commands replaced by their output; nothing else is substituted."""
    return await _expand_text(body, None, cwd, check, env)


async def _expand_text(
    body: str, arguments: _Arguments | None, cwd: Path, check: Check | None, env: dict[str, str] | None
) -> str:
    spans = find_commands(body)
    pieces: list[str] = []
    commands: list[str] = []
    at = 0
    for start, end, cmd in spans:
        text = body[at:start]
        pieces.append(arguments.sub(text) if arguments else text)
        commands.append(arguments.sub(cmd, quote=True) if arguments else cmd)
        at = end
    rest = body[at:]
    pieces.append(arguments.sub(rest) if arguments else rest)
    outputs = await _run_all(commands, cwd, check, env) if commands else []
    out = pieces[0] + "".join(o + p for o, p in zip(outputs, pieces[1:], strict=True))
    return arguments.tail(out) if arguments else out


async def include_files(body: str, bases: Sequence[Path], check: Check | None) -> str:
    """``@path`` replaced by the whole file (Claude Code attaches it whole, as a Read); a file over
    Claude Code's Read limit is not attached, the model is told to read it in portions."""
    found: dict[str, str] = {}
    for m in _AT.finditer(body):
        ref = m.group(1)
        if ref in found:
            continue
        path = next(
            (p for p in ((Path(ref).expanduser() if ref.startswith("~") else b / ref) for b in bases) if p.is_file()),
            None,
        )
        if path is None:
            continue  # an @mention of something that is not a file stays as written
        why = await check(READ_TOOL, {"file_path": str(path)}) if check is not None else None
        if why:
            found[ref] = f"@{ref} [not included: {why}]"
            continue
        try:
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                found[ref] = (
                    f"@{ref} [not attached: {path} ({size // 1024} KB) is too large to read all at once; Read it in "
                    "portions with offset and limit, or search it with Grep]"
                )
                continue
            content = path.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            found[ref] = f"@{ref} [not included: {e.strerror or e}]"
            continue
        found[ref] = f'<file path="{path}">\n{content}\n</file>'
    if not found:
        return body
    return _AT.sub(lambda m: found.get(m.group(1), m.group(0)), body)


async def expand(
    body: str,
    args: str,
    *,
    cwd: Path,
    check: Check | None,
    named: Sequence[str] = (),
    skill_dir: Path | None = None,
    plugin_root: Path | None = None,
    env: dict[str, str] | None = None,
) -> str:
    if skill_dir is not None:
        body = body.replace("${CLAUDE_SKILL_DIR}", str(skill_dir))
    if plugin_root is not None:
        body = body.replace("${CLAUDE_PLUGIN_ROOT}", str(plugin_root))
    # the author's commands are found before the arguments go in: an argument never becomes a command
    body = await _expand_text(body, _Arguments(args, named), cwd, check, env)
    bases = [b for b in (skill_dir, cwd) if b is not None]
    return await include_files(body, bases, check)
