"""Shell tools: Bash (foreground and background), BashOutput, KillShell.

Commands run in a non-interactive environment (no TTY, stdin closed, editors and pagers
neutralised), in their own process group and with the call's tag (``procs.py``), so a
timeout, an interrupt, KillShell or the session's end kills the whole tree, and the
session's watchdog kills it if keel dies. A call returns when its shell exits; what the
shell left running is moved to a background shell the model can read and kill. The
working directory persists between Bash calls, as in a terminal.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from msgspec import Meta, Struct

from agentkeel.core.events import CwdChanged
from agentkeel.core.tools import Effects, Tool, ToolContext, ToolError, ToolOutput, Workdir
from agentkeel.tools import SHELL
from agentkeel.tools.procs import describe, sweep_steps, tagged
from agentkeel.tools.shellrun import Capture, ShellRun, Watchdog

if TYPE_CHECKING:
    from agentkeel.policy.sandbox.service import Sandbox

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
SETTLE_S = 0.1  # after the shell exits, how long what it started in the background may take to end

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


class _Input(Struct, forbid_unknown_fields=True, kw_only=True):
    """A tool input: validated by msgspec (core/inputs.py), unknown fields refused."""


class BashInput(_Input):
    command: Annotated[str, Meta(description="The command to execute")]
    timeout: Annotated[
        Annotated[int, Meta(ge=1, le=MAX_TIMEOUT_MS)] | None,
        Meta(description="Optional timeout in milliseconds (max 600000)"),
    ] = None
    description: Annotated[str | None, Meta(description="Clear, concise description of what this command does")] = None
    run_in_background: Annotated[
        bool, Meta(description="Run the command in the background; read it with BashOutput")
    ] = False
    dangerouslyDisableSandbox: Annotated[  # Claude Code's name
        bool,
        Meta(
            description="Run outside keel's sandbox. Only after the sandbox blocked a command that must run; "
            "the user is asked to approve it, and settings may forbid it"
        ),
    ] = False


class BashOutputInput(_Input):
    bash_id: Annotated[str, Meta(description="The ID of the background shell to read output from")]
    filter: Annotated[str | None, Meta(description="Optional regular expression: only matching lines are returned")] = (
        None
    )


class KillShellInput(_Input):
    shell_id: Annotated[str, Meta(description="The ID of the background shell to kill")]


@dataclass
class BackgroundShell:
    id: str
    command: str
    run: ShellRun
    started: float = field(default_factory=time.monotonic)
    delivered: int = 0  # characters of output already returned (by Bash, for an adopted run, then BashOutput)
    killed: bool = False
    sandbox: Sandbox | None = None  # it runs in the session's sandbox
    explained: bool = False  # a sandbox denial was added to what BashOutput returned

    @property
    def capture(self) -> Capture:
        return self.run.capture

    @property
    def status(self) -> str:
        if self.run.running():
            return "running"
        if self.killed:
            return "killed"
        code = self.run.proc.returncode
        return "completed" if code == 0 else f"failed (exit code {code})"


class ShellState:
    """Per-session shell state: the persistent working directory, background shells, and every
    process the session's shells started (tagged ``<session>:<call>``; see ``procs.py``)."""

    def __init__(self) -> None:
        self.shells: dict[str, BackgroundShell] = {}
        self.session = secrets.token_hex(8)
        self.watchdog = Watchdog(self.session)
        self.runs: set[ShellRun] = set()  # started and not yet known to be over
        self.sandboxes: set[Sandbox] = set()  # the sandboxes its shells ran in (their mount points go last)
        self._next = 1
        self._calls = 0
        # the files foreground shells report their final directory in: one per call in flight, reused
        # (the shell truncates it), so a call creates and removes no file; removed at the session's end
        self._cwd_files: list[Path] = []
        self._cwd_free: list[Path] = []

    def new_id(self) -> str:
        sid = f"bash_{self._next}"
        self._next += 1
        return sid

    def cwd_file(self, sandbox: Sandbox | None) -> Path:
        """A file for a shell to report its final directory in (``spawn``); give it back with ``cwd_done``."""
        if sandbox is not None:  # the sandbox's own temp dir, a file per call
            fd, name = tempfile.mkstemp(prefix="keel-cwd-", dir=sandbox.tmpdir)
            os.close(fd)
            return Path(name)
        if self._cwd_free:
            return self._cwd_free.pop()
        fd, name = tempfile.mkstemp(prefix="keel-cwd-")
        os.close(fd)
        self._cwd_files.append(Path(name))
        return self._cwd_files[-1]

    def cwd_done(self, path: Path) -> None:
        if path in self._cwd_files:
            self._cwd_free.append(path)
        else:
            path.unlink(missing_ok=True)

    async def spawn(
        self, ctx: ToolContext, command: str, cwd_file: Path | None, sandbox: Sandbox | None = None
    ) -> ShellRun:
        """Start ``command``; with ``cwd_file``, the shell writes the call's number and its final
        directory there (``read_cwd``). With ``sandbox``, it runs inside it (``agentkeel.policy.sandbox``)."""
        self.watchdog.ensure()  # before the first shell: keel may die while it starts
        self._calls += 1
        cwd = shell_cwd(ctx)
        # inside the trap's single quotes: the path double-quoted (a temp dir may hold a blank). The
        # number tells this call's report from an earlier call's left in a reused file (a shell killed
        # before its trap ran writes nothing).
        on_exit = (
            "" if cwd_file is None else f"{{ echo {self._calls}; pwd -P; }} >| {_dquote(str(cwd_file))} 2>/dev/null"
        )
        script = command if cwd_file is None else f"trap '{on_exit}' EXIT\n{command}"
        argv, env = [_shell(), "-c", script], shell_env(ctx)
        if sandbox is None:
            run = await ShellRun.start(argv, cwd, env, f"{self.session}:{self._calls}")
        else:
            await sandbox.start_proxy()
            prepared = sandbox.prepare(command, cwd, env, _shell(), on_exit)
            try:
                run = await ShellRun.start(
                    prepared.argv, cwd, prepared.env, f"{self.session}:{self._calls}", contained=True
                )
            except BaseException:
                sandbox.finished(prepared)
                raise
            run.on_done = lambda: sandbox.finished(prepared)
            self.sandboxes.add(sandbox)
        self.runs.add(run)
        self.watchdog.register(run.pgid)
        return run

    def background(self, run: ShellRun, command: str) -> BackgroundShell:
        shell = BackgroundShell(self.new_id(), command, run)
        self.shells[shell.id] = shell
        return shell

    def done(self, run: ShellRun) -> None:
        """Nothing of the run is left: stop tracking it."""
        run.close()
        finish, run.on_done = run.on_done, None
        if finish is not None:
            for note in finish():
                run.capture.add(f"\n{note}\n".encode())
        self.runs.discard(run)
        self.watchdog.unregister(run.pgid)

    async def kill(self, run: ShellRun) -> None:
        await run.kill()
        self.done(run)

    async def aclose(self) -> None:
        """Kill what the session's shells left running, then let the watchdog go.

        Runs still tracked (background shells, a call in flight) and every process tagged with the
        session die here, in one sweep. When none is tracked, keel does not scan /proc itself
        (a few ms for a few hundred processes): the watchdog sweeps on EOF, in its own process,
        for what left the group and the pipe unseen (``setsid cmd >/dev/null &``).
        """
        runs = list(self.runs)
        if runs or (self._calls and not self.watchdog.running):
            groups = {run.pgid for run in runs}
            for pause in sweep_steps(f"{self.session}:", groups, prefix=True, grace=2.0):
                await asyncio.sleep(pause)
            await asyncio.gather(*(run.reap() for run in runs))
            for run in runs:
                self.done(run)
        for sandbox in self.sandboxes:
            sandbox.release()  # nothing runs in it any more: the empty mount points it made can go
        for path in self._cwd_files:
            path.unlink(missing_ok=True)
        self._cwd_files.clear()
        self._cwd_free.clear()
        self.watchdog.close()


_SHELLS: dict[str | None, str] = {}  # PATH -> the shell found on it


def _shell() -> str:
    path = os.environ.get("PATH")
    found = _SHELLS.get(path)
    if found is None or not os.access(found, os.X_OK):  # gone since: look again
        found = _SHELLS[path] = shutil.which("bash") or "/bin/sh"
    return found


def shell_cwd(ctx: ToolContext) -> Path:
    moved = ctx.workdir  # the one owner of the session's cwd (core.tools.Workdir)
    return moved if moved.is_dir() else ctx.cwd


def _sandbox_for(ctx: ToolContext, args: BashInput) -> Sandbox | None:
    """The session's sandbox when this command runs in it: not when settings turned it off, the
    command is in ``sandbox.excludedCommands``, or it asked to run outside where that is allowed."""
    service = sys.modules.get("agentkeel.policy.sandbox.service")
    if service is None:  # no session of this process made a sandbox: the package was never loaded
        return None
    sandbox: Sandbox | None = ctx.services.find(service.Sandbox)
    if sandbox is None:
        return None
    wanted = {"dangerouslyDisableSandbox": args.dangerouslyDisableSandbox}
    return sandbox if sandbox.sandboxed(args.command, wanted, str(shell_cwd(ctx))) else None


def shell_env(ctx: ToolContext) -> dict[str, str]:
    env = dict(os.environ)
    env.update(ctx.env)
    env.update(NON_INTERACTIVE_ENV)
    return env


def _dquote(s: str) -> str:
    """Double-quoted for bash, fit to stand inside a single-quoted trap (a quote ends the trap)."""
    if "'" in s:
        raise ToolError(f"the temp directory {s!r} holds a quote; set TMPDIR to another directory")
    return '"' + re.sub(r'([\\"$`])', r"\\\1", s) + '"'


def _update_cwd(ctx: ToolContext, state: ShellState, run: ShellRun, cwd_file: Path) -> None:
    try:
        call, _, text = cwd_file.read_text().partition("\n")
    except OSError:
        return
    finally:
        state.cwd_done(cwd_file)
    text = text.strip()
    if call != run.tag.rpartition(":")[2] or not text or not Path(text).is_dir():  # not this call's report
        return
    workdir = ctx.services.get(Workdir)
    before = workdir.path or ctx.cwd
    new = Path(text)
    if new != before:
        workdir.path = new
        ctx.emit(CwdChanged(old_cwd=str(before), new_cwd=str(new)))


async def _bash(args: BashInput, ctx: ToolContext) -> ToolOutput:
    if not args.command.strip():
        raise ToolError("command is empty")
    where = ctx.services.find(Workdir)
    if where is not None and where.path is not None and not where.path.is_dir():
        # the permission check judged this command from that directory: never run it elsewhere
        gone, where.path = where.path, None
        raise ToolError(
            f"the working directory {gone} no longer exists; the shell is back at {ctx.cwd}: run the command again"
        )
    state = ctx.services.get(ShellState)
    sandbox = _sandbox_for(ctx, args)
    if args.run_in_background:  # its cd does not move the session's directory
        shell = state.background(await state.spawn(ctx, args.command, None, sandbox), args.command)
        shell.sandbox, sid = sandbox, shell.id
        return ToolOutput(
            f"Command running in background with ID: {sid}. Read its output with BashOutput.",
            metadata={"command": args.command, "background_id": sid, "sandboxed": sandbox is not None},
        )
    cwd_file = state.cwd_file(sandbox)
    try:
        run = await state.spawn(ctx, args.command, cwd_file, sandbox)
    except BaseException:
        state.cwd_done(cwd_file)
        raise
    timeout_ms = args.timeout or DEFAULT_TIMEOUT_MS
    started = time.monotonic()
    timed_out = False
    try:
        await asyncio.wait_for(run.proc.wait(), timeout_ms / 1000)
    except TimeoutError:
        timed_out = True
        await state.kill(run)
    except asyncio.CancelledError:
        state.cwd_done(cwd_file)
        await asyncio.shield(state.kill(run))
        raise
    moved: BackgroundShell | None = None
    if timed_out or await run.settle(SETTLE_S):
        state.done(run)
    else:  # the shell exited, what it started in the background did not: hand that to the model
        moved = state.background(run, args.command)
    _update_cwd(ctx, state, run, cwd_file)
    output = run.capture.text()
    if moved is not None:
        moved.delivered = len(output)
    output = output.rstrip("\n")
    code = run.proc.returncode
    meta: dict[str, object] = {
        "command": args.command,
        "exit_code": code,
        "duration_ms": int((time.monotonic() - started) * 1000),
        "timed_out": timed_out,
        "sandboxed": sandbox is not None,
    }
    if timed_out:
        return ToolOutput(
            f"{output}\nCommand timed out after {timeout_ms / 1000:g}s and was killed".lstrip("\n"),
            is_error=True,
            metadata=meta,
        )
    if code:
        output = f"{output}\nExit code {code}".lstrip("\n")
    denial = sandbox.explain(output, code, args.command) if sandbox is not None else None
    if denial is not None:
        meta["sandbox_denied"] = True
        output = f"{output}\n\n{denial}".lstrip("\n")
    if moved is not None:
        meta["background_id"] = moved.id
        output = f"{output}\n\n{_moved_note(moved)}".lstrip("\n")
    return ToolOutput(output or "(no output)", is_error=bool(code), metadata=meta)


def _moved_note(shell: BackgroundShell) -> str:
    who = describe(tagged(shell.run.tag)) or "processes it started"
    return (
        f"[The shell exited, but what it started in the background is still running: {who}. keel moved it to "
        f"background shell {shell.id}: read its output with BashOutput, stop it with KillShell. It is stopped "
        "when the session ends.]"
    )


async def _bash_output(args: BashOutputInput, ctx: ToolContext) -> ToolOutput:
    state = ctx.services.get(ShellState)
    shell = state.shells.get(args.bash_id)
    if shell is None:
        raise ToolError(f"No background shell with ID {args.bash_id}")
    status = shell.status  # reads what the pipe holds
    if status != "running" and shell.run in state.runs:
        state.done(shell.run)
    text = shell.capture.text()
    new, shell.delivered = text[shell.delivered :], len(text)
    if args.filter:
        try:
            rx = re.compile(args.filter)
        except re.error as e:
            raise ToolError(f"invalid filter regex: {e}") from None
        new = "\n".join(line for line in new.splitlines() if rx.search(line))
    if shell.sandbox is not None and status != "running" and not shell.explained and not shell.killed:
        denial = shell.sandbox.explain(text, shell.run.proc.returncode, shell.command)
        shell.explained = True
        if denial is not None:
            new = f"{new.rstrip()}\n\n{denial}"
    return ToolOutput(
        f"<status>{status}</status>\n<output>\n{new.rstrip()}\n</output>",
        metadata={"bash_id": shell.id, "status": status},
    )


async def _kill_shell(args: KillShellInput, ctx: ToolContext) -> ToolOutput:
    state = ctx.services.get(ShellState)
    shell = state.shells.get(args.shell_id)
    if shell is None:
        raise ToolError(f"No background shell with ID {args.shell_id}")
    await state.kill(shell.run)
    shell.killed = True
    return ToolOutput(f"Killed shell {shell.id} ({shell.command})", metadata={"shell_id": shell.id})


BASH_DESC = (
    "Run a bash command in a non-interactive shell (no TTY, stdin closed); the working directory persists "
    "between calls. Timeout 120000 ms by default, 600000 at most. For builds, tests, git and package managers; "
    "for files use Read, Grep, Glob, Edit and Write, not cat, grep, find or sed. Quote paths with spaces; "
    "chain dependent commands with &&. Long-running servers: run_in_background, then BashOutput and KillShell."
)


_COMMITTED = re.compile(r"^\[(?P<branch>[^\s\]]+)(?: \(root-commit\))? (?P<sha>[0-9a-f]{7,40})\] ", re.M)


def _bash_response(tool_input: dict[str, Any], output: ToolOutput) -> Any:
    """Claude Code's ``tool_response`` for Bash; after a ``git commit`` that printed its summary
    line (``[main 1a2b3c4] message``), the ``gitOperation`` Claude Code 2.1.328 adds."""
    text = output.text()
    response: dict[str, Any] = {
        "stdout": "" if text == "(no output)" else text,
        "stderr": "",
        "interrupted": bool(output.metadata.get("timed_out", False)),
        "isImage": False,
        "noOutputExpected": False,
    }
    command = tool_input.get("command")
    if isinstance(command, str) and "git" in command and "commit" in command and not output.is_error:
        found = _COMMITTED.search(text)
        if found is not None:
            commit = {"sha": found["sha"], "kind": "committed", "branch": found["branch"]}
            response["gitOperation"] = {"commit": commit}
    return response


def shell_tools() -> list[Tool]:
    return [
        Tool(
            "Bash",
            BASH_DESC,
            BashInput,
            _bash,
            group="system",
            timeout_s=MAX_TIMEOUT_MS / 1000 + 30,
            effects=Effects(rule=SHELL, shell=True, preview="tail", sandboxed=True),  # noqa: S604 - a declaration, not a call
            respond=_bash_response,
        ),
        Tool(
            "BashOutput",
            "Read a background shell's output since the last read (a shell started with run_in_background).",
            BashOutputInput,
            _bash_output,
            group="system",
            read_only=True,
            timeout_s=30,
            effects=Effects(preview="tail"),
        ),
        Tool(
            "KillShell", "Kill a background shell by its ID.", KillShellInput, _kill_shell, group="system", timeout_s=30
        ),
    ]
