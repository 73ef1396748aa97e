"""Assembling a session: settings -> model -> provider -> tools -> permissions -> session log -> Agent.

This is the application layer the CLI and the SDK share. It depends on everything; the
core depends on none of it.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agentkeel._version import __version__
from agentkeel.core.events import EventBus, Notice, SessionEnded, SessionStarted
from agentkeel.core.extensions import Extensions
from agentkeel.core.loop import Agent, LoopConfig, RunResult
from agentkeel.core.retry import RetryPolicy
from agentkeel.core.tools import Services, ToolContext, ToolRegistry
from agentkeel.core.types import Message, TextBlock
from agentkeel.permissions import AskFn, PermissionEngine, PermissionGate, RequestHook, build_engine
from agentkeel.prompt import build_system_prompt
from agentkeel.providers.catalog import ModelConfigError, ModelInfo, resolve_model
from agentkeel.redact import redact_obj
from agentkeel.safety import AskRepeat, CircuitBreaker, LoopDetector, ResultGuard
from agentkeel.session.load import LoadReport, find_session, list_sessions, load_session
from agentkeel.session.store import SessionLock, SessionLocked, SessionWriter, keel_home, project_dir
from agentkeel.settings import LoadedSettings, PermissionMode, Settings, SettingsError, load_settings
from agentkeel.tools import builtin_tools
from agentkeel.tools.output import OutputBudget
from agentkeel.tools.shell import ShellState
from agentkeel.trust import TrustState, TrustStore, untrusted_notice

if TYPE_CHECKING:
    from agentkeel.memory.plugin import MemoryPlugin

log = logging.getLogger(__name__)


def _int_env(env: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return default


def _max_tokens(info: ModelInfo, configured: int | None, thinking: int | None) -> int:
    wanted = configured or 16384
    if thinking:
        wanted = max(wanted, thinking + 4096)  # the thinking budget must fit inside max_tokens
    return min(info.max_output, wanted)


def _memory_plugin(settings: Settings, cwd: Path, home_dir: Path, session_id: str, window: int) -> MemoryPlugin | None:
    """Memory for this session, or None when disabled or broken (memory fails open)."""
    from agentkeel.memory.plugin import MemoryPlugin
    from agentkeel.settings import MemorySettings

    config = settings.memory or MemorySettings()
    if not config.enabled:
        return None
    try:
        plugin = MemoryPlugin(config, cwd=cwd, keel_home=home_dir, session_id=session_id, window_tokens=window)
        plugin.outbox.resume()
        return plugin
    except Exception as exc:
        log.warning("memory disabled for this session: %s", exc)
        return None


class KeelError(Exception):
    """A problem the user can fix; the message is one line that says how."""


def _retrust(store: TrustStore, cwd: Path) -> None:
    store.trust(cwd)  # keel itself changed .keel/settings.local.json; that is no reason to ask again


def project_trust(cwd: Path, home_dir: Path, override: bool | None = None) -> TrustState:
    state = TrustStore(home_dir).state(cwd)
    if override is True and not state.trusted:
        return TrustState(state.folder, "trusted", state.files)
    if override is False and state.status != "nothing-to-trust":
        return TrustState(state.folder, "untrusted", state.files)
    return state


def read_settings(
    cwd: Path, home: Path, home_dir: Path, extra: list[Path], env: Mapping[str, str], *, trusted: bool
) -> LoadedSettings:
    managed = Path(env.get("KEEL_MANAGED_SETTINGS", "/etc/keel/managed-settings.json"))
    try:
        return load_settings(
            cwd,
            home=home,
            keel_home=home_dir,
            extra_files=extra,
            managed=managed if managed.is_file() else None,
            trusted_project=trusted,
        )
    except SettingsError as e:
        raise KeelError(f"invalid settings: {e}") from None


@dataclass
class RuntimeOptions:
    cwd: Path
    model: str | None = None
    permission_mode: PermissionMode | None = None
    allowed_tools: list[str] = field(default_factory=list)
    disallowed_tools: list[str] = field(default_factory=list)
    max_turns: int | None = None
    max_budget_usd: float | None = None
    append_system_prompt: str | None = None
    add_dirs: list[Path] = field(default_factory=list)
    continue_session: bool = False
    resume: str | None = None
    settings_files: list[Path] = field(default_factory=list)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    home: Path = field(default_factory=Path.home)
    ask: AskFn | None = None  # the host callback (the SDK's can_use_tool, or the TTY prompt)
    ask_repeat: AskRepeat | None = None  # "the same call again: go on?"
    permission_hooks: list[RequestHook] = field(default_factory=list)  # the PermissionRequest extension point
    channel: str = "headless"  # interactive | headless | sdk | subagent: selects permissions.channels rules
    trust_project: bool | None = None  # None: as recorded by `keel trust`


class Runtime:
    def __init__(
        self,
        agent: Agent,
        *,
        session_id: str,
        session_path: Path,
        writer: SessionWriter,
        lock: SessionLock,
        settings: LoadedSettings,
        model: ModelInfo,
        resumed: LoadReport | None,
        permissions: PermissionEngine,
        trust: TrustState,
    ) -> None:
        self.agent = agent
        self.bus = agent.bus
        self.session_id = session_id
        self.session_path = session_path
        self.writer = writer
        self.lock = lock
        self.settings = settings
        self.model = model
        self.resumed = resumed
        self.permissions = permissions
        self.trust = trust
        self.memory: MemoryPlugin | None = None
        self._started = False

    @classmethod
    def create(cls, opts: RuntimeOptions) -> Runtime:
        cwd = opts.cwd.resolve()
        env = dict(opts.env)
        home_dir = keel_home(env)
        trust = project_trust(cwd, home_dir, opts.trust_project)
        loaded = read_settings(cwd, opts.home, home_dir, opts.settings_files, env, trusted=trust.trusted)
        settings = loaded.settings
        env = {**settings.env, **env} if settings.env else env
        try:
            info = resolve_model(opts.model or env.get("KEEL_MODEL") or settings.model, env)
            from agentkeel.providers.factory import make_provider

            provider = make_provider(info, env)
        except ModelConfigError as e:
            raise KeelError(str(e)) from None

        sessions = project_dir(home_dir, cwd)
        session_path, prior = cls._pick_session(sessions, opts)
        session_id = session_path.stem
        lock = SessionLock(session_path)
        try:
            lock.acquire()
        except SessionLocked as e:
            raise KeelError(str(e)) from None
        try:
            loaded_session = load_session(session_path) if prior else None
        except OSError as e:
            lock.release()
            raise KeelError(f"cannot read session {session_path}: {e.strerror}") from None
        writer = SessionWriter(  # redact_obj: no secret reaches a transcript
            session_path,
            session_id,
            transform=redact_obj,
            parent_uuid=loaded_session.last_uuid if loaded_session else None,
        )

        engine = build_engine(
            loaded,
            cwd=cwd,
            mode=opts.permission_mode,
            allowed_tools=opts.allowed_tools,
            disallowed_tools=opts.disallowed_tools,
            add_dirs=opts.add_dirs,
            home=opts.home,
            keel_home=home_dir,
            channel=opts.channel,
        )
        loaded.warnings.extend(engine.warnings)
        add_dirs = tuple(Path(d) for d in engine.additional_dirs)
        bus = EventBus()
        bus.subscribe(writer)
        ext = Extensions()
        store = TrustStore(home_dir)
        gate = PermissionGate(
            engine,
            bus.emit,
            ask=opts.ask,
            request_hooks=opts.permission_hooks,
            project_settings=cwd / ".keel" / "settings.local.json",
            on_project_rule=(lambda: _retrust(store, cwd)) if trust.status == "trusted" else None,
        )
        breaker = CircuitBreaker(bus.emit)
        ext.before_tool += [LoopDetector(opts.ask_repeat), breaker.before, gate]
        ext.after_tool += [breaker.after, ResultGuard(), OutputBudget(sessions / session_id / "tool-results")]
        ext.hide_tool.append(engine.hidden)
        memory = _memory_plugin(settings, cwd, home_dir, session_id, info.context_window)
        if memory is not None:
            memory.attach(bus)
        thinking = _int_env(env, "MAX_THINKING_TOKENS", 0) or None  # Claude Code's variable
        config = LoopConfig(
            model=info.model,
            system=build_system_prompt(
                cwd,
                home=opts.home,
                keel_home=home_dir,
                model=info.qualified,
                additional_dirs=add_dirs,
                append=opts.append_system_prompt,
            ),
            max_tokens=_max_tokens(info, settings.maxTokens, thinking),
            thinking_budget=thinking,
            max_turns=opts.max_turns,
            max_budget_usd=opts.max_budget_usd,
            cost=info.prices.cost,
            retry=RetryPolicy(max_retries=_int_env(env, "KEEL_MAX_RETRIES", 4)),
        )
        context = ToolContext(
            cwd=cwd,
            session_id=session_id,
            services=Services(),
            emit=bus.emit,
            additional_dirs=add_dirs,
            env=dict(settings.env),
            scratch_dir=sessions / session_id / "tool-results",
            hidden_path=engine.read_denied if engine.has_read_denials() else None,
        )
        agent = Agent(
            provider,
            ToolRegistry(builtin_tools() + (memory.tools() if memory is not None else [])),
            config,
            bus=bus,
            extensions=ext,
            context=context,
            messages=loaded_session.messages if loaded_session else None,
        )
        rt = cls(
            agent,
            session_id=session_id,
            session_path=session_path,
            writer=writer,
            lock=lock,
            settings=loaded,
            model=info,
            resumed=loaded_session.report if loaded_session else None,
            permissions=engine,
            trust=trust,
        )
        rt.memory = memory
        return rt

    @staticmethod
    def _pick_session(sessions: Path, opts: RuntimeOptions) -> tuple[Path, bool]:
        if opts.resume:
            found = find_session(sessions, opts.resume)
            if found is None:
                raise KeelError(f"no session '{opts.resume}' for this project: see `keel sessions list`")
            return found, True
        if opts.continue_session:
            existing = list_sessions(sessions)
            if existing:
                return existing[0].path, True
        return sessions / f"{uuid.uuid4()}.jsonl", False

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        source: Literal["startup", "resume"] = "resume" if self.resumed is not None else "startup"
        self.bus.emit(
            SessionStarted(
                session_id=self.session_id,
                cwd=str(self.agent.context.cwd),
                model=self.model.qualified,
                source=source,
                version=__version__,
            )
        )
        if self.resumed is not None and not self.resumed.clean:
            self.bus.emit(Notice(level="warning", message=self.resumed.summary()))
        if not self.trust.trusted:
            self.bus.emit(Notice(level="warning", message=untrusted_notice(self.trust)))
        for warning in self.settings.warnings:
            self.bus.emit(Notice(level="warning", message=warning))

    async def run(self, prompt: str) -> RunResult:
        self._start()
        context = self.memory.prompt_context(prompt) if self.memory is not None else None
        if context:
            return await self.agent.run(Message(role="user", content=[TextBlock(text=prompt), TextBlock(text=context)]))
        return await self.agent.run(prompt)

    async def aclose(self, reason: str = "exit") -> None:
        try:
            if self._started:
                self.bus.emit(SessionEnded(reason=reason))
            await self.agent.services.get(ShellState).aclose()
            if self.memory is not None and self._started:
                await self.memory.summarise_with_model(self.agent.provider, self.agent.config.model)
            await self.agent.provider.aclose()
        finally:
            if self.memory is not None:
                self.memory.close()
            self.writer.close()
            self.lock.release()
