"""The ACP agent: one ``keel acp`` process, any number of sessions, each a
:class:`~agentkeel.app.runtime.Runtime` (the same one the CLI, the TUI and ``keel serve`` drive).

Each session's bus feeds its client through one ordered outbox (``session/update`` notifications
are sent in the order keel published the events, and a prompt's answer waits for them); its
permission asks become ``session/request_permission`` requests (keel's host callback, as the
TUI's dialog and the web app's prompt are). A session that fails answers its own request with an
error; the others go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import PROTOCOL_VERSION, RequestError, schema

from agentkeel._version import __version__
from agentkeel.core.events import (
    AssistantMessage,
    Event,
    Notice,
    RequestStarted,
    RunFinished,
    TextDelta,
    ThinkingDelta,
    TodosUpdated,
    ToolResults,
    ToolStarted,
)
from agentkeel.core.tools import Effects, OpenFiles
from agentkeel.core.types import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agentkeel.policy.redact import redact
from agentkeel.ui.acp import updates as up
from agentkeel.ui.acp.client import ClientFiles, McpServer, invalid, mcp_config, to_message

if TYPE_CHECKING:
    from collections.abc import Mapping

    from acp.interfaces import Client

    from agentkeel.app.runtime import Runtime
    from agentkeel.core.extensions import ToolCall
    from agentkeel.policy.permissions import Answer
    from agentkeel.policy.permissions.verdicts import Decision

log = logging.getLogger("agentkeel.ui.acp")

MODES: dict[str, tuple[str, str]] = {  # keel's permission modes, as the client's mode picker shows them
    "default": ("Default", "Ask before edits, commands and fetches no rule allows"),
    "acceptEdits": ("Accept edits", "File edits in the project are allowed; commands still ask"),
    "plan": ("Plan", "Read and plan only: nothing is changed"),
    "dontAsk": ("Don't ask", "Deny whatever would ask"),
    "bypassPermissions": ("Bypass permissions", "Run every tool without asking (deny rules still hold)"),
}
ALLOW_ONCE, ALLOW_ALWAYS, REJECT = "allow", "allow_always", "reject"
OPTION_ANSWERS: dict[str, Answer] = {ALLOW_ONCE: "allow", ALLOW_ALWAYS: "allow_project", REJECT: "deny"}
STOP_REASONS: dict[str, schema.StopReason] = {
    "success": "end_turn",
    "interrupted": "cancelled",
    "error_max_turns": "max_turn_requests",
}
LIST_PAGE = 100  # sessions per session/list answer
CLIENT_WRITE_S = 30.0  # how long a cancel waits for an fs/write_text_file already sent


@dataclass
class AcpSession:
    """One ACP session over a keel Runtime: its outbox of updates, its running prompt."""

    id: str
    rt: Runtime
    client: Client
    cwd: Path
    outbox: asyncio.Queue[up.Update | None] = field(default_factory=asyncio.Queue)
    sender: asyncio.Task[None] | None = None
    prompt_task: asyncio.Task[Any] | None = None
    routing: asyncio.Task[Any] | None = None  # a slash command being expanded
    _deferred: asyncio.Task[None] | None = None  # an interrupt waiting for the editor's write
    cancelled: bool = False
    streamed: bool = False  # text or thinking reached the client as deltas in this request
    diffs: dict[str, schema.FileEditToolCallContent] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)  # warnings raised between prompts, shown at the next

    # --- sending ----------------------------------------------------------------------------

    def send(self, update: up.Update) -> None:
        if self.sender is None:
            self.sender = asyncio.get_running_loop().create_task(self._send_loop())
        self.outbox.put_nowait(update)

    async def _send_loop(self) -> None:
        while True:
            update = await self.outbox.get()
            try:
                if update is None:
                    return
                await self.client.session_update(session_id=self.id, update=update)
            except Exception:  # a client gone or a bad notification: the session goes on
                log.exception("session %s: an update could not be sent", self.id)
            finally:
                self.outbox.task_done()

    async def flush(self) -> None:
        """Every update published so far has been written to the client."""
        if self.sender is not None and not self.sender.done():
            await self.outbox.join()

    # --- keel's events ----------------------------------------------------------------------

    def effects(self, name: str) -> Effects:
        from agentkeel.tools import effects_for

        return effects_for(self.rt.agent.tools.get(name), name)

    def live_cwd(self) -> Path:
        from agentkeel.core.tools import Workdir

        workdir = self.rt.agent.services.find(Workdir)
        return workdir.path if workdir is not None and workdir.path is not None else self.cwd

    def on_event(self, event: Event) -> None:
        """The bus subscriber: each event the client should see becomes one or more updates."""
        if isinstance(event, TextDelta) and event.text:
            self.streamed = True
            self.send(up.text_chunk(event.text))
        elif isinstance(event, ThinkingDelta) and event.text:
            self.streamed = True
            self.send(up.thought_chunk(event.text))
        elif isinstance(event, RequestStarted):
            self.streamed = False
        elif isinstance(event, AssistantMessage):
            for block in event.message.content:
                if isinstance(block, ToolUseBlock):
                    self.send(up.tool_call_start(block, self.effects(block.name), self.live_cwd()))
                elif not self.streamed and isinstance(block, TextBlock) and block.text:
                    self.send(up.text_chunk(block.text))  # a provider that does not stream deltas
                elif not self.streamed and isinstance(block, ThinkingBlock) and block.thinking:
                    self.send(up.thought_chunk(block.thinking))
        elif isinstance(event, ToolStarted):
            diff = self.proposed_diff(event.name, event.input)
            if diff is not None:
                self.diffs[event.tool_use_id] = diff
            self.send(up.tool_call_progress(event.tool_use_id, "in_progress"))
        elif isinstance(event, ToolResults):
            for block in event.message.content:
                if isinstance(block, ToolResultBlock):
                    self.send(up.result_update(block, self.diffs.pop(block.tool_use_id, None)))
        elif isinstance(event, TodosUpdated):
            self.send(up.plan_update(event))
        elif isinstance(event, Notice) and event.level != "info":
            line = f"[keel] {event.level}: {redact(event.message)}\n\n"  # the editor shows it, may log it
            if self.prompt_task is not None and not self.prompt_task.done():
                self.send(up.text_chunk(line))
            else:  # no turn to show it in (session start): it opens the next answer
                self.notices.append(line)
        elif isinstance(event, RunFinished) and event.is_error and event.subtype != "interrupted" and event.result:
            self.send(up.text_chunk(f"\n\n[keel] {event.result}"))

    def proposed_diff(self, name: str, tool_input: dict[str, Any]) -> schema.FileEditToolCallContent | None:
        """What a file-changing call will do (read before it runs), as ACP diff content."""
        from agentkeel.tools.views import after as after_call

        effects = self.effects(name)
        paths = up.paths_of(effects, tool_input, self.live_cwd())
        if not effects.writes or not paths:
            return None
        path = paths[0]
        files = self.rt.agent.services.find(OpenFiles)
        before = files.seen.get(path) if isinstance(files, ClientFiles) else None  # the editor's buffer
        try:
            if before is None and path.is_file():
                before = path.read_text(encoding="utf-8", errors="replace")
            after = after_call(name, tool_input, before or "")
        except Exception:  # a diff is a convenience: the call itself says what went wrong
            log.exception("no diff for %s", name)
            return None
        return None if after is None else up.diff_content(str(path), before, after)

    # --- keel's questions ---------------------------------------------------------------------

    async def ask(self, call: ToolCall, decision: Decision) -> Answer:
        """The permission gate's host callback: ``session/request_permission`` to the client."""
        effects = self.effects(call.name)
        cwd = Path(call.cwd) if call.cwd is not None else self.live_cwd()
        diff = self.proposed_diff(call.name, call.input)
        tool_call = schema.ToolCallUpdate(
            tool_call_id=call.id,
            title=up.title_of(call.name, effects, call.input, cwd),
            kind=up.kind_of(effects),
            status="pending",
            raw_input=dict(call.input),
            locations=up.locations_of(effects, call.input, cwd) or None,
            content=[diff] if diff is not None else None,
        )
        options = [schema.PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once")]
        if decision.suggestions:  # "always" saves these rules, as the TUI's "for this project" does
            rules = ", ".join(decision.suggestions)
            options.insert(
                0, schema.PermissionOption(option_id=ALLOW_ALWAYS, name=f"Always allow {rules}", kind="allow_always")
            )
        options.append(schema.PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"))
        await self.flush()  # the client knows the tool call before it is asked about it
        response = await self.client.request_permission(session_id=self.id, tool_call=tool_call, options=options)
        outcome = response.outcome
        if isinstance(outcome, schema.AllowedOutcome):
            return OPTION_ANSWERS.get(outcome.option_id, "deny")
        return "deny"  # cancelled, or an option keel did not offer

    def modes(self) -> schema.SessionModeState:
        disabled = self.rt.settings.settings.permissions.disableBypassPermissionsMode == "disable"
        return schema.SessionModeState(
            current_mode_id=self.rt.permissions.mode,
            available_modes=[
                schema.SessionMode(id=mode, name=name, description=text)
                for mode, (name, text) in MODES.items()
                if not (disabled and mode == "bypassPermissions")
            ],
        )

    def commands(self) -> schema.AvailableCommandsUpdate:
        from agentkeel.commands.registry import CommandRegistry
        from agentkeel.commands.run import sync_mcp_prompts

        registry = self.rt.agent.services.find(CommandRegistry)
        if registry is None:
            return up.commands_update([])
        sync_mcp_prompts(self.rt, registry)
        seen: set[str] = set()
        listed = []
        for item in registry.completions():
            command = registry.get(item["name"])
            if command is not None and command.interactive_only:  # these need keel's own terminal UI
                continue
            if item["name"] not in seen:
                seen.add(item["name"])
                listed.append(item)
        return up.commands_update(listed)

    # --- a prompt -------------------------------------------------------------------------------

    async def run(self, blocks: list[Any]) -> schema.StopReason:
        mode = self.rt.permissions.mode
        try:
            return await self._run(blocks)
        finally:
            if self.rt.permissions.mode != mode:  # a command (/plan) or a tool changed it: the picker follows
                self.send(up.mode_update(self.rt.permissions.mode))

    async def _run(self, blocks: list[Any]) -> schema.StopReason:
        from agentkeel.commands.run import route_line

        message = to_message(blocks)
        rt = self.rt
        await rt.start()
        for line in self.notices:
            self.send(up.text_chunk(line))
        self.notices.clear()
        text = message.text()
        if len(message.content) == 1 and text.lstrip().startswith("/"):
            # a task of its own: a cancel stops the expansion (a command's !`...` is killed with it)
            self.routing = asyncio.get_running_loop().create_task(route_line(rt, text))
            try:
                routed = await self.routing
            except asyncio.CancelledError:
                if not self.cancelled:
                    raise
                return "cancelled"
            finally:
                self.routing = None
            if routed.kind in ("output", "error"):
                prefix = f"[/{routed.command}] " if routed.kind == "error" and routed.command else ""
                self.send(up.text_chunk(prefix + routed.text))
                return "cancelled" if self.cancelled else "end_turn"
            message = Message.user(routed.text)
        if self.cancelled:  # cancelled before the agent's turn began: its run would not see it
            return "cancelled"
        source = "resume" if rt.resumed is not None else "startup"
        result = await rt.agent.run(message, source=source)
        if self.was_cancelled():  # (a method: mypy holds on to the check before the await)
            return "cancelled"
        return STOP_REASONS.get(result.subtype, "end_turn")

    def was_cancelled(self) -> bool:
        return self.cancelled

    def cancel(self) -> None:
        if self.prompt_task is not None and not self.prompt_task.done():
            self.cancelled = True
            if self.routing is not None:
                self.routing.cancel()
            files = self.rt.agent.services.find(OpenFiles)
            writing = set(files.writing) if isinstance(files, ClientFiles) else set()
            if writing:  # the editor is applying an edit: let it finish (and be recorded), then stop
                self._deferred = asyncio.get_running_loop().create_task(self._interrupt_after(writing))
            else:
                self.rt.agent.interrupt()

    async def _interrupt_after(self, writing: set[asyncio.Future[Any]]) -> None:
        await asyncio.wait(writing, timeout=CLIENT_WRITE_S)
        await asyncio.sleep(0)  # the tool's own task takes the answer first
        if self.prompt_task is not None and not self.prompt_task.done():
            self.rt.agent.interrupt()

    async def close(self) -> None:
        self.cancel()
        if self.prompt_task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self.prompt_task), 10)
        await self.flush()
        self.outbox.put_nowait(None)
        if self.sender is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self.sender, 5)
        try:
            await self.rt.aclose("exit")
        except Exception:
            log.exception("session %s did not close cleanly", self.id)


class KeelAgent:
    """The ACP ``Agent``: initialize, sessions (new, load, close), prompt, cancel, modes."""

    def __init__(
        self, *, env: Mapping[str, str], home: Path, model: str | None = None, mode: str | None = None
    ) -> None:
        self.env = dict(env)
        self.home = home
        self.model = model
        self.mode = mode
        self.client: Client | None = None
        self.client_capabilities: schema.ClientCapabilities | None = None
        self.sessions: dict[str, AcpSession] = {}
        self._unannounced: dict[str, AcpSession] = {}
        self._opening = asyncio.Lock()

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: schema.ClientCapabilities | None = None,
        client_info: schema.Implementation | None = None,
        **kwargs: Any,
    ) -> schema.InitializeResponse:
        self.client_capabilities = client_capabilities
        return schema.InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=schema.AgentCapabilities(
                load_session=True,
                prompt_capabilities=schema.PromptCapabilities(image=True, audio=False, embedded_context=True),
                mcp_capabilities=schema.McpCapabilities(http=True, sse=True),
                session_capabilities=schema.SessionCapabilities(list=schema.SessionListCapabilities()),
            ),
            agent_info=schema.Implementation(name="keel", title="keel", version=__version__),
            auth_methods=[],
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> schema.AuthenticateResponse | None:
        raise invalid(
            f"keel offers no authentication method ({method_id!r}): set the provider's key in its environment"
        )

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **kwargs: Any,
    ) -> schema.NewSessionResponse:
        session = await self._open(cwd, mcp_servers, additional_directories)
        self._unannounced[session.id] = session  # its commands follow this answer (``sent``)
        return schema.NewSessionResponse(session_id=session.id, modes=session.modes())

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[McpServer] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> schema.LoadSessionResponse | None:
        from agentkeel.session.load import load_session

        session = self.sessions.get(session_id)
        fresh = session is None
        if session is None:
            session = await self._open(cwd, mcp_servers, additional_directories, resume=session_id, start=False)
        for update in up.replay(load_session(session.rt.session_path).events, session.effects, session.cwd):
            session.send(update)
        await session.flush()
        if fresh:  # started once its history is replayed: what it does next follows
            await self._start(session)
        session.send(session.commands())  # the client named the session: it can take them now
        return schema.LoadSessionResponse(modes=session.modes())

    async def _open(
        self,
        cwd: str,
        mcp_servers: list[McpServer] | None,
        additional_directories: list[str] | None,
        *,
        resume: str | None = None,
        start: bool = True,
    ) -> AcpSession:
        from agentkeel.app.runtime import KeelError, Runtime, RuntimeOptions

        if self.client is None:
            raise RequestError(-32600, "initialize first")
        path = Path(cwd)
        if not path.is_absolute() or not path.is_dir():
            raise invalid(f"cwd {cwd!r} is not an absolute path to a directory")
        add_dirs = [Path(d) for d in additional_directories or []]
        for extra in add_dirs:
            if not extra.is_absolute() or not extra.is_dir():
                raise invalid(f"additional directory {str(extra)!r} is not an absolute path to a directory")
        holder: list[AcpSession] = []
        fs = self.client_capabilities.fs if self.client_capabilities is not None else None
        files = ClientFiles(self.client, read=bool(fs and fs.read_text_file), write=bool(fs and fs.write_text_file))

        async def ask(call: ToolCall, decision: Decision) -> Answer:
            return await holder[0].ask(call, decision)

        opts = RuntimeOptions(
            cwd=path.resolve(),
            model=self.model,
            permission_mode=self.mode,  # type: ignore[arg-type]
            resume=resume,
            env=self.env,
            home=self.home,
            ask=ask,
            channel="interactive",  # a person answers the asks, in the editor
            mcp_config=mcp_config(mcp_servers),
            add_dirs=add_dirs,
            services={OpenFiles: files} if files.read or files.write else {},
        )
        async with self._opening:
            try:
                rt = Runtime.create(opts)
            except KeelError as e:
                raise invalid(str(e)) from None
            files.session_id = rt.session_id
            session = AcpSession(id=rt.session_id, rt=rt, client=self.client, cwd=path.resolve())
            holder.append(session)
            self.sessions[session.id] = session
        if start:
            await self._start(session)
        return session

    async def _start(self, session: AcpSession) -> None:
        session.rt.bus.subscribe(session.on_event)
        try:
            await session.rt.start()
        except Exception as exc:
            log.exception("session %s failed to start", session.id)
            self.sessions.pop(session.id, None)
            await session.close()
            raise RequestError(-32603, f"the session failed to start: {exc}") from None

    def sent(self, message: dict[str, Any]) -> None:
        """The transport wrote ``message``: once a new session's id has reached the client, its
        slash commands follow (an update for a session the client does not know yet is dropped)."""
        result = message.get("result")
        sid = result.get("sessionId") if isinstance(result, dict) else None
        session = self._unannounced.pop(sid, None) if isinstance(sid, str) else None
        if session is not None:
            session.send(session.commands())

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> schema.ListSessionsResponse:
        """keel's saved sessions (the session index), newest first, a page at a time (``cursor``)."""
        from agentkeel.session.index import SessionIndex
        from agentkeel.session.store import keel_home

        if cwd is not None and (not Path(cwd).is_absolute() or "\x00" in cwd):
            raise invalid(f"cwd {cwd!r} is not an absolute path")
        # a cursor is a page offset this agent gave: ASCII digits, no bigger than a page count can be
        if cursor is not None and not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 9):
            raise invalid(f"cursor {cursor[:40]!r} is not one this agent gave; list again without a cursor")
        start = int(cursor or 0)
        index = SessionIndex(keel_home(self.env))
        rows = await asyncio.to_thread(index.list, Path(cwd).resolve() if cwd else None, limit=start + LIST_PAGE + 1)
        page = rows[start : start + LIST_PAGE]
        return schema.ListSessionsResponse(
            sessions=[
                schema.SessionInfo(
                    session_id=r.session_id,
                    cwd=r.cwd,
                    title=(r.title or r.first_prompt)[:200] or None,
                    updated_at=r.last_activity or None,
                )
                for r in page
            ],
            next_cursor=str(start + LIST_PAGE) if len(rows) > start + LIST_PAGE else None,
        )

    def _session(self, session_id: str) -> AcpSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise invalid(f"no session {session_id!r} in this keel acp process: create it (session/new) or load it")
        return session

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> schema.SetSessionModeResponse:
        session = self._session(session_id)
        available = [m.id for m in session.modes().available_modes]
        if mode_id not in available:
            raise invalid(f"mode {mode_id!r} is not one of {', '.join(available)}")
        session.rt.permissions.mode = mode_id  # type: ignore[assignment]
        session.send(up.mode_update(mode_id))
        await session.flush()
        return schema.SetSessionModeResponse()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> schema.PromptResponse:
        session = self._session(session_id)
        if session.prompt_task is not None and not session.prompt_task.done():
            raise RequestError(-32600, "this session is already answering a prompt: cancel it or wait for its answer")
        session.cancelled = False
        session.prompt_task = asyncio.get_running_loop().create_task(session.run(prompt))
        try:
            stop = await session.prompt_task
        except RequestError:
            raise
        except Exception as exc:  # this session's failure: its prompt gets the error, the others go on
            log.exception("session %s: the prompt failed", session_id)
            raise RequestError(-32603, f"the prompt failed: {type(exc).__name__}: {exc}") from None
        finally:
            await session.flush()
        return schema.PromptResponse(stop_reason=stop)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()

    async def close_session(self, session_id: str, **kwargs: Any) -> schema.CloseSessionResponse | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            await session.close()
        return schema.CloseSessionResponse()

    async def close_all(self) -> None:
        for sid in list(self.sessions):
            session = self.sessions.pop(sid)
            await session.close()
