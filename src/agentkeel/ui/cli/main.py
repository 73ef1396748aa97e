"""``keel``: the command line. Flags follow Claude Code's where they overlap.

Imports here are deliberately minimal: ``keel --version`` loads nothing but argparse.

Exit codes: 0 success; 1 the run ended in error (max turns, budget, model or tool failure);
2 usage or configuration error (flags, settings, model, session); 130 interrupted (SIGINT);
143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import sys

from agentkeel.ui.cli._common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_ERROR,
    EXIT_TERMINATED,
    EXIT_USAGE,
    split_tools,
)

TYPE_CHECKING = False  # not typing's: ``keel --version`` imports no more than it needs
if TYPE_CHECKING:
    import logging
    from typing import NoReturn

SUBCOMMANDS = (
    "sessions",
    "permissions",
    "trust",
    "dev",
    "mem",
    "hooks",
    "batch",
    "sandbox",
    "plugins",
    "agents",
    "mcp",
    "serve",
)
__all__ = ["EXIT_INTERRUPTED", "EXIT_OK", "EXIT_RUN_ERROR", "EXIT_TERMINATED", "EXIT_USAGE", "main", "split_tools"]


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line that names the problem (an unknown flag says which)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"keel: {message} (see keel --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from agentkeel._version import __version__

    p = _Parser(
        prog="keel",
        description="keel: an AI coding agent runtime.",
        epilog=(
            "Subcommands: keel sessions list | keel permissions check|list | keel trust [PATH] | "
            "keel mem search|timeline|get|stats|... (memory; keel mem --help) | keel mcp list|get|add|remove | "
            "keel dev fake-llm --script FILE | keel acp (an ACP agent on stdio, for editors)"
        ),
    )
    p.add_argument("prompt", nargs="*", help="the prompt (interactive mode starts with it when -p is absent)")
    p.add_argument("-p", "--print", action="store_true", dest="print_mode", help="run headless: answer and exit")
    p.add_argument("-v", "--version", action="version", version=f"{__version__} (keel)")
    p.add_argument("--output-format", choices=["text", "json", "stream-json"], default="text")
    p.add_argument("--model", help="provider:model or an alias (sonnet, opus, haiku, gpt, ...)")
    p.add_argument("--fallback-model", help="the model to switch to when the main one stays overloaded")
    p.add_argument("--max-turns", type=int, help="stop after this many model requests (-p: 200 unless given)")
    p.add_argument("--max-budget-usd", type=float, help="stop when the session has cost this much")
    p.add_argument(
        "--allowedTools",
        "--allowed-tools",
        nargs="+",
        dest="allowed_tools",
        metavar="TOOL",
        help="tools (or rules such as 'Bash(git diff *)') that run without asking",
    )
    p.add_argument(
        "--disallowedTools",
        "--disallowed-tools",
        nargs="+",
        dest="disallowed_tools",
        metavar="TOOL",
        help="tools (or rules) that are denied",
    )
    p.add_argument("--permission-mode", choices=["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"])
    p.add_argument("--dangerously-skip-permissions", action="store_true", help="same as bypassPermissions")
    p.add_argument("--append-system-prompt", help="text appended to the system prompt")
    p.add_argument(
        "--add-dir",
        nargs="+",
        action="extend",
        default=[],
        dest="add_dirs",
        metavar="DIR",
        help="additional working directories",
    )
    p.add_argument(
        "-c",
        "--continue",
        action="store_true",
        dest="continue_session",
        help="continue the most recent session in this directory",
    )
    p.add_argument("-r", "--resume", metavar="SESSION_ID", help="resume a session by id (or unique prefix)")
    p.add_argument("--settings", action="append", default=[], metavar="FILE", help="an extra settings file")
    p.add_argument(
        "-w",
        "--worktree",
        nargs="?",
        const="",
        metavar="NAME",
        help="work in a git worktree .keel/worktrees/NAME (a name is picked when none is given)",
    )
    p.add_argument("--coordinate", metavar="GOAL", help="plan GOAL into subtasks and run them in parallel subagents")
    _sdk_flags(p)
    p.add_argument(
        "--no-tui", action="store_true", help="on a terminal, use the line mode instead of the full-screen UI"
    )
    p.add_argument("--cwd", help=argparse.SUPPRESS)
    p.add_argument("--verbose", action="store_true", help="log details to stderr")
    return p


# flags Claude Code has (and the Claude Agent SDK may pass) that keel does not honour yet: each
# fails with one line naming it, never silently
UNSUPPORTED = {
    "--betas": "keel sends no beta headers from the command line (set ANTHROPIC_BETAS)",
    "--task-budget": "keel has no task budget; use --max-budget-usd",
    "--thinking-display": "keel has no thinking display setting",
    "--effort": "keel has no effort setting",
    "--system-prompt-file": 'use --system-prompt "$(cat FILE)"',
}


class _Unsupported(argparse.Action):
    def __call__(
        self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: object, opt: str | None = None
    ) -> None:
        parser.error(f"{self.option_strings[0]} is not supported by keel yet: {UNSUPPORTED[self.option_strings[0]]}")


def _sdk_flags(p: argparse.ArgumentParser) -> None:
    """The flags of Claude Code's stream-json mode, as the Claude Agent SDK passes them."""
    p.add_argument("--input-format", choices=["text", "stream-json"], default="text")
    p.add_argument("--include-partial-messages", action="store_true", help="stream-json: also stream_event lines")
    p.add_argument("--include-hook-events", action="store_true", help="stream-json: also a line per hook run")
    p.add_argument("--system-prompt", help="replace keel's system prompt")
    p.add_argument("--tools", help='the built-in tools offered: "" (none), "default", or a comma list')
    p.add_argument("--permission-prompt-tool", metavar="stdio", help="stdio: ask the SDK client (can_use_tool)")
    p.add_argument("--session-id", help="the new session's id (a UUID)")
    p.add_argument("--fork-session", action="store_true", help="with -r/-c: continue in a copy under a new id")
    p.add_argument("--setting-sources", help="user,project,local: which settings files are read")
    p.add_argument("--mcp-config", action="append", default=[], metavar="FILE|JSON", help="MCP servers")
    p.add_argument("--strict-mcp-config", action="store_true", help="only the servers of --mcp-config")
    p.add_argument("--plugin-dir", action="append", default=[], metavar="DIR", help="load a plugin for this session")
    p.add_argument("--max-thinking-tokens", type=int, help="the thinking budget (MAX_THINKING_TOKENS)")
    p.add_argument("--thinking", choices=["adaptive", "disabled"], help="disabled: no thinking")
    p.add_argument("--json-schema", metavar="SCHEMA", help="the final answer must be JSON valid under this schema")
    p.add_argument("--await-initialize", action="store_true", help=argparse.SUPPRESS)  # keel always does
    p.add_argument("--resume-session-at", metavar="UUID", help="with -r and --fork-session: keep up to this message")
    p.add_argument(
        "--resume-drops-turn", metavar="UUID", help="with --resume-session-at: the prompt of the turn dropped"
    )
    p.add_argument(
        "--session-mirror", action="store_true", help="stream-json: also transcript_mirror lines (SDK stores)"
    )
    for flag in UNSUPPORTED:
        p.add_argument(flag, nargs="?", action=_Unsupported, help=argparse.SUPPRESS)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv in (["--version"], ["-v"]):  # argparse's answer, without its help formatter (shutil...)
        from agentkeel._version import __version__

        print(f"{__version__} (keel)")
        return 0
    if argv and argv[0] == "acp":  # an ACP agent on stdio, for editors (agentkeel.ui.acp)
        from agentkeel.ui.acp.main import main as acp_main

        return acp_main(argv[1:])
    if argv and argv[0] in SUBCOMMANDS:
        from agentkeel.ui.cli.commands import run_subcommand

        return run_subcommand(argv)
    args = build_parser().parse_args(argv)
    # stream-json needs --verbose (as in Claude Code, and the SDK always passes it): it asks for the
    # full stream there, not for debug logs on the host's stderr
    _setup_logging(args.verbose and args.output_format != "stream-json")
    prompt = " ".join(args.prompt).strip()
    if args.resume or args.continue_session:
        from pathlib import Path

        from agentkeel.ui.cli.worktree import left_worktrees

        if line := left_worktrees(Path(args.cwd) if args.cwd else Path.cwd(), args.worktree or None):
            print(f"keel: {line}", file=sys.stderr)
    if args.worktree is not None:
        from agentkeel.ui.cli.worktree import run_in_session_worktree

        return run_in_session_worktree(args, lambda: _run_mode(args, prompt))
    return _run_mode(args, prompt)


def _run_mode(args: argparse.Namespace, prompt: str) -> int:
    if args.coordinate is not None:
        from agentkeel.ui.cli.coordinate import coordinate_mode

        return coordinate_mode(args, prompt)
    if args.input_format == "stream-json":
        if args.output_format != "stream-json":
            print("keel: --input-format stream-json needs --output-format stream-json", file=sys.stderr)
            return EXIT_USAGE
        from agentkeel.ui.cli.stream_input import run_stream_input

        return run_stream_input(args)
    if args.print_mode:
        prompt = _with_stdin(prompt)
        if not prompt:
            print('keel: -p needs a prompt: keel -p "what to do"', file=sys.stderr)
            return EXIT_USAGE
        from agentkeel.ui.cli.headless import run_headless

        return run_headless(args, prompt)
    from agentkeel.ui.cli.tui import load_tui, wants_tui

    if wants_tui(args.no_tui):
        run_tui = load_tui()
        if run_tui is not None:
            return run_tui(args, prompt)
        print(
            "keel: the full-screen UI needs textual (pip install 'agentkeel[tui]'); using the line mode",
            file=sys.stderr,
        )
    from agentkeel.ui.cli.interactive import run_interactive

    return run_interactive(args, prompt)


def _with_stdin(prompt: str) -> str:
    """``cat file | keel -p "explain"``: piped input is added to the prompt; never blocks."""
    import select

    stdin = sys.stdin
    try:
        if stdin is None or stdin.closed or stdin.isatty():
            return prompt
        ready, _, _ = select.select([stdin], [], [], 0.05)
        piped = stdin.read() if ready else ""
    except (OSError, ValueError):
        return prompt
    piped = piped.strip()
    if not piped:
        return prompt
    return f"{piped}\n\n{prompt}" if prompt else piped


def _no_traceback_formatter() -> logging.Formatter:
    import logging

    class NoTraceback(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return f"keel: {record.getMessage()}"

    return NoTraceback()


def _log_file_class() -> type:
    import logging

    class LogFile(logging.FileHandler):
        """keel.log, opened at its first record: a log folder that is gone by then (KEEL_HOME
        removed mid-session) drops the record, as a failed write does, instead of raising."""

        def emit(self, record: logging.LogRecord) -> None:
            try:
                super().emit(record)
            except OSError:
                self.handleError(record)

    return LogFile


def _setup_logging(verbose: bool) -> None:
    import logging
    import os

    logging.raiseExceptions = False  # a log file on a full disk must not flood stderr with tracebacks
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.DEBUG if verbose else logging.CRITICAL)
    formatter = logging.Formatter("keel: %(name)s: %(message)s") if verbose else _no_traceback_formatter()
    console.setFormatter(formatter)
    root.addHandler(console)
    from agentkeel.internal.home import keel_home
    from agentkeel.internal.private import open_private, private_dir, private_home

    home = keel_home()
    changed = None
    log_file_handler = _log_file_class()
    try:
        changed = private_home(home)  # keel's files are the user's alone: KEEL_HOME 0700, logs 0600
        private_dir(home / "logs")
        os.close(open_private(home / "logs" / "keel.log"))
        logfile = log_file_handler(home / "logs" / "keel.log", delay=True, encoding="utf-8")
        logfile.setLevel(logging.WARNING)
        logfile.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
        root.addHandler(logfile)
    except OSError:
        pass
    if changed:
        logging.getLogger("agentkeel").warning("%s", changed)
    for noisy in ("httpx", "httpcore", "anthropic", "openai", "httpx2", "httpcore2", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _quiet_closed_stdout() -> None:
    """The reader of our output went away (``keel ... | head -1``): a normal end. Point stdout
    at /dev/null so the interpreter's final flush does not complain."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _hold_std_fds() -> None:
    """A standard stream closed when keel started (``keel -p ... >&-``): /dev/null holds its number,
    so no file keel opens later (a session log) becomes fd 1 or 2 and gets what children print."""
    import os

    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                held = os.open(os.devnull, os.O_RDWR)
            except OSError:
                return
            if held != fd:  # a lower number was free too: it is taken in its turn
                os.dup2(held, fd)
                os.close(held)


def entry() -> None:
    """The console script: no traceback ever reaches the user; it goes to the log file."""
    _hold_std_fds()
    try:
        code = main()
        if sys.stdout is not None:  # None: stdout was closed when keel started
            sys.stdout.flush()
    except BrokenPipeError:
        _quiet_closed_stdout()
        code = EXIT_OK
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except Exception as exc:
        import logging

        logging.getLogger("agentkeel").critical("internal error", exc_info=True)
        print(
            f"keel: internal error: {type(exc).__name__}: {exc} (details in $KEEL_HOME/logs/keel.log; "
            "please report it)",
            file=sys.stderr,
        )
        code = EXIT_RUN_ERROR
    from agentkeel.ui.cli._exit import leave

    leave(code)  # sys.exit without the interpreter's teardown, when nothing is left running


if __name__ == "__main__":
    entry()
