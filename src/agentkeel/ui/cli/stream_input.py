"""``keel --input-format stream-json --output-format stream-json``: the Claude Agent SDK's transport.

stdin carries user messages and control lines (JSON, one a line); stdout carries the session as
stream-json plus control lines. The client's ``initialize`` (hook callbacks, system prompt parts)
is read before the session is built. Each user message is a run; the result line follows it.
keel asks the client over the same channel: ``can_use_tool`` (with ``--permission-prompt-tool
stdio``), ``hook_callback`` and ``mcp_message`` (the tools of SDK-hosted MCP servers).
The requests the client sends are answered in :mod:`agentkeel.ui.cli.control_handlers`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from agentkeel import Event, KeelError, Runtime, RuntimeOptions
from agentkeel.core.events import RunFinished, SessionStarted, new_id
from agentkeel.core.extensions import ToolCall
from agentkeel.policy.permissions.verdicts import Decision
from agentkeel.protocol import control, stream_json
from agentkeel.protocol.partial import PartialMessages
from agentkeel.ui.cli._common import EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_ERROR, EXIT_TERMINATED, EXIT_USAGE
from agentkeel.ui.sdk.denials import DenialMessages
from agentkeel.ui.sdk.structured import StructuredOutput

_KEEL_STOP = object()


class Channel:
    """stdout lines, and keel's own control requests waiting for the client's answers."""

    def __init__(self) -> None:
        self.pending: dict[str, asyncio.Future[stream_json.ControlResponse]] = {}
        self.closed = False  # stdout is gone
        self.error = ""  # why stdout could not be written (a full disk, closed at start): exit 1 with it
        self.input_closed = False  # stdin ended: nobody can answer a request any more
        self.on_gone: Callable[[str], None] = lambda why: None  # stops the run (fail closed), saying why
        self.lock = threading.Lock()

    def write(self, line: dict[str, Any]) -> None:
        if self.closed:
            return
        text = stream_json.dumps(line)
        with self.lock:
            try:
                if sys.stdout is None:  # fd 1 was closed when keel started
                    raise OSError(errno.EBADF, "stdout is closed")
                sys.stdout.write(text)
                sys.stdout.flush()
            except (BrokenPipeError, ConnectionResetError, ValueError):
                self.closed = True
                self.on_gone("output closed")
            except OSError as e:
                self.closed = True
                self.error = f"cannot write the output: {e.strerror or e}"
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    devnull = os.open(os.devnull, os.O_WRONLY)  # what is buffered is dropped, not retried
                    os.dup2(devnull, sys.stdout.fileno())
                    os.close(devnull)
                self.on_gone("output could not be written")

    async def request(self, body: dict[str, Any]) -> dict[str, Any]:
        """Send a control request and wait for the client's answer; an error answer raises."""
        if self.closed or self.input_closed:
            self.on_gone("output closed" if self.closed else "the client closed stdin")
            raise control.ControlError("the client is gone (stdin closed): nobody can answer")
        line = control.request(body)
        rid = line["request_id"]
        future: asyncio.Future[stream_json.ControlResponse] = asyncio.get_running_loop().create_future()
        self.pending[rid] = future
        try:
            self.write(line)
            answer = await future
        except asyncio.CancelledError:
            self.write(control.cancel(rid))
            raise
        finally:
            self.pending.pop(rid, None)
        if not answer.ok:
            raise control.ControlError(answer.error or f"the client refused {body.get('subtype')}")
        return answer.body

    def answered(self, response: stream_json.ControlResponse) -> None:
        future = self.pending.get(response.request_id)
        if future is not None and not future.done():
            future.set_result(response)

    def end_of_input(self) -> None:
        """stdin ended. Queued messages still run, but a question to the client cannot be answered:
        the run that asked is stopped, and the question counts as refused."""
        self.input_closed = True
        if self.pending:
            self.on_gone("the client closed stdin before answering")
            self.fail_all("the client closed stdin before answering")

    def fail_all(self, why: str) -> None:
        for future in self.pending.values():
            if not future.done():
                future.set_result(stream_json.ControlResponse("", False, {}, why))


class Session:
    """One stream-json session: the runtime (built on the first initialize or user message), the
    queue of user messages, and what the last run left (result fields, structured output)."""

    def __init__(self, args: argparse.Namespace, opts: RuntimeOptions, structured: StructuredOutput | None) -> None:
        self.args = args
        self.opts = opts
        self.structured = structured
        self.channel = Channel()
        self.inputs: asyncio.Queue[object] = asyncio.Queue()
        self.rt: Runtime | None = None
        self.sdk_servers: list[str] = list(args.sdk_mcp_servers)
        self.mcp_tools: dict[str, list[str]] = {}
        self.running: asyncio.Task[Any] | None = None
        self.initialized = False
        self.mode_before_start: str | None = None
        self.last_error = False
        self.usage_error = False
        self.partial: PartialMessages | None = None
        self.encoder = stream_json.Session("")
        self.old_providers: list[Any] = []
        self.building = asyncio.Lock()
        self.denial_messages = DenialMessages()
        self.stop_reading: Callable[[], None] = lambda: None  # _serve: end the input loop
        self.extended = False  # the session's own extensions are in opts (once: /clear builds again)
        self.started: SessionStarted | None = None  # the session's start, told again before each later turn
        self.turns = 0  # the messages this session has run
        self.model_choice: str | None = None  # set_model's (None: the configured model)
        self.interrupt_requested = False  # an interrupt came for the message being run (maybe before it began)

    # --- building the runtime ---------------------------------------------------------

    async def build(self, init: dict[str, Any] | None) -> Runtime:

        async with self.building:
            if self.rt is not None:
                return self.rt
            return await self._build(init)

    async def _build(self, init: dict[str, Any] | None) -> Runtime:
        from agentkeel.agents.spawner import forward_subagents
        from agentkeel.app.assembly import ResumeRefused
        from agentkeel.ui.cli.control_handlers import StartRefused
        from agentkeel.ui.cli.mirror import attach_mirror
        from agentkeel.ui.cli.sdkflags import restrict_tools
        from agentkeel.ui.cli.sdkmcp import attach_elicitation, initialize_servers, register_sdk_servers

        opts = self.opts
        if init is not None:
            regs = control.hook_registrations(init)
            opts.hooks = _merge_hooks(opts.hooks, self._hooks(regs))
            agents, skills = init.get("agents"), init.get("skills")
            if agents is not None and not isinstance(agents, dict):
                raise control.ControlError("initialize: 'agents' must be an object of name -> agent definition")
            if skills is not None and not (isinstance(skills, list) and all(isinstance(n, str) for n in skills)):
                raise control.ControlError("initialize: 'skills' must be a list of skill names")
            if agents:
                opts.agents = {**opts.agents, **agents}  # the SDK's agents win over same-named files
            if skills is not None:
                opts.skills = list(skills)
            self.sdk_servers += [n for n in initialize_servers(init, opts.mcp_config) if n not in self.sdk_servers]
            if isinstance(init.get("systemPrompt"), str):
                opts.system_prompt = init["systemPrompt"]
            if isinstance(init.get("appendSystemPrompt"), str):
                opts.append_system_prompt = init["appendSystemPrompt"]
        if self.args.permission_prompt_tool == "stdio":
            opts.ask = self._ask
            if not self.extended:
                opts.extensions.append(self.denial_messages.extension())
        if self.structured is not None and not self.extended:
            opts.extensions.append(self.structured.extension())
        self.extended = True
        try:
            rt = Runtime.create(opts)
        except ResumeRefused as e:  # Claude Code's answer: an error result, then the end
            raise StartRefused(str(e)) from None
        except KeelError as e:
            raise control.ControlError(str(e)) from None
        self.rt = rt
        try:
            restrict_tools(rt, self.args.tools)
        except KeelError as e:
            raise control.ControlError(str(e)) from None
        if self.mode_before_start is not None:
            rt.permissions.mode = self.mode_before_start  # type: ignore[assignment]
        self.encoder = stream_json.Session(rt.session_id)
        if self.args.include_partial_messages:
            self.partial = PartialMessages(rt.session_id)
        rt.bus.subscribe(self._on_event)
        forward_subagents(
            rt.agent, rt.session_id, self.channel.write, text=bool(init and init.get("forwardSubagentText"))
        )
        attach_mirror(rt, self.channel.write, opts.env, files=True, frames=self.args.session_mirror)
        self.channel.on_gone = rt.agent.interrupt
        self.mcp_tools = await register_sdk_servers(rt, self.sdk_servers, self.channel.request)
        attach_elicitation(rt, self.channel.request)
        return rt

    def _hooks(self, regs: list[control.HookRegistration]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for reg in regs:
            handlers = []
            for cid in reg.callback_ids:
                handler: dict[str, Any] = {"type": "python", "callable": self._hook_callback(cid)}
                if reg.timeout is not None:
                    handler["timeout"] = reg.timeout
                handlers.append(handler)
            entry: dict[str, Any] = {"hooks": handlers}
            if reg.matcher is not None:
                entry["matcher"] = reg.matcher
            out.setdefault(reg.event, []).append(entry)
        return out

    def _hook_callback(self, callback_id: str) -> Any:
        async def call(payload: dict[str, Any]) -> dict[str, Any]:
            return await self.channel.request(control.hook_callback(callback_id, payload))

        return call

    async def _ask(self, call: ToolCall, decision: Decision) -> bool:
        body = await self.channel.request(
            control.can_use_tool(call.name, dict(call.input), call.id, decision.reason, list(decision.suggestions))
        )
        answer = control.permission_answer(body)
        if answer.allow:
            if answer.updated_input is not None:
                call.input = dict(answer.updated_input)
            return True
        if answer.message:
            self.denial_messages.pending[call.id] = answer.message
        if answer.interrupt and self.rt is not None:
            self.rt.agent.interrupt()
        return False

    # --- output -------------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        rt = self.rt
        if isinstance(event, RunFinished) or rt is None:
            return
        if isinstance(event, SessionStarted):
            self.encoder.tools = [t.name for t in rt.agent.tools.visible(rt.agent.ext.hides)]
            self.encoder.extra_init = self.init_fields(rt)
            self.started = event
        if self.partial is not None:
            for line in self.partial.encode(event):
                self.channel.write(line)
        if self.args.include_hook_events:
            for line in stream_json.hook_lines(event, self.encoder.session_id):
                self.channel.write(line)
        encoded = stream_json.encode(event, self.encoder)
        if encoded is not None:
            self.channel.write(encoded)

    def init_fields(self, rt: Runtime) -> dict[str, Any]:
        from agentkeel.ui.cli.control_handlers import init_fields

        return init_fields(rt, self.opts, self.sdk_servers)

    # --- runs ---------------------------------------------------------------------------

    async def run_one(self, message: Any, started: float, origin: dict[str, Any] | None = None) -> None:
        rt = await self.build(None)
        if self.structured is not None:
            self.structured.reset()
        source = "resume" if rt.resumed is not None else "startup"
        command = _slash_line(message)
        if command is not None and _is_clear(rt, command):
            await self.clear(rt, started)
            return
        try:
            await rt.start()
            self._init_again(rt)
            if command is None:
                result = await self._run(rt, message, source)
            else:  # "/name args": that command, as Claude Code runs it (the SDKs' only input mode)
                from agentkeel.commands.run import run_prompt

                result = await run_prompt(rt, command)
        except Exception as exc:  # a SinkFailed start: the run could not begin
            result = rt.agent.failed(str(exc))
        from agentkeel.ui.cli.headless import result_object

        result.duration_ms = int((time.monotonic() - started) * 1000)
        line = result_object(rt, result, self.structured)  # its permission_denials: every call denied
        if origin is not None:
            line["origin"] = origin
        self.last_error = bool(line["is_error"])
        self.channel.write(line)

    def _init_again(self, rt: Runtime) -> None:
        """Claude Code writes an ``init`` line before every turn, not only the first: the second
        and later turns of a session get one too (as things stand then: tools, mode, model)."""
        self.turns += 1
        if self.turns == 1 or self.started is None:
            return
        self.encoder.tools = [t.name for t in rt.agent.tools.visible(rt.agent.ext.hides)]
        self.encoder.extra_init = self.init_fields(rt)
        again = msgspec.structs.replace(self.started, model=rt.model.qualified, uuid=new_id())
        line = stream_json.encode(again, self.encoder)
        if line is not None:
            self.channel.write(line)

    async def _run(self, rt: Runtime, message: Any, source: str) -> Any:
        """The agent's run of one message. An interrupt that arrived before the run began (the
        SDK's ``interrupt()`` right after ``query()``) stops it too, as in Claude Code."""
        task = asyncio.ensure_future(rt.agent.run(message, source=source))
        await asyncio.sleep(0)  # the run has begun: its interrupt flag is fresh
        if self.interrupt_requested:
            rt.agent.interrupt()
        return await task

    def interrupt(self) -> None:
        """The client's ``interrupt``: the message being run (or about to be) stops."""
        if self.running is not None or not self.inputs.empty():
            self.interrupt_requested = True
        if self.rt is not None:
            self.rt.agent.interrupt()

    async def clear(self, rt: Runtime, started: float) -> None:
        """``/clear`` as Claude Code 2.1.328 does it in stream-json: ``conversation_reset`` (the old
        session's id), then a new session (its own id and transcript, a new ``init``) whose result
        is the command's (``local_command: "clear"``, no turn). The old transcript is kept whole;
        the permission mode and the model carry over."""
        self.channel.write(stream_json.conversation_reset(rt.session_id))
        mode = rt.permissions.mode
        await rt.aclose("clear")
        opts = self.opts
        opts.resume, opts.continue_session, opts.fork_session, opts.session_id = None, False, False, None
        opts.start_source = "clear"  # the new session's SessionStart hooks see source "clear", as Claude Code's
        self.rt, self.mode_before_start, self.started, self.turns = None, mode, None, 1  # the new init counts
        try:
            fresh = await self.build(None)
            if self.model_choice is not None:
                from agentkeel.ui.cli.control_handlers import set_model

                await set_model(self, self.model_choice)
            await fresh.start()
        except Exception as exc:  # the new session could not be built: say so, as an error result
            self.last_error = True
            self.channel.write(
                stream_json.end_of_run(
                    self._cleared_line(rt.session_id, started, str(exc)), error=str(exc), api_error_status=None
                )
            )
            return
        line = self._cleared_line(fresh.session_id, started, "")
        self.last_error = False
        self.channel.write(line)

    def _cleared_line(self, session_id: str, started: float, error: str) -> dict[str, Any]:
        line = stream_json.result_line(
            subtype="error_during_execution" if error else "success",
            is_error=bool(error),
            duration_ms=int((time.monotonic() - started) * 1000),
            num_turns=0,
            result=error,
            session_id=session_id,
            total_cost_usd=0.0,
            usage={
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
            },
        )
        line["stop_reason"] = None
        line.pop("terminal_reason", None)
        line["local_command"] = "clear"
        return line


def _slash_line(message: Any) -> str | None:
    """The text of a user message that is a slash command line (text blocks only), else None."""
    from agentkeel.commands.registry import parse_line
    from agentkeel.core.types import Message, TextBlock

    if not isinstance(message, Message) or not all(isinstance(b, TextBlock) for b in message.content):
        return None
    text = message.text().strip()
    return text if parse_line(text) is not None else None


def _is_clear(rt: Runtime, line: str) -> bool:
    """Whether ``line`` runs the built-in /clear (a project command of that name wins over it)."""
    from agentkeel.commands.registry import CommandRegistry, parse_line

    parsed = parse_line(line)
    registry = rt.agent.services.find(CommandRegistry)
    command = registry.get(parsed[0]) if parsed is not None and registry is not None else None
    return command is not None and command.kind == "builtin" and command.name == "clear"


def _merge_hooks(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = {k: list(v) for k, v in base.items()}
    for event, entries in extra.items():
        merged.setdefault(event, []).extend(entries)
    return merged


def _reader(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes | None]) -> None:
    """stdin in a thread (it may be a pipe, a file or a terminal): one put per line, None at EOF."""
    stream = sys.stdin.buffer
    try:
        for raw in iter(stream.readline, b""):
            loop.call_soon_threadsafe(queue.put_nowait, raw)
    except (OSError, ValueError):
        pass
    with contextlib.suppress(RuntimeError):  # the loop is already closed
        loop.call_soon_threadsafe(queue.put_nowait, None)


async def _serve(session: Session) -> int:
    from agentkeel.ui.cli.control_handlers import StartRefused, handle, start_failure

    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()
    threading.Thread(target=_reader, args=(loop, lines), daemon=True, name="keel-stdin").start()
    session.stop_reading = lambda: lines.put_nowait(None)
    signals: list[int] = []

    def on_signal(sig: int) -> None:
        signals.append(sig)
        if len(signals) > 1:
            os._exit(EXIT_TERMINATED if sig == signal.SIGTERM else EXIT_INTERRUPTED)
        if session.rt is not None:
            session.rt.agent.interrupt()
        lines.put_nowait(None)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)

    async def worker() -> None:
        while True:
            item = await session.inputs.get()
            if item is _KEEL_STOP:
                return
            assert isinstance(item, stream_json.UserInput)
            session.running = asyncio.current_task()
            try:
                await session.run_one(item.message, time.monotonic(), item.origin)
                session.interrupt_requested = False  # it applied to this message
            except control.ControlError as e:  # the session could not be built: a usage error
                print(f"keel: {e}", file=sys.stderr)
                session.usage_error = True
                if isinstance(e, StartRefused):  # as Claude Code: an error result too
                    session.channel.write(start_failure(str(e)))
                return
            finally:
                session.running = None

    work = asyncio.create_task(worker())
    handlers: set[asyncio.Task[None]] = set()
    number = 0
    while True:
        raw = await lines.get()
        if raw is None or work.done():
            break
        number += 1
        try:
            item = stream_json.decode(raw.decode("utf-8", errors="replace"))
        except stream_json.ProtocolError as e:
            print(f"keel: stream-json input line {number}: {e}; line skipped", file=sys.stderr)
            continue
        if item is None or isinstance(item, stream_json.ControlCancel):
            continue
        if isinstance(item, stream_json.ControlResponse):
            session.channel.answered(item)
        elif isinstance(item, stream_json.ControlRequest):
            task = asyncio.create_task(handle(session, item))
            handlers.add(task)
            task.add_done_callback(handlers.discard)
        else:
            session.inputs.put_nowait(item)
    session.channel.end_of_input()
    session.inputs.put_nowait(_KEEL_STOP)
    with contextlib.suppress(asyncio.CancelledError):
        await work
    for task in list(handlers):
        task.cancel()
    session.channel.fail_all("keel is shutting down")
    if session.rt is not None:
        await session.rt.aclose(
            "interrupted" if signals else "output could not be written" if session.channel.error else "exit"
        )
        for provider in session.old_providers:
            with contextlib.suppress(Exception):
                await provider.aclose()
    if session.channel.error:
        print(f"keel: {session.channel.error}", file=sys.stderr)
        return EXIT_RUN_ERROR
    if signals:
        return EXIT_TERMINATED if signals[0] == signal.SIGTERM else EXIT_INTERRUPTED
    if session.usage_error:
        return EXIT_USAGE
    return EXIT_RUN_ERROR if session.last_error else EXIT_OK


def run_stream_input(args: argparse.Namespace) -> int:
    from agentkeel.ui.cli.headless import options_from_args
    from agentkeel.ui.cli.sdkflags import structured_output

    try:
        opts = options_from_args(args)
        opts.channel = "sdk"
        structured = structured_output(args)
    except KeelError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    if " ".join(args.prompt).strip():
        print("keel: with --input-format stream-json the prompt comes on stdin, not as an argument", file=sys.stderr)
        return EXIT_USAGE
    session = Session(args, opts, structured)
    try:
        return asyncio.run(_serve(session))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
