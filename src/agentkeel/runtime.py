"""Assembling a session: settings -> model -> provider -> tools -> permissions -> session log -> Agent.

This is the application layer the CLI and the SDK share. It depends on everything; the
core depends on none of it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from agentkeel import _childwatch, _lazy
from agentkeel._version import __version__
from agentkeel.assembly import KeelError as KeelError  # re-exported: callers import it from here
from agentkeel.assembly import fallback_model_id, forked, model_name, sandbox_for, writable
from agentkeel.context.instructions import ImportPolicy
from agentkeel.context.manager import ContextManager
from agentkeel.core.events import EventBus, Notice, SessionEnded, SessionStarted, SinkFailed
from agentkeel.core.extensions import Extension, Extensions
from agentkeel.core.loop import Agent, LoopConfig, RunResult
from agentkeel.core.retry import RetryPolicy
from agentkeel.core.tools import Services, ToolContext, ToolRegistry
from agentkeel.extensions.builtins import REQUEST_VALIDATORS, SessionParts, default_extensions
from agentkeel.extensions.hooks.config import plugin_roots
from agentkeel.extensions.redaction import redact_event
from agentkeel.mcpclient import McpSetup, mcp_extension
from agentkeel.permissions import AskFn, PermissionEngine, PermissionGate, RequestHook, build_engine
from agentkeel.providers.catalog import ModelConfigError, ModelInfo, resolve_model
from agentkeel.safety import AskRepeat
from agentkeel.session.checkpoints import CheckpointRecorder
from agentkeel.session.openrewinds import listed as open_rewinds
from agentkeel.session.store import SessionLock, SessionLocked, SessionWriter, keel_home, project_dir
from agentkeel.settings import LoadedSettings, PermissionMode, Settings, SettingsError, load_settings
from agentkeel.tools import builtin_tools
from agentkeel.trust import TrustState, TrustStore, untrusted_notice

if TYPE_CHECKING:
    from agentkeel.memory.plugin import MemoryPlugin
    from agentkeel.session.load import LoadReport  # session.load: only to resume (-r, -c)

log = logging.getLogger(__name__)

# What the first tool call needs and the first request does not: imported on a thread while the
# first request waits for the model (agentkeel._lazy), so a real model's answer time hides it.
FIRST_CALL_MODULES = (
    "agentkeel.permissions.shellpolicy",  # the permission engine's shell analysis
    "agentkeel.permissions.targets",
    "agentkeel.permissions.trees",
    "tree_sitter",
    "tree_sitter_bash",
    "agentkeel.core.inputs",  # keel's tool inputs
    "agentkeel.tools.shell",  # Bash
    "concurrent.futures.thread",  # asyncio.to_thread's pool (the first checkpoint's git calls)
)


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


def _memory_plugin(
    settings: Settings, cwd: Path, home_dir: Path, session_id: str, window: int, warnings: list[str]
) -> MemoryPlugin | None:
    """Memory for this session, or None when disabled or broken: memory fails open, and says so."""
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
        log.warning("memory disabled for this session: %s", exc, exc_info=True)
        warnings.append(f"memory is off for this session: {exc} (see `keel mem check`)")
        return None


def _retrust(store: TrustStore, cwd: Path) -> None:
    store.trust(cwd)  # keel itself changed .keel/settings.local.json; that is no reason to ask again


def _import_refusal(engine: PermissionEngine) -> Callable[[Path], str | None]:
    """Why an instruction file's ``@import`` may not be read into the prompt: the Read deny rules,
    and the credential stores (the one list the sandbox hides and the engine asks about)."""
    from agentkeel.permissions.paths import credential_store

    def refuse(path: Path) -> str | None:
        if engine.read_denied(path):
            return "a Read deny rule covers it"
        store = credential_store(str(path), engine.home, engine.keel_home)
        return f"{store} is a credential store" if store else None

    return refuse


def project_trust(cwd: Path, home_dir: Path, override: bool | None = None) -> TrustState:
    state = TrustStore(home_dir).state(cwd)
    if override is True and not state.trusted:
        return TrustState(state.folder, "trusted", state.files)
    if override is False and state.status != "nothing-to-trust":
        return TrustState(state.folder, "untrusted", state.files)
    return state


SOURCES = frozenset({"user", "project", "local"})  # the settings files --setting-sources chooses from


def read_settings(
    cwd: Path,
    home: Path,
    home_dir: Path,
    extra: list[Path],
    env: Mapping[str, str],
    *,
    trusted: bool,
    sources: frozenset[str] | None = None,
) -> LoadedSettings:
    """``sources``: which settings files to read (``--setting-sources``); --settings files and
    managed settings are always read."""
    include: frozenset[Any] = frozenset({"cli", "managed", *(sources if sources is not None else SOURCES)})
    managed = Path(env.get("KEEL_MANAGED_SETTINGS", "/etc/keel/managed-settings.json"))
    try:
        return load_settings(
            cwd,
            home=home,
            keel_home=home_dir,
            extra_files=extra,
            managed=managed if managed.is_file() else None,
            include=include,
            trusted_project=trusted,
        )
    except SettingsError as e:
        raise KeelError(f"invalid settings: {e}") from None


class RuntimeOptions(msgspec.Struct):
    cwd: Path
    model: str | None = None
    permission_mode: PermissionMode | None = None
    allowed_tools: list[str] = msgspec.field(default_factory=list)
    disallowed_tools: list[str] = msgspec.field(default_factory=list)
    max_turns: int | None = None
    max_budget_usd: float | None = None
    append_system_prompt: str | None = None
    add_dirs: list[Path] = msgspec.field(default_factory=list)
    continue_session: bool = False
    resume: str | None = None
    settings_files: list[Path] = msgspec.field(default_factory=list)
    env: Mapping[str, str] = msgspec.field(default_factory=lambda: dict(os.environ))
    home: Path = msgspec.field(default_factory=Path.home)
    ask: AskFn | None = None  # the host callback (the SDK's can_use_tool, or the TTY prompt)
    ask_repeat: AskRepeat | None = None  # "the same call again: go on?"
    permission_hooks: list[RequestHook] = msgspec.field(default_factory=list)  # the PermissionRequest extension point
    channel: str = "headless"  # interactive | headless | sdk | subagent: selects permissions.channels rules
    trust_project: bool | None = None  # None: as recorded by `keel trust`
    # added after the built-ins (before the request validators, which check what every transform made)
    extensions: list[Extension] = msgspec.field(default_factory=list)
    services: dict[type[Any], Any] = msgspec.field(default_factory=dict)  # provided per-session services (Services.put)
    start_timeout_s: float = 30.0  # each extension's start() (MCP connects, SessionStart work)
    # Claude Code-shaped hooks ({"PreToolUse": [{"matcher": "Bash", "hooks": [...]}]}) added to the
    # settings' hooks; a python handler may hold a callable: {"type": "python", "callable": fn}
    hooks: dict[str, Any] = msgspec.field(default_factory=dict)
    fallback_model: str | None = None  # the model-fallback built-in's model (else settings.fallbackModel)
    system_prompt: str | None = None  # replaces keel's system prompt (--system-prompt); append still applies
    session_id: str | None = None  # the new session's id (--session-id); default a fresh uuid4
    plugin_dirs: tuple[Path, ...] = ()  # --plugin-dir: hooks/hooks.json, commands, agents, skills (this session)
    mcp_config: list[str] = msgspec.field(
        default_factory=list
    )  # --mcp-config values (a file or JSON), SDK servers removed
    strict_mcp_config: bool = False  # --strict-mcp-config: only the servers of mcp_config
    skip_project_mcp: bool = False  # start no server of .mcp.json (its approvals could not be saved)
    fork_session: bool = False  # with resume/continue: go on in a copy under a new id (--fork-session)
    # subagent types given in code, as the Agent SDK's ``agents``: {"name": {"description", "prompt", "tools", "model"}}
    agents: dict[str, Any] = msgspec.field(default_factory=dict)
    setting_sources: frozenset[str] | None = None  # --setting-sources: user/project/local (None: all three)
    skills: list[str] | None = None  # the Agent SDK's skill allowlist: only these skills are offered (None: all)


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
        start_timeout_s: float = 30.0,
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
        self.start_timeout_s = start_timeout_s
        self._started = False
        self._closed = False

    @classmethod
    def create(cls, opts: RuntimeOptions) -> Runtime:
        cwd = opts.cwd.resolve()
        env = dict(opts.env)
        home_dir = keel_home(env)
        sessions = project_dir(home_dir, cwd)
        writable(home_dir, sessions)
        trust = project_trust(cwd, home_dir, opts.trust_project)
        loaded = read_settings(
            cwd, opts.home, home_dir, opts.settings_files, env, trusted=trust.trusted, sources=opts.setting_sources
        )
        settings = loaded.settings
        env = {**settings.env, **env} if settings.env else env
        try:
            info = resolve_model(model_name(opts.model, loaded, env, trust), env)
            from agentkeel.providers.factory import make_provider

            provider = make_provider(info, env, transport=settings.provider.transport if settings.provider else None)
        except ModelConfigError as e:
            raise KeelError(str(e)) from None

        session_path, prior = cls._pick_session(sessions, opts)
        session_id = session_path.stem
        lock = SessionLock(session_path)
        try:
            lock.acquire()
        except SessionLocked as e:
            raise KeelError(str(e)) from None
        except OSError as e:
            raise KeelError(f"cannot lock session {session_path}: {e.strerror or e}") from None
        try:
            loaded_session = None
            if prior:  # session.load: only to resume (-r, -c)
                from agentkeel.session.load import load_session

                loaded_session = load_session(session_path)
            writer = SessionWriter(
                session_path, session_id, parent_uuid=loaded_session.last_uuid if loaded_session else None
            )
        except OSError as e:
            lock.release()
            raise KeelError(f"cannot use session file {session_path}: {e.strerror or e}") from None

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
        _lazy.warm_later(*FIRST_CALL_MODULES)
        add_dirs = tuple(Path(d) for d in engine.additional_dirs)
        try:
            sandbox = sandbox_for(settings, cwd, opts.home, home_dir, add_dirs, engine, loaded.warnings)
        except KeelError:
            lock.release()
            raise
        bus = EventBus()
        bus.transforms.append(redact_event)  # one redaction policy, before every reader
        bus.subscribe(writer, critical=True)  # a transcript that cannot be written stops the run
        store = TrustStore(home_dir)
        gate = PermissionGate(
            engine,
            bus.emit,
            ask=opts.ask,
            request_hooks=list(opts.permission_hooks),  # the hooks built-in appends; never to the caller's list
            project_settings=cwd / ".keel" / "settings.local.json",
            # keel wrote that file itself: it must not cost the user their trust
            on_project_rule=(lambda: _retrust(store, cwd)) if trust.trusted else None,
        )
        memory = _memory_plugin(settings, cwd, home_dir, session_id, info.context_window, loaded.warnings)
        tool_env = dict(settings.env)  # Bash's extra environment; SessionStart hooks may add to it
        services = Services()
        for kind, item in opts.services.items():
            services.put(kind, item)
        services.put(PermissionGate, gate)  # /sandbox on asks about new hosts through it too
        # what slash commands and front ends know of the session besides its Agent (core.handle)
        services.put(PermissionEngine, engine)
        services.put(LoadedSettings, loaded)
        services.put(ModelInfo, info)
        services.put(TrustState, trust)
        if sandbox is not None:
            services.put(type(sandbox), sandbox)
            sandbox.asker = gate  # a new host a sandboxed command reaches is asked about through the gate
        parts = SessionParts(
            bus=bus,
            engine=engine,
            gate=gate,
            spill_dir=sessions / session_id / "tool-results",
            provider=provider,
            model=info.model,
            ask_repeat=opts.ask_repeat,
            memory=memory,
            layers=loaded.layers,
            sdk_hooks=opts.hooks,
            session_id=session_id,
            transcript_path=session_path,
            cwd=cwd,
            env=env,
            tool_env=tool_env,
            services=services,
            home=opts.home,
            source="resume" if prior else "startup",
            plugin_dirs=tuple(opts.plugin_dirs),
            trusted=trust.trusted,
            reliability=settings.reliability,
            context_window=info.context_window,
            fallback_model=fallback_model_id(opts.fallback_model or settings.fallbackModel, info, env, loaded.warnings),
        )
        builtins, warnings = default_extensions(parts, settings.disabled_hooks)
        loaded.warnings.extend(warnings + parts.notices)
        thinking = _int_env(env, "MAX_THINKING_TOKENS", 0) or None  # Claude Code's variable
        max_tokens = _max_tokens(info, settings.maxTokens, thinking)
        context_mgr = ContextManager.create(
            provider=provider,
            model=info.model,
            qualified_model=info.qualified,
            context_window=info.context_window,
            max_tokens=max_tokens,
            settings=settings.context,
            output_style=settings.outputStyle,
            cwd=cwd,
            home=opts.home,
            keel_home=home_dir,
            env=env,
            services=services,
            additional_dirs=add_dirs,
            append=opts.append_system_prompt,
            imports=ImportPolicy(trusted=trust.status == "trusted", refuse=_import_refusal(engine)),
        )
        context_mgr.emit = bus.emit
        context_mgr.memory_context = memory.prompt_context if memory is not None else None
        if loaded_session:
            context_mgr.replay(loaded_session.events)
        loaded.warnings.extend(context_mgr.warnings())
        mcp = mcp_extension(
            McpSetup(
                cwd=cwd,
                home=opts.home,
                keel_home=home_dir,
                env=env,
                trusted=trust.trusted,
                layers=[(str(layer.path), layer.scope, layer.data) for layer in loaded.layers],
                cli=list(opts.mcp_config),
                strict=opts.strict_mcp_config,
                project=not opts.skip_project_mcp,
                plugins=plugin_roots(opts.plugin_dirs, loaded.layers),
                services=services,
                warn=loaded.warnings.append,
                notify=lambda message: bus.emit(Notice(level="warning", message=message)),
            )
        )
        ext = Extensions()
        for item in builtins:
            ext.add(item)
        last = next((n for n in REQUEST_VALIDATORS if ext.get(n) is not None), None)
        # MCP, the SDK's extensions and the context point: after the built-ins, before the request validators
        recorder = CheckpointRecorder(session_path, cwd, bus.emit)  # file checkpoints for /rewind
        services.put(CheckpointRecorder, recorder)
        extra = [*opts.extensions, context_mgr.extension(), recorder.extension()]
        for item in [*([mcp] if mcp is not None else []), *extra]:
            ext.add(item, before=last)
        for item in ext:
            for subscriber in item.subscribers:
                bus.subscribe(subscriber)
        config = LoopConfig(
            model=info.model,
            system=context_mgr.system_prompt()
            if opts.system_prompt is None
            else "\n\n".join(p for p in (opts.system_prompt, opts.append_system_prompt) if p),
            max_tokens=max_tokens,
            thinking_budget=thinking,
            max_turns=opts.max_turns,
            max_budget_usd=opts.max_budget_usd,
            cost=info.prices.cost,
            retry=RetryPolicy(max_retries=_int_env(env, "KEEL_MAX_RETRIES", 4)),
        )
        if opts.system_prompt is None:  # --system-prompt replaces keel's prompt for the whole session
            context_mgr.loop_config = config  # the context manager keeps its system prompt current
        context = ToolContext(
            cwd=cwd,
            session_id=session_id,
            services=services,
            emit=bus.emit,
            additional_dirs=add_dirs,
            env=tool_env,
            scratch_dir=sessions / session_id / "tool-results",
            hidden_path=engine.read_denied if engine.has_read_denials() else None,
        )
        tools = ToolRegistry(builtin_tools())
        services.put(ToolRegistry, tools)  # extensions whose tools arrive later (MCP servers) add them here
        for item in ext:
            for tool in item.tools:
                tools.register(tool)
        agent = Agent(
            provider,
            tools,
            config,
            bus=bus,
            extensions=ext,
            context=context,
            events=loaded_session.events if loaded_session else None,
            mode=lambda: engine.mode,
        )
        from agentkeel.agents.setup import attach as attach_agents

        loaded.warnings += attach_agents(
            agent,
            cwd=cwd,
            home=opts.home,
            session_id=session_id,
            session_dir=sessions / session_id,
            trusted=trust.status == "trusted",  # explicitly: project agents may not widen permissions otherwise
            plugin_dirs=opts.plugin_dirs,
            layers=loaded.layers,
            env=env,
            wait_background=opts.channel != "interactive",
            agents=opts.agents,
            skills_allowed=opts.skills,
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
            start_timeout_s=opts.start_timeout_s,
        )
        rt.memory = memory
        if loaded_session is not None:  # a rewind killed half-way: completed or rolled back (its journal)
            from agentkeel.session.history import recover_rewind

            try:
                recovered = recover_rewind(rt, loaded_session.events)
            except Exception as exc:  # the session still opens; the journal stays open for the next start
                log.exception("recovering an interrupted rewind failed")
                recovered = f"an interrupted rewind could not be finished: {exc}"
            if recovered:
                loaded.warnings.append(recovered)
        if any(sid != session_id for sid in open_rewinds(sessions)):  # one listing when there is none
            from agentkeel.session.history import recover_open_rewinds

            try:  # another session's rewind killed half-way: finished now, not when (if) it is resumed
                loaded.warnings += recover_open_rewinds(sessions, current=session_id)
            except Exception as exc:  # this session still opens; the markers stay for the next start
                log.exception("recovering another session's interrupted rewind failed")
                loaded.warnings.append(f"an interrupted rewind could not be finished: {exc}")
        return rt

    @staticmethod
    def _pick_session(sessions: Path, opts: RuntimeOptions) -> tuple[Path, bool]:
        if opts.resume is not None or opts.continue_session:
            from agentkeel.session.load import AmbiguousSession, find_session, list_sessions
        if opts.resume is not None:
            ref = opts.resume.strip()
            if not ref:
                raise KeelError("-r needs a session id (or a unique prefix): see `keel sessions list`")
            try:
                found = find_session(sessions, ref)
            except AmbiguousSession as e:
                raise KeelError(str(e)) from None
            if found is None:
                raise KeelError(f"no session '{ref}' for this project: see `keel sessions list`")
            return forked(found, sessions) if opts.fork_session else found, True
        if opts.continue_session:
            existing = list_sessions(sessions)
            if not existing:
                raise KeelError("no earlier session to continue in this directory: run without -c to start one")
            return forked(existing[0].path, sessions) if opts.fork_session else existing[0].path, True
        if opts.session_id is not None:
            try:
                chosen = str(uuid.UUID(opts.session_id))
            except ValueError:
                raise KeelError(f"--session-id must be a UUID, not {opts.session_id!r}") from None
            if (sessions / f"{chosen}.jsonl").exists():
                raise KeelError(f"session {chosen} already exists: resume it with -r {chosen}")
            return sessions / f"{chosen}.jsonl", False
        return sessions / f"{uuid.uuid4()}.jsonl", False

    async def start(self) -> None:
        """Everything that must finish before the first request: each extension's ``start``
        (MCP connects, SessionStart work), each under ``start_timeout_s``; then SessionStarted.
        A start that fails or times out is a warning, never a hang."""
        if self._started:
            return
        self._started = True
        _childwatch.install()  # Python 3.11: a pidfd per Bash call, not a thread
        for ext in self.agent.ext:
            if ext.start is None:
                continue
            limit = ext.start_timeout_s or self.start_timeout_s
            try:
                await asyncio.wait_for(ext.start(), limit)
            except TimeoutError:
                self.settings.warnings.append(f"{ext.name} did not start within {limit:g}s; skipped")
            except Exception as exc:
                log.exception("extension %s failed to start", ext.name)
                self.settings.warnings.append(f"{ext.name} failed to start: {exc}")
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
        try:
            await self.start()
        except SinkFailed as e:
            return self.agent.failed(str(e))
        source = "resume" if self.resumed is not None else "startup"
        return await self.agent.run(prompt, source=source)

    async def aclose(self, reason: str = "exit") -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._started:
                try:
                    self.bus.emit(SessionEnded(reason=reason))
                except SinkFailed:
                    pass  # already reported by the run that hit it
            await self.agent.services.aclose()  # background shells, and any provided service
            for ext in self.agent.ext:
                if ext.close is None:
                    continue
                try:
                    await ext.close()
                except Exception:
                    log.exception("extension %s failed to close", ext.name)
            await self.agent.provider.aclose()
        finally:
            self.writer.close()
            self.lock.release()
