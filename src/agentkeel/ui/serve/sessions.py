"""Runtimes driven from HTTP: create/resume, send, interrupt, permission answers, close.

One server process holds every live session as an in-process :class:`~agentkeel.app.runtime.Runtime`
(the same one the CLI drives): its bus feeds the session's :class:`EventStream`, its permission
asks become ``permission_request`` frames that any client may answer. Nothing here knows HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkeel.core.events import Event, UserMessage, event_data
from agentkeel.core.types import TextBlock
from agentkeel.internal.env import KeelEnv
from agentkeel.ui.serve.stream import EventStream

if TYPE_CHECKING:
    from agentkeel.app.runtime import Runtime
    from agentkeel.core.extensions import ToolCall
    from agentkeel.policy.permissions import Answer
    from agentkeel.policy.permissions.verdicts import Decision

log = logging.getLogger("agentkeel.ui.serve")

ANSWERS = ("allow", "allow_session", "allow_project", "deny")
MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk")
BYPASS_OFF = (
    "bypassPermissions is off for web clients: the owner starts `keel serve --allow-bypass-permissions` to allow it"
)


class ServeError(Exception):
    """A request the server cannot carry out; ``status`` is the HTTP status, the message one line."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class PendingAsk:
    id: str
    tool: str
    input: dict[str, Any]
    reason: str
    suggestions: list[str]
    future: asyncio.Future[Answer]

    def public(self) -> dict[str, Any]:
        return {
            "ask_id": self.id,
            "tool": self.tool,
            "input": self.input,
            "reason": self.reason,
            "suggestions": self.suggestions,
        }


ELICIT_ACTIONS = ("accept", "decline", "cancel")


@dataclass
class PendingElicitation:
    """An MCP server's ``elicitation/create`` waiting for a client's ``{action, content}``."""

    id: str
    server: str
    request: dict[str, Any]  # message, mode, requested_schema or url (the MCP request's params)
    future: asyncio.Future[tuple[str, dict[str, Any] | None]]

    def public(self) -> dict[str, Any]:
        return {"elicitation_id": self.id, "server": self.server, **self.request}


@dataclass
class LiveSession:
    """A Runtime held open by the server, with its event stream and its open permission asks."""

    id: str
    cwd: Path
    stream: EventStream
    runtime: Runtime | None = None
    task: asyncio.Task[Any] | None = None
    asks: dict[str, PendingAsk] = field(default_factory=dict)
    elicitations: dict[str, PendingElicitation] = field(default_factory=dict)
    prompts: int = 0
    first_prompt: str = ""

    @property
    def busy(self) -> bool:
        return self.task is not None and not self.task.done()

    def summary(self) -> dict[str, Any]:
        rt = self.runtime
        return {
            "session_id": self.id,
            "cwd": str(self.cwd),
            "first_prompt": self.first_prompt,
            "live": True,
            "busy": self.busy,
            "model": rt.model.qualified if rt is not None else "",
            "mode": rt.permissions.mode if rt is not None else "",
            "clients": self.stream.clients,
            "pending_asks": [a.public() for a in self.asks.values()],
            "pending_elicitations": [e.public() for e in self.elicitations.values()],
            "last_seq": self.stream.seq,
        }

    def on_event(self, event: Event) -> None:
        """The bus subscriber: every event (persisted or live-only) becomes one frame."""
        self.stream.publish(event.type, {"event": event_data(event)})

    async def ask(self, call: ToolCall, decision: Decision) -> Answer:
        """The permission gate's host callback: publish the request, wait for any client's answer."""
        loop = asyncio.get_running_loop()
        pending = PendingAsk(
            id=uuid.uuid4().hex[:12],
            tool=call.name,
            input=dict(call.input),
            reason=decision.reason,
            suggestions=list(decision.suggestions),
            future=loop.create_future(),
        )
        self.asks[pending.id] = pending
        self.stream.publish("permission_request", pending.public())
        try:
            return await pending.future
        finally:
            self.asks.pop(pending.id, None)

    def answer(self, ask_id: str, answer: str) -> None:
        if answer not in ANSWERS:
            raise ServeError(f"answer must be one of {', '.join(ANSWERS)}, not {answer!r}")
        pending = self.asks.get(ask_id)
        if pending is None or pending.future.done():
            raise ServeError(f"no open permission request {ask_id!r} in this session (already answered?)", 409)
        pending.future.set_result(answer)  # type: ignore[arg-type]
        self.stream.publish("permission_answered", {"ask_id": ask_id, "answer": answer})

    def deny_open_asks(self) -> None:
        for pending in tuple(self.asks.values()):
            if not pending.future.done():
                pending.future.set_result("deny")
                self.stream.publish("permission_answered", {"ask_id": pending.id, "answer": "deny"})
        for elicitation in tuple(self.elicitations.values()):
            if not elicitation.future.done():
                elicitation.future.set_result(("cancel", None))
                self.stream.publish("elicitation_answered", {"elicitation_id": elicitation.id, "action": "cancel"})

    async def elicit(self, server: str, params: Any) -> Any:
        """An MCP server's elicitation (the pool's handler): an ``elicitation_request`` frame any
        client may answer (``POST .../elicitations/ID {action, content}``); an interrupt cancels it."""
        from mcp_types import ElicitResult

        loop = asyncio.get_running_loop()
        request = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        request.pop("_meta", None)
        pending = PendingElicitation(uuid.uuid4().hex[:12], server, request, loop.create_future())
        self.elicitations[pending.id] = pending
        self.stream.publish("elicitation_request", pending.public())
        try:
            action, content = await pending.future
        finally:
            self.elicitations.pop(pending.id, None)
        return ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    def answer_elicitation(self, elicitation_id: str, action: str, content: Any) -> None:
        if action not in ELICIT_ACTIONS:
            raise ServeError(f"action must be one of {', '.join(ELICIT_ACTIONS)}, not {action!r}")
        if action == "accept" and not isinstance(content, dict):
            raise ServeError('accept needs "content": an object of the requested fields')
        pending = self.elicitations.get(elicitation_id)
        if pending is None or pending.future.done():
            raise ServeError(f"no open elicitation {elicitation_id!r} in this session (already answered?)", 409)
        pending.future.set_result((action, content if action == "accept" else None))
        self.stream.publish("elicitation_answered", {"elicitation_id": elicitation_id, "action": action})


class SessionManager:
    """The live sessions of one ``keel serve`` process.

    What a client may choose is narrower than what the owner may: a model only from the catalog
    of a provider the server is configured for (never ``scripted:``, a file path or a base URL),
    and bypassPermissions only when the owner started the server with ``allow_bypass``."""

    def __init__(
        self, cwd: Path, env: Mapping[str, str] | None = None, home: Path | None = None, *, allow_bypass: bool = False
    ) -> None:
        self.cwd = cwd.resolve()
        self.allow_bypass = allow_bypass
        self.env = dict(os.environ if env is None else env)
        self.home = home or Path.home()
        self.live: dict[str, LiveSession] = {}
        self._lock = asyncio.Lock()  # creating/resuming one at a time: a session is opened once

    def keel_home(self) -> Path:
        from agentkeel.session.store import keel_home

        return keel_home(self.env)

    def project_dir(self, cwd: Path) -> Path:
        from agentkeel.session.store import project_dir

        return project_dir(self.keel_home(), cwd)

    def resolve_cwd(self, raw: object) -> Path:
        if raw in (None, ""):
            return self.cwd
        if not isinstance(raw, str):
            raise ServeError("cwd must be a string path")
        path = Path(raw).expanduser()
        if not path.is_dir():
            raise ServeError(f"cwd {raw!r} is not a directory")
        return path.resolve()

    def get(self, session_id: str) -> LiveSession:
        live = self.live.get(session_id)
        if live is None:
            raise ServeError(f"session {session_id} is not open here: resume it first (POST /api/sessions)", 404)
        return live

    async def open(
        self,
        *,
        cwd: Path,
        resume: str | None = None,
        model: str | None = None,
        mode: str | None = None,
        fork: bool = False,
    ) -> LiveSession:
        """A new session, or a saved one resumed (``resume``: an id or unique prefix)."""
        from agentkeel.app.runtime import KeelError, Runtime, RuntimeOptions
        from agentkeel.session.load import load_session

        if mode is not None:
            self.check_mode(mode)
        if model is not None:
            self.check_model(model)
        async with self._lock:
            if resume is not None and not fork:
                already = [s for s in self.live.values() if s.id == resume or s.id.startswith(resume)]
                if len(already) == 1:
                    return already[0]
            live = LiveSession(id="", cwd=cwd, stream=EventStream())
            opts = RuntimeOptions(
                cwd=cwd,
                model=model,
                permission_mode=mode,  # type: ignore[arg-type]
                resume=resume,
                fork_session=fork,
                env=self.env,
                home=self.home,
                ask=live.ask,
                channel="interactive",  # a person answers the asks, in the browser
            )
            try:
                rt = Runtime.create(opts)
            except KeelError as e:
                raise ServeError(str(e), 404 if "no session" in str(e) else 400) from None
            live.id = rt.session_id
            live.runtime = rt
            if rt.permissions.mode == "bypassPermissions" and not self.allow_bypass:  # defaultMode in settings
                rt.permissions.mode = "default"
                live.stream.publish("warning", {"message": BYPASS_OFF + ": this session asks (mode default)"})
            if rt.resumed is not None:  # a late client sees the whole conversation, then the live tail
                for event in load_session(rt.session_path).events:
                    live.on_event(event)
                    if not live.first_prompt and isinstance(event, UserMessage):
                        live.first_prompt = _text(event)
            rt.bus.subscribe(live.on_event)
            _elicit_through(rt, live)
            self.live[live.id] = live
        try:
            await rt.start()
        except Exception as exc:
            log.exception("session %s failed to start", live.id)
            await self.close(live.id)
            raise ServeError(f"the session failed to start: {exc}", 500) from None
        return live

    def send(self, session_id: str, text: str) -> LiveSession:
        live = self.get(session_id)
        if live.busy:
            raise ServeError("the session is working on a prompt: wait for its result or interrupt it", 409)
        rt = live.runtime
        assert rt is not None
        live.prompts += 1
        live.first_prompt = live.first_prompt or text[:120].replace("\n", " ")
        live.task = asyncio.create_task(self._run(live, rt, text))
        return live

    async def _run(self, live: LiveSession, rt: Runtime, text: str) -> None:
        try:
            await rt.run(text)
        except Exception as exc:  # the run's own errors are events; this is a crash of the engine
            log.exception("session %s: the run failed", live.id)
            live.stream.publish("error", {"message": f"the run failed: {exc}"})
        finally:
            live.deny_open_asks()
            live.stream.publish("idle", {"session_id": live.id})

    def interrupt(self, session_id: str) -> bool:
        live = self.get(session_id)
        if not live.busy or live.runtime is None:
            return False
        live.runtime.agent.interrupt()
        live.deny_open_asks()  # a question nobody needs answered any more
        return True

    def check_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ServeError(f"permission_mode must be one of {', '.join(MODES)}, not {mode!r}")
        if mode == "bypassPermissions" and not self.allow_bypass:
            raise ServeError(BYPASS_OFF, 403)

    def check_model(self, name: str) -> None:
        """A client names a catalog model of a configured provider, or the server's own model."""
        from agentkeel.models.catalog import untrusted_model_allowed

        if name == KeelEnv.of(self.env).model or untrusted_model_allowed(name, self.env):
            return
        raise ServeError(
            f"model {name!r} cannot be chosen from a client: name a catalog model of a provider this server "
            "is configured for (e.g. sonnet), or leave it out for the server's own",
            403,
        )

    def set_mode(self, session_id: str, mode: str) -> None:
        self.check_mode(mode)
        live = self.get(session_id)
        assert live.runtime is not None
        live.runtime.permissions.mode = mode  # type: ignore[assignment]
        live.stream.publish("mode", {"mode": mode})

    async def close(self, session_id: str) -> None:
        live = self.live.pop(session_id, None)
        if live is None:
            return
        if live.busy and live.runtime is not None:
            live.runtime.agent.interrupt()
            live.deny_open_asks()
            assert live.task is not None
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(live.task), 10)
        live.stream.publish("closed", {"session_id": session_id})
        live.stream.close()
        if live.runtime is not None:
            try:
                await live.runtime.aclose("server" if live.prompts else "exit")
            except Exception:
                log.exception("session %s did not close cleanly", session_id)

    async def close_all(self) -> None:
        for sid in list(self.live):
            await self.close(sid)


def _text(event: UserMessage) -> str:
    first = next((b for b in event.message.content if isinstance(b, TextBlock)), None)
    return first.text[:120].replace("\n", " ") if first is not None else ""


def _elicit_through(rt: Runtime, live: LiveSession) -> None:
    """The session's MCP servers elicit through the browser's clients (none: nothing to do)."""
    from agentkeel.mcp import mcp_pool

    pool = mcp_pool(rt.agent.services)
    if pool is not None:
        pool.set_elicitation(live.elicit)
