"""``keel -p``: run one prompt to a stop and print the result as text, JSON or stream-JSON."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkeel import (
    Event,
    KeelError,
    Notice,
    PermissionMode,
    RequestStarted,
    RunFinished,
    RunResult,
    Runtime,
    RuntimeOptions,
    SessionStarted,
    ToolFinished,
)
from agentkeel.commands.run import run_prompt
from agentkeel.ui.cli._common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_ERROR,
    EXIT_TERMINATED,
    EXIT_USAGE,
    HEADLESS_MAX_TURNS,
    split_tools,
)

if TYPE_CHECKING:
    from agentkeel.ui.sdk.structured import StructuredOutput

# The result's and stream-json's encoders (protocol/, sdk/structured) are imported where they are
# used: a -p run with JSON output needs them only once the run is over, not before its first request.


def options_from_args(args: argparse.Namespace) -> RuntimeOptions:
    """RuntimeOptions from the flags; a flag value keel cannot use raises KeelError (one line)."""
    from agentkeel.ui.cli.sdkflags import apply_sdk_flags

    mode: PermissionMode | None = "bypassPermissions" if args.dangerously_skip_permissions else args.permission_mode
    opts = RuntimeOptions(
        cwd=Path(args.cwd) if args.cwd else Path.cwd(),
        model=args.model,
        permission_mode=mode,
        allowed_tools=split_tools(args.allowed_tools),
        disallowed_tools=split_tools(args.disallowed_tools),
        max_turns=args.max_turns,
        max_budget_usd=args.max_budget_usd,
        append_system_prompt=args.append_system_prompt,
        add_dirs=[Path(d) for d in args.add_dirs],
        continue_session=args.continue_session,
        resume=args.resume,
        settings_files=[Path(f) for f in args.settings],
        fallback_model=args.fallback_model,
        channel="headless",
    )
    apply_sdk_flags(args, opts)
    return opts


def result_object(rt: Runtime, result: RunResult, structured: StructuredOutput | None = None) -> dict[str, Any]:
    """Claude Code's result message shape (with ``structured_output`` under --json-schema): the calls
    the permission system denied (``permission_denials``), why the run ended (``terminal_reason``,
    ``errors``, and an API error's shape: see :func:`agentkeel.protocol.stream_json.end_of_run`);
    plus keel's ``context`` (window, tokens by source, compactions, cache share)."""
    from agentkeel.context.commands import result_fields as context_result_fields
    from agentkeel.protocol.stream_json import end_of_run, permission_denials
    from agentkeel.ui.sdk.structured import result_object as sdk_result

    out = sdk_result(rt.session_id, result, structured)
    out["permission_denials"] = permission_denials(result.refused)
    error = result.error if result.is_error else out["result"]  # a schema retry failure: its why
    end_of_run(
        out,
        error=error,
        api_error_status=result.api_error_status,
        interrupted_during=result.interrupted_during,
        api_error=result.api_error,
    )
    out["context"] = context_result_fields(rt)
    return out


def denials_line(result: RunResult) -> str | None:
    """The one stderr line of a text-mode run whose calls the permission system denied."""
    from agentkeel.protocol.stream_json import permission_denials

    denied = permission_denials(result.refused)
    if not denied:
        return None
    names = ", ".join(dict.fromkeys(d["tool_name"] for d in denied))
    calls = "1 tool call was" if len(denied) == 1 else f"{len(denied)} tool calls were"
    return f"keel: {calls} denied ({names}): see --allowedTools and --permission-mode"


# what a limit's line adds in text mode: the flag that moves it
_LIMIT_HINTS = {
    "error_max_turns": "raise --max-turns to let it go on",
    "error_max_budget_usd": "raise --max-budget-usd to let it go on",
}


OUTPUT_CLOSED = "output closed"
OUTPUT_FAILED = "output could not be written"


def _drop_stdout() -> None:
    """What is still buffered for a stdout that cannot be written is dropped (the interpreter's
    last flush would fail on it again); stdout now goes to /dev/null."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        if sys.stdout is not None:
            os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


class Output:
    """stdout for one run. A reader that goes away (``| head -1``) is a normal end: the run
    is stopped (its result and the session log say "output closed"), nothing more is written,
    and keel exits quietly."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.closed = False
        self.error = ""  # stdout cannot be written (a full disk, closed): the run stops, exit 1, one line

    def failure(self) -> str:
        """Why stdout could not be written ("" while it can)."""
        return self.error

    def write(self, text: str) -> None:
        if self.closed or self.error:
            return
        try:
            if sys.stdout is None:  # fd 1 was closed when keel started
                raise OSError(errno.EBADF, "stdout is closed")
            sys.stdout.write(text)
            sys.stdout.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.closed = True
            self.rt.agent.interrupt(OUTPUT_CLOSED)
        except (OSError, ValueError) as e:
            self.error = f"cannot write the output: {getattr(e, 'strerror', None) or e}"
            self.rt.agent.interrupt(OUTPUT_FAILED)
            with contextlib.suppress(OSError, ValueError, AttributeError):
                _drop_stdout()


class StreamJson:
    """Writes the session as Claude Code's stream-json lines (see agentkeel.protocol.stream_json).
    The result line is written once the run is over, with the process's whole duration."""

    def __init__(
        self,
        rt: Runtime,
        out: Output,
        *,
        partial: bool = False,
        hooks: bool = False,
        opts: RuntimeOptions | None = None,
    ) -> None:
        from agentkeel.protocol import stream_json
        from agentkeel.protocol.partial import PartialMessages

        self.stream_json = stream_json
        self.out = out
        self.rt = rt
        self.opts = opts
        visible = [t.name for t in rt.agent.tools.visible(rt.agent.ext.hides)]
        self.session = stream_json.Session(rt.session_id, visible)
        self.partial = PartialMessages(rt.session_id) if partial else None
        self.hooks = hooks

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            return
        if isinstance(event, SessionStarted):  # the MCP servers have started: their tools and status
            from agentkeel.ui.cli.control_handlers import init_fields

            rt = self.rt
            self.session.tools = [t.name for t in rt.agent.tools.visible(rt.agent.ext.hides)]
            self.session.extra_init = init_fields(rt, self.opts)
        stream_json = self.stream_json
        extra = self.partial.encode(event) if self.partial is not None else []
        if self.hooks:
            extra += stream_json.hook_lines(event, self.session.session_id)
        for item in extra:
            self.out.write(stream_json.dumps(item))
        line = stream_json.encode(event, self.session)
        if line is not None:
            self.out.write(stream_json.dumps(line))


def run_headless(args: argparse.Namespace, prompt: str) -> int:
    from agentkeel.models import _http
    from agentkeel.ui.cli.sdkflags import restrict_tools, structured_output

    _http.standalone()

    started = time.monotonic()
    try:
        opts = options_from_args(args)
        if opts.max_turns is None:  # nobody watches a -p run turn by turn: a runaway model must end
            opts.max_turns = HEADLESS_MAX_TURNS
        if args.permission_prompt_tool is not None or args.sdk_mcp_servers:
            raise KeelError("--permission-prompt-tool stdio and SDK MCP servers need --input-format stream-json")
        structured = structured_output(args)
        if structured is not None:
            opts.extensions.append(structured.extension())
        rt = Runtime.create(opts)
        restrict_tools(rt, args.tools)
    except KeelError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    out = Output(rt)
    verbose = bool(getattr(args, "verbose", False))
    if args.output_format == "stream-json":
        rt.bus.subscribe(
            StreamJson(rt, out, partial=args.include_partial_messages, hooks=args.include_hook_events, opts=opts)
        )
        from agentkeel.agents.spawner import forward_subagents  # what Claude Code shows of subagents
        from agentkeel.protocol.stream_json import dumps
        from agentkeel.ui.cli.mirror import attach_mirror

        forward_subagents(rt.agent, rt.session_id, lambda line: out.write(dumps(line)), text=False)
        attach_mirror(rt, lambda line: out.write(dumps(line)), opts.env, files=False, frames=args.session_mirror)
    else:
        rt.bus.subscribe(_notices_to_stderr(verbose=verbose))
    try:
        return asyncio.run(_run(rt, prompt, args.output_format, started, out, structured))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _notices_to_stderr(verbose: bool) -> Callable[[Event], None]:
    """Warnings and errors always. With --verbose also info notices (a memory summary's token
    cost, ...) and one line per model request and per tool call, as they happen."""

    def show(event: Event) -> None:
        if isinstance(event, Notice) and (verbose or event.level != "info"):
            print(f"keel: {event.message}", file=sys.stderr)
        elif not verbose:
            return
        elif isinstance(event, RequestStarted):
            print(f"keel: request {event.turn} to {event.model} ({event.message_count} messages)", file=sys.stderr)
        elif isinstance(event, ToolFinished):
            outcome = "error" if event.is_error else "ok"
            code = event.metadata.get("exit_code")
            detail = f", exit {code}" if code is not None else ""
            print(f"keel: {event.name} {outcome}{detail} ({event.duration_ms} ms)", file=sys.stderr)

    return show


async def _run(
    rt: Runtime, prompt: str, output_format: str, started: float, out: Output, structured: StructuredOutput | None
) -> int:
    loop = asyncio.get_running_loop()
    signals: list[int] = []

    def on_signal(sig: int) -> None:
        signals.append(sig)
        if len(signals) > 1:
            os._exit(EXIT_TERMINATED if sig == signal.SIGTERM else EXIT_INTERRUPTED)  # entries already flushed
        rt.agent.interrupt()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        result = await run_prompt(rt, prompt)  # "/name args" runs that slash command, as in Claude Code
    finally:
        await rt.aclose(
            "interrupted" if signals else OUTPUT_CLOSED if out.closed else OUTPUT_FAILED if out.error else "exit"
        )
    result.duration_ms = int((time.monotonic() - started) * 1000)
    if out.error:
        print(f"keel: {out.error}", file=sys.stderr)
        return EXIT_RUN_ERROR
    if out.closed:
        return EXIT_OK  # the reader went away: a normal end
    if output_format == "text":
        denied = denials_line(result)  # exit code as Claude Code's (0), but never silent
        if denied is not None:
            print(denied, file=sys.stderr)
        if structured is not None and structured.error and not result.is_error:
            from agentkeel.ui.sdk.structured import RETRY_SUBTYPE

            print(f"keel: {RETRY_SUBTYPE}: {structured.error}", file=sys.stderr)
            return EXIT_RUN_ERROR
        if result.is_error:
            hint = _LIMIT_HINTS.get(result.subtype)
            why = result.error or result.result
            print(f"keel: {result.subtype}: {why}{'; ' + hint if hint else ''}", file=sys.stderr)
        elif result.result:
            out.write(result.result + "\n")
    else:
        from agentkeel.protocol import stream_json

        out.write(stream_json.dumps(result_object(rt, result, structured)))
    if out.failure():  # the answer itself could not be written
        print(f"keel: {out.error}", file=sys.stderr)
        return EXIT_RUN_ERROR
    if signals:
        return EXIT_TERMINATED if signals[0] == signal.SIGTERM else EXIT_INTERRUPTED
    failed = result.is_error or (structured is not None and bool(structured.error))
    return EXIT_RUN_ERROR if failed else EXIT_OK
