"""Firing an event: pick the matching handlers, run them concurrently, interpret each answer.

One :class:`HookDispatcher` per session. ``fire`` never raises for a handler's failure: each
failure is one line to the user (a ``Notice``) and a ``HookRan`` event in the session log;
whether the failure blocks anything is the caller's decision (a ``failClosed`` PreToolUse
handler denies). Identical handlers run once per firing, ``once`` handlers once per session,
``async`` handlers in the background (their failures are still reported).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from agentkeel.core.events import Event, Notice
from agentkeel.core.events import HookRan as HookRan  # declared with every persisted type
from agentkeel.core.extensions import ToolCall
from agentkeel.core.provider import Provider
from agentkeel.hooks.config import HookConfig, HookSpec
from agentkeel.hooks.matchers import condition_holds, matches
from agentkeel.hooks.output import Combined, Outcome, interpret
from agentkeel.hooks.runners import Raw, Spawned, payload_bytes, run_command, run_http, run_python
from agentkeel.hooks.watch import Watcher
from agentkeel.internal.env import KeelEnv
from agentkeel.protocol.hook_events import SPECS
from agentkeel.protocol.hook_events import spec as event_spec

if TYPE_CHECKING:
    from agentkeel.hooks.agent import AgentSession

log = logging.getLogger(__name__)


class ChildAgent(msgspec.Struct, frozen=True):
    """The child agent whose tool call is being hooked (set by SubagentStart in its context)."""

    agent_id: str
    agent_type: str
    transcript: str


CHILD: contextvars.ContextVar[ChildAgent | None] = contextvars.ContextVar("keel_hook_child", default=None)


CONTEXT_CAP = 10_000  # characters of a hook's context that reach the model inline (Claude Code's figure)
CONTEXT_PREVIEW = 2_000


class HookContext(msgspec.Struct):
    """What the dispatcher needs from the session."""

    session_id: str
    transcript_path: Path
    project_dir: Path
    emit: Callable[[Event], None]
    mode: Callable[[], str] = lambda: "default"
    env: Mapping[str, str] = msgspec.field(default_factory=lambda: dict(os.environ))
    env_file: Path | None = None
    provider: Provider | None = None
    model: str = ""
    home: str = msgspec.field(default_factory=lambda: str(Path.home()))
    spawned: Spawned | None = None  # command hooks' process groups die with keel (the session watchdog)
    agent_session: AgentSession | None = None  # an agent handler's bus and built-ins (the composition root's)


class HookDispatcher:
    def __init__(self, config: HookConfig, ctx: HookContext) -> None:
        self.config = config
        self.ctx = ctx
        self.cwd = ctx.project_dir  # the live cwd, kept current from CwdChanged
        self.prompt_id = ""
        self._ran_once: set[tuple[object, ...]] = set()
        self._background: set[asyncio.Future[Any]] = set()
        self._noticing = False  # a notice of ours must not fire Notification hooks about itself
        self.effort = KeelEnv.of(ctx.env).effort
        self.watcher = Watcher()  # watchPaths hooks returned: FileChanged
        self.rewake: list[str] = []  # asyncRewake handlers' blocks, waiting for the model
        self.late_context: list[str] = []  # async-protocol handlers' context, for the next result or prompt
        self._rewaking: set[asyncio.Future[Any]] = set()
        self._spills = 0

    # --- selection ----------------------------------------------------------------------------

    def has(self, event: str) -> bool:
        return any(h.event == event for h in self.config.hooks)

    def select(self, event: str, match: str | None, call: ToolCall | None = None) -> list[HookSpec]:
        chosen: list[HookSpec] = []
        seen: set[tuple[object, ...]] = set()
        for spec in self.config.hooks:
            if spec.event != event or not matches(spec.matcher, match):
                continue
            key = spec.handler.key
            if key in seen or (spec.handler.once and key in self._ran_once):
                continue
            condition = spec.handler.condition
            if condition and call is not None:
                cwd = call.cwd or self.cwd
                if not condition_holds(condition, call.name, call.input, call.tool, cwd, self.ctx.home):
                    continue
            seen.add(key)
            chosen.append(spec)
        return chosen

    # --- payload ------------------------------------------------------------------------------

    def payload(self, event: str, fields: Mapping[str, Any], cwd: Path | None = None) -> dict[str, Any]:
        """The JSON a handler gets, in Claude Code's order: the common fields, those the event's
        spec asks for (prompt_id, permission_mode, effort), the event's name, then its fields."""
        spec = event_spec(event)
        out: dict[str, Any] = {
            "session_id": self.ctx.session_id,
            "transcript_path": str(self.ctx.transcript_path),
            "cwd": str(cwd or self.cwd),
        }
        if self.prompt_id and spec.prompt_id:
            out["prompt_id"] = self.prompt_id
        if spec.mode:
            out["permission_mode"] = self.ctx.mode() or "default"
        child = CHILD.get()
        if child is not None:  # a child agent's event: Claude Code keeps the session's ids, adds the agent's
            out["agent_id"] = child.agent_id
            out["agent_type"] = child.agent_type
            out["agent_transcript_path"] = child.transcript  # keel's addition: the child's own transcript
        if spec.effort:
            # Claude Code sends its reasoning effort; keel has no effort setting, so it reports Claude
            # Code's default level (``KEEL_EFFORT`` overrides it)
            out["effort"] = {"level": self.effort}
        out["hook_event_name"] = event
        out.update(fields)
        return out

    def env(self, event: str) -> dict[str, str]:
        spec = event_spec(event)
        env = dict(self.ctx.env)
        project = str(self.ctx.project_dir)
        env.update(
            CLAUDE_PROJECT_DIR=project,
            KEEL_PROJECT_DIR=project,
            CLAUDE_CODE_SESSION_ID=self.ctx.session_id,
            KEEL_SESSION_ID=self.ctx.session_id,
            CLAUDE_PID=str(os.getpid()),
            KEEL_PID=str(os.getpid()),
            KEEL_HOOK_EVENT=event,
        )
        if spec.effort:
            env["CLAUDE_EFFORT"] = self.effort
        if spec.env_file and self.ctx.env_file is not None:
            env["CLAUDE_ENV_FILE"] = env["KEEL_ENV_FILE"] = str(self.ctx.env_file)
        return env

    # --- running ------------------------------------------------------------------------------

    async def fire(
        self,
        event: str,
        fields: Mapping[str, Any],
        *,
        match: str | None = None,
        call: ToolCall | None = None,
        cwd: Path | None = None,
    ) -> Combined:
        """Run ``event``'s handlers on a payload with ``fields``. What a group's matcher is matched
        against comes from the event's spec (``match`` is for an event the table does not name)."""
        if event in SPECS:
            match = SPECS[event].match_value(fields)
        specs = self.select(event, match, call)
        if not specs:
            return Combined([])
        payload = self.payload(event, fields, cwd)
        waited: list[HookSpec] = []
        for spec in specs:
            if spec.handler.once:
                self._ran_once.add(spec.handler.key)
            if spec.handler.run_async:
                task = asyncio.ensure_future(self._run_logged(event, spec, payload))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
                if spec.handler.rewake:
                    self._rewaking.add(task)
                    task.add_done_callback(self._rewaking.discard)
            else:
                waited.append(spec)
        if len(waited) == 1:
            outcomes = [await self._run(event, waited[0], payload)]
        else:
            outcomes = list(await asyncio.gather(*(self._run(event, spec, payload) for spec in waited)))
        if outcomes:
            self._log(event, outcomes)
            self._watch(outcomes, payload)
        return Combined(outcomes)

    def _watch(self, outcomes: list[Outcome], payload: dict[str, Any]) -> None:
        base = Path(str(payload.get("cwd") or self.cwd))
        for o in outcomes:
            self.watcher.add((base / p).resolve() for p in o.watch_paths)

    async def _run_logged(self, event: str, spec: HookSpec, payload: dict[str, Any]) -> None:
        outcome = await self._run(event, spec, payload)
        self._log(event, [outcome])
        if spec.handler.rewake and outcome.blocked:
            self.rewake.append(f"An asynchronous {event} hook reported: {outcome.reason or 'blocked'}")

    async def wait_rewake(self) -> None:
        """Let asyncRewake handlers still running finish (each under its own timeout)."""
        if self._rewaking:
            await asyncio.wait(set(self._rewaking))

    async def _run(self, event: str, spec: HookSpec, payload: dict[str, Any]) -> Outcome:
        handler = spec.handler
        if handler.status_message:
            self.notice(handler.status_message, "info")
        started = time.monotonic()
        try:
            raw = await self._raw(event, spec, payload)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug of ours, not the handler's: still one line, never a wedge
            log.exception("hook %s failed", handler.label)
            raw = Raw(None, error=f"could not run: {type(e).__name__}: {e}")
        if raw.detached is not None:  # Claude Code's async line: the rest is answered later
            self._later(event, spec, raw.detached, started)
        duration = int((time.monotonic() - started) * 1000)
        outcome = interpret(event, spec, raw, duration)
        if any(len(c) > CONTEXT_CAP for c in outcome.context):
            outcome.context = [self._spilled(event, spec, c) for c in outcome.context]
        if len(outcome.reason) > CONTEXT_CAP:  # a block's reason reaches the model too (a Stop hook's, a denial's)
            outcome.reason = self._spilled(event, spec, outcome.reason)
        if outcome.error:
            self.notice(outcome.error)
        if outcome.system_message:
            self.notice(outcome.system_message)
        return outcome

    def _later(self, event: str, spec: HookSpec, detached: asyncio.Future[Raw], started: float) -> None:
        """A handler that went async: its answer is read when it ends; what it says for the model
        goes with the next prompt, its messages and failures to the user, as its own log entry."""

        async def finish() -> None:
            try:
                raw = await detached
            except asyncio.CancelledError:
                detached.cancel()
                raise
            except Exception as e:
                raw = Raw(None, error=f"could not run: {type(e).__name__}: {e}")
            outcome = interpret(event, spec, raw, int((time.monotonic() - started) * 1000))
            if outcome.error:
                self.notice(outcome.error)
            if outcome.system_message:
                self.notice(outcome.system_message)
            self.late_context += [
                f"{event} hook additional context: {c if len(c) <= CONTEXT_CAP else self._spilled(event, spec, c)}"
                for c in outcome.context
            ]
            self._log(event, [outcome])

        task = asyncio.ensure_future(finish())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _raw(self, event: str, spec: HookSpec, payload: dict[str, Any]) -> Raw:
        handler = spec.handler
        timeout = handler.timeout
        if handler.type == "command":
            cwd = str(payload.get("cwd") or self.cwd)
            if not Path(cwd).is_dir():
                cwd = str(self.ctx.project_dir)
            env = self.env(event)
            if handler.plugin_root:
                env["CLAUDE_PLUGIN_ROOT"] = env["KEEL_PLUGIN_ROOT"] = handler.plugin_root
            return await run_command(
                handler, payload_bytes(payload), cwd=cwd, env=env, timeout=timeout, spawned=self.ctx.spawned
            )
        try:
            async with asyncio.timeout(timeout):  # no extra task per handler (wait_for makes one)
                if handler.type == "http":
                    return await run_http(handler, payload_bytes(payload), env=self.env(event), timeout=timeout)
                if handler.type == "prompt":
                    if self.ctx.provider is None:
                        return Raw(None, error="has no model to ask in this session")
                    from agentkeel.hooks.prompt import run_prompt  # prompt hooks only

                    return await run_prompt(handler, payload, self.ctx.provider, self.ctx.model)
                if handler.type == "agent":
                    if self.ctx.provider is None:
                        return Raw(None, error="has no model to ask in this session")
                    from agentkeel.hooks.agent import run_agent

                    return await run_agent(
                        handler,
                        payload,
                        self.ctx.provider,
                        self.ctx.model,
                        self.ctx.project_dir,
                        self.ctx.session_id,
                        self.ctx.agent_session,
                    )
                return await run_python(handler, payload)
        except TimeoutError:
            return Raw(None, error=f"timed out after {timeout:g}s")

    def _spilled(self, event: str, spec: HookSpec, text: str) -> str:
        """Context over :data:`CONTEXT_CAP` characters reaches the model as a preview and the path of
        a file holding all of it (as Claude Code does past 10,000), never as a megabyte of prompt."""
        if len(text) <= CONTEXT_CAP:
            return text
        folder = self.ctx.transcript_path.with_suffix("") / "hook-output"
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)  # private, as the transcript it belongs to
            while True:  # a new file: a resumed session never overwrites one its conversation names
                self._spills += 1
                path = folder / f"{event}-{self._spills}.txt"
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
                except FileExistsError:
                    continue
                with open(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                break
            where = f"The whole output is in {path} (Read it if you need more)."
        except OSError as e:
            where = f"The rest was not kept ({e.strerror or e})."
        return (
            f"{text[:CONTEXT_PREVIEW]}\n[... hook {spec.handler.label} printed {len(text):,} characters; "
            f"this is the first {CONTEXT_PREVIEW:,}. {where}]"
        )

    def _log(self, event: str, outcomes: list[Outcome]) -> None:
        runs = [
            {
                "handler": o.spec.handler.label,
                "source": o.spec.source,
                "exit_code": o.raw.exit_code,
                "duration_ms": o.duration_ms,
                "outcome": o.summary,
                **({"error": o.error} if o.error else {}),
                # the handler's plain output, unless it asked for it to stay out of the transcript
                **({"output": o.raw.stdout[:500]} if o.raw.stdout.strip() and not o.suppress else {}),
            }
            for o in outcomes
        ]
        with contextlib.suppress(Exception):  # the log's own failure is the writer's to report
            self.ctx.emit(HookRan(event=event, runs=runs))

    def notice(self, message: str, level: Literal["info", "warning", "error"] = "warning") -> None:
        self._noticing = True
        try:
            self.ctx.emit(Notice(level=level, message=message))
        except Exception:
            log.warning("%s", message)
        finally:
            self._noticing = False

    @property
    def noticing(self) -> bool:
        return self._noticing

    def spawn(self, coro: Any) -> None:
        """Run a firing in the background (from a bus subscriber, which cannot await)."""
        try:
            task = asyncio.get_running_loop().create_task(coro)
        except RuntimeError:
            coro.close()
            return
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait for background handlers (at session end); each has its own timeout too."""
        if self._background:
            await asyncio.wait(set(self._background), timeout=timeout)
