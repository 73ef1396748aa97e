"""Turning a skill's (or a custom command's) body into the text the model reads.

In order: ``${CLAUDE_SKILL_DIR}`` / ``${CLAUDE_PLUGIN_ROOT}``; `` !`cmd` `` replaced by the
command's output, each command through the session's permission checks (a denied one is
replaced by why; only the author's commands: arguments are substituted after, so an argument
never runs); arguments (``$ARGUMENTS``, ``$ARGUMENTS[N]``, ``$N`` counted from 0, and ``$name``
for the frontmatter's ``arguments``; with no placeholder, the arguments are appended as
``ARGUMENTS: ...``); ``@path`` replaced by the file's contents, each read through the same checks.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from agentkeel.internal import procs
from agentkeel.tools.views import READ_TOOL, SHELL_TOOL

Check = Callable[[str, dict[str, object]], Awaitable[str | None]]  # (tool, input) -> None if allowed, else why

_BANG = re.compile(r"!`([^`\n]+)`")
_AT = re.compile(r"(?:(?<=\s)|^)@([A-Za-z0-9_./~-]*[A-Za-z0-9_/-])", re.MULTILINE)
_POSITIONAL = re.compile(r"\$ARGUMENTS\[(\d+)\]|\$(\d+)")
MAX_OUTPUT = 20_000
MAX_FILE = 40_000
BANG_TIMEOUT_S = 30.0


def split_args(args: str) -> list[str]:
    try:
        return shlex.split(args)
    except ValueError:
        return args.split()


def substitute_arguments(body: str, args: str, named: Sequence[str] = ()) -> str:
    words = split_args(args)
    used = False

    def positional(m: re.Match[str]) -> str:
        nonlocal used
        used = True
        index = int(m.group(1) or m.group(2))
        return words[index] if index < len(words) else ""

    out = _POSITIONAL.sub(positional, body)
    for i, name in enumerate(named):
        pattern = re.compile(r"\$" + re.escape(name) + r"(?![A-Za-z0-9_])")
        if pattern.search(out):
            used = True
            value = words[i] if i < len(words) else ""
            out = pattern.sub(lambda _m, value=value: value, out)  # type: ignore[misc]
    if "$ARGUMENTS" in out:
        used = True
        out = out.replace("$ARGUMENTS", args)
    if not used and args.strip():
        out = out.rstrip("\n") + f"\n\nARGUMENTS: {args}"
    return out


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


async def substitute_commands(body: str, cwd: Path, check: Check | None, env: dict[str, str] | None = None) -> str:
    matches = list(_BANG.finditer(body))
    if not matches:
        return body
    outputs: list[str] = []
    for m in matches:
        cmd = m.group(1)
        why = await check(SHELL_TOOL, {"command": cmd}) if check is not None else "no permission checks are available"
        outputs.append(f"[!`{cmd}` was not run: {why}]" if why else await run_bang(cmd, cwd, env))
    pieces = iter(outputs)
    return _BANG.sub(lambda _m: next(pieces), body)


async def include_files(body: str, bases: Sequence[Path], check: Check | None) -> str:
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
            content = path.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            found[ref] = f"@{ref} [not included: {e.strerror or e}]"
            continue
        if len(content) > MAX_FILE:
            content = content[:MAX_FILE] + "\n[file truncated]"
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
    body = await substitute_commands(body, cwd, check, env)  # the author's commands only, never the arguments'
    body = substitute_arguments(body, args, named)
    bases = [b for b in (skill_dir, cwd) if b is not None]
    return await include_files(body, bases, check)
