"""Shell tools: Bash (foreground and background), BashOutput, KillShell.

Commands run in a non-interactive environment (no TTY, stdin closed, editors and pagers
neutralised), in their own process group so a timeout or an interrupt kills the whole
tree. The working directory persists between Bash calls, as in a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from agentkeel.core.tools import Tool, ToolContext, ToolError, ToolOutput

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
MAX_CAPTURE = 8 * 1024 * 1024  # bytes kept in memory per command (head and tail)

NON_INTERACTIVE_ENV = {
    "CI": "true",
    "DEBIAN_FRONTEND": "noninteractive",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
    "EDITOR": "true",
    "VISUAL": "true",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "PIP_NO_INPUT": "1",
    "npm_config_yes": "true",
    "TERM": "dumb",
}


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class BashInput(_Input):
    command: str = Field(description="The command to execute")
    timeout: int | None = Field(
        None, ge=1, le=MAX_TIMEOUT_MS, description="Optional timeout in milliseconds (max 600000)"
    )
    description: str | None = Field(None, description="Clear, concise description of what this command does")
    run_in_background: bool = Field(False, description="Run the command in the background; read it with BashOutput")


class BashOutputInput(_Input):
    bash_id: str = Field(description="The ID of the background shell to read output from")
    filter: str | None = Field(None, description="Optional regular expression: only matching lines are returned")


class KillShellInput(_Input):
    shell_id: str = Field(description="The ID of the background shell to kill")


class _Capture:
    """Output of a process: everything up to MAX_CAPTURE, then head and tail."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.read_pos = 0  # for BashOutput: how much of head has been returned

    def add(self, data: bytes) -> None:
        room = MAX_CAPTURE // 2 - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            excess = len(self.tail) - MAX_CAPTURE // 2
            if excess > 0:
                del self.tail[:excess]
                self.dropped += excess

    def text(self) -> str:
        body = self.head.decode("utf-8", "replace")
        if self.tail:
            gap = f"\n… [{self.dropped} bytes of output dropped] …\n" if self.dropped else ""
            body += gap + self.tail.decode("utf-8", "replace")
        return body


@dataclass
class BackgroundShell:
    id: str
    command: str
    proc: asyncio.subprocess.Process
    capture: _Capture
    reader: asyncio.Task[None]
    started: float = field(default_factory=time.monotonic)
    delivered: int = 0  # characters of output already returned by BashOutput

    @property
    def status(self) -> str:
        if self.proc.returncode is None:
            return "running"
        return "completed" if self.proc.returncode == 0 else f"failed (exit code {self.proc.returncode})"


class ShellState:
    """Per-session shell state: the persistent working directory and background shells."""

    def __init__(self) -> None:
        self.cwd: Path | None = None
        self.shells: dict[str, BackgroundShell] = {}
        self._next = 1

    def new_id(self) -> str:
        sid = f"bash_{self._next}"
        self._next += 1
        return sid

    async def aclose(self) -> None:
        for shell in list(self.shells.values()):
            await _kill(shell.proc)


def _shell() -> str:
    return shutil.which("bash") or "/bin/sh"


def shell_env(ctx: ToolContext) -> dict[str, str]:
    env = dict(os.environ)
    env.update(ctx.env)
    env.update(NON_INTERACTIVE_ENV)
    return env


async def _spawn(ctx: ToolContext, command: str, cwd_file: Path) -> asyncio.subprocess.Process:
    state = ctx.services.get(ShellState)
    cwd = state.cwd if state.cwd is not None and state.cwd.is_dir() else ctx.cwd
    script = f"trap 'pwd -P >| {_quote(str(cwd_file))} 2>/dev/null' EXIT\n{command}"
    return await asyncio.create_subprocess_exec(
        _shell(),
        "-c",
        script,
        cwd=cwd,
        env=shell_env(ctx),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


async def _pump(proc: asyncio.subprocess.Process, capture: _Capture) -> None:
    assert proc.stdout is not None
    while chunk := await proc.stdout.read(65536):
        capture.add(chunk)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), wait)
            return
        except TimeoutError:
            continue


def _update_cwd(ctx: ToolContext, cwd_file: Path) -> None:
    try:
        text = cwd_file.read_text().strip()
    except OSError:
        return
    finally:
        cwd_file.unlink(missing_ok=True)
    if text and Path(text).is_dir():
        ctx.services.get(ShellState).cwd = Path(text)


async def _bash(args: BashInput, ctx: ToolContext) -> ToolOutput:
    if not args.command.strip():
        raise ToolError("command is empty")
    fd, name = tempfile.mkstemp(prefix="keel-cwd-")
    os.close(fd)
    cwd_file = Path(name)
    state = ctx.services.get(ShellState)
    proc = await _spawn(ctx, args.command, cwd_file)
    capture = _Capture()
    reader = asyncio.create_task(_pump(proc, capture))
    if args.run_in_background:
        sid = state.new_id()
        state.shells[sid] = BackgroundShell(sid, args.command, proc, capture, reader)
        return ToolOutput(
            f"Command running in background with ID: {sid}. Read its output with BashOutput.",
            metadata={"command": args.command, "background_id": sid},
        )
    timeout_ms = args.timeout or DEFAULT_TIMEOUT_MS
    started = time.monotonic()
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.shield(proc.wait()), timeout_ms / 1000)
    except TimeoutError:
        timed_out = True
        await _kill(proc)
    except asyncio.CancelledError:
        await _kill(proc)
        reader.cancel()
        raise
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(reader, 5)
    _update_cwd(ctx, cwd_file)
    output = capture.text().rstrip("\n")
    code = proc.returncode
    meta = {
        "command": args.command,
        "exit_code": code,
        "duration_ms": int((time.monotonic() - started) * 1000),
        "timed_out": timed_out,
    }
    if timed_out:
        return ToolOutput(
            f"{output}\nCommand timed out after {timeout_ms / 1000:g}s and was killed".lstrip("\n"),
            is_error=True,
            metadata=meta,
        )
    if code:
        return ToolOutput(f"{output}\nExit code {code}".lstrip("\n"), is_error=True, metadata=meta)
    return ToolOutput(output or "(no output)", metadata=meta)


async def _bash_output(args: BashOutputInput, ctx: ToolContext) -> ToolOutput:
    shell = ctx.services.get(ShellState).shells.get(args.bash_id)
    if shell is None:
        raise ToolError(f"No background shell with ID {args.bash_id}")
    if shell.proc.returncode is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(shell.reader), 2)
    text = shell.capture.text()
    new, shell.delivered = text[shell.delivered :], len(text)
    if args.filter:
        try:
            rx = re.compile(args.filter)
        except re.error as e:
            raise ToolError(f"invalid filter regex: {e}") from None
        new = "\n".join(line for line in new.splitlines() if rx.search(line))
    return ToolOutput(
        f"<status>{shell.status}</status>\n<output>\n{new.rstrip()}\n</output>",
        metadata={"bash_id": shell.id, "status": shell.status},
    )


async def _kill_shell(args: KillShellInput, ctx: ToolContext) -> ToolOutput:
    shell = ctx.services.get(ShellState).shells.get(args.shell_id)
    if shell is None:
        raise ToolError(f"No background shell with ID {args.shell_id}")
    await _kill(shell.proc)
    return ToolOutput(f"Killed shell {shell.id} ({shell.command})", metadata={"shell_id": shell.id})


BASH_DESC = (
    "Run a bash command in a non-interactive shell (no TTY, stdin closed). The working directory persists "
    "between calls. Default timeout 120000 ms, max 600000. Use run_in_background for long-running servers, "
    "then BashOutput to read them and KillShell to stop them. Prefer Read/Grep/Glob over cat/grep/find."
)


def shell_tools() -> list[Tool]:
    return [
        Tool("Bash", BASH_DESC, BashInput, _bash, group="system", timeout_s=MAX_TIMEOUT_MS / 1000 + 30),
        Tool(
            "BashOutput",
            "Read new output from a background shell started with run_in_background.",
            BashOutputInput,
            _bash_output,
            group="system",
            read_only=True,
            timeout_s=30,
        ),
        Tool(
            "KillShell", "Kill a background shell by its ID.", KillShellInput, _kill_shell, group="system", timeout_s=30
        ),
    ]
