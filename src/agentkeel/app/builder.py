"""The composition root: one session builder in small named steps, and the profiles that choose
a session's built-ins (app/extensions.py: main, subagent, hook agent, batch task).

``build`` is the one assembly of a session: settings -> model -> provider -> session log ->
permissions -> bus (redacting, logging) -> services -> built-ins (by profile) -> context -> tools -> Agent -> agents,
skills and commands. ``Runtime.create`` wraps what it returns; a subagent's session is built by
its spawner from the parent's parts through the subagent profile, an agent hook's by the hooks
built-in through the hook-agent profile. The core depends on none of this.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from agentkeel.agents.agenthooks import DefinitionHooks
from agentkeel.app.assembly import KeelError, fallback_model_id, model_name, sandbox_for
from agentkeel.app.extensions import (
    PROFILES,
    REQUEST_VALIDATORS,
    SUBAGENT,
    SessionParts,
    default_extensions,
    definition_hooks,
    enabled,
    not_shared,
)
from agentkeel.app.options import RuntimeOptions
from agentkeel.app.place import Place, locate
from agentkeel.app.transcript import Log, open_log
from agentkeel.config.settings import LoadedSettings, MemorySettings
from agentkeel.config.trust import TrustState, TrustStore
from agentkeel.context.builder import shell_name
from agentkeel.context.instructions import ImportPolicy
from agentkeel.context.manager import ContextManager
from agentkeel.core.events import EventBus, Notice
from agentkeel.core.extensions import Extension, Extensions
from agentkeel.core.loop import Agent
from agentkeel.core.provider import Provider
from agentkeel.core.retry import RetryPolicy
from agentkeel.core.run import LoopConfig
from agentkeel.core.tools import Services, ToolContext, ToolRegistry
from agentkeel.hooks.config import plugin_roots
from agentkeel.internal import lazy as _lazy
from agentkeel.internal.env import KeelEnv
from agentkeel.mcp import McpSetup, mcp_extension
from agentkeel.models.catalog import ModelConfigError, ModelInfo, resolve_model
from agentkeel.policy.permissions import PermissionEngine, PermissionGate, build_engine
from agentkeel.policy.redaction import session_bus
from agentkeel.session.checkpoints import CheckpointRecorder
from agentkeel.tools import builtin_tools

if TYPE_CHECKING:
    from agentkeel.agents.setup import Definitions
    from agentkeel.memory.plugin import MemoryPlugin

log = logging.getLogger(__name__)

# What the first tool call needs and the first request does not: imported on a thread while the
# first request waits for the model (agentkeel.internal.lazy), so a real model's answer time hides it.
FIRST_CALL_MODULES = (
    "agentkeel.policy.permissions.shellpolicy",  # the permission engine's shell analysis
    "agentkeel.policy.permissions.targets",
    "agentkeel.policy.permissions.trees",
    "agentkeel.policy.permissions.suggestions",  # the rule an ask suggests
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


def memory_config(loaded: LoadedSettings, channel: str) -> MemorySettings:
    """The ``memory`` settings of a session. Recalled memories are appended to the prompt
    (``<memory-context>``) unless ``memory.inject`` is false; for an Agent SDK host (channel
    ``sdk``) they are not, unless a settings file (or ``--settings``) sets ``memory.inject: true``:
    the host's prompts are its own (docs/sdk.md)."""

    config = loaded.settings.memory or MemorySettings()
    explicit = any(
        isinstance(layer.data.get("memory"), dict) and "inject" in layer.data["memory"] for layer in loaded.layers
    )
    if channel == "sdk" and not explicit:
        return msgspec.structs.replace(config, inject=False)
    return config


def _memory_plugin(
    config: MemorySettings, cwd: Path, home_dir: Path, session_id: str, window: int, warnings: list[str]
) -> MemoryPlugin | None:
    """Memory for this session, or None when disabled or broken: memory fails open, and says so."""
    from agentkeel.memory.plugin import MemoryPlugin

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


def import_refusal(engine: PermissionEngine) -> Callable[[Path], str | None]:
    """Why an instruction file's ``@import`` may not be read into the prompt: the Read deny rules,
    and the credential stores (the one list the sandbox hides and the engine asks about)."""
    from agentkeel.policy.permissions.paths import credential_store

    def refuse(path: Path) -> str | None:
        if engine.read_denied(path):
            return "a Read deny rule covers it"
        store = credential_store(str(path), engine.home, engine.keel_home)
        return f"{store} is a credential store" if store else None

    return refuse


# --- the steps ---------------------------------------------------------------------------


def choose_model(opts: RuntimeOptions, place: Place) -> tuple[ModelInfo, Provider]:
    try:
        info = resolve_model(model_name(opts.model, place.loaded, place.env, place.trust), place.env)
        from agentkeel.models.factory import make_provider

        transport = place.settings.provider.transport if place.settings.provider else None
        return info, make_provider(info, place.env, transport=transport)
    except ModelConfigError as e:
        raise KeelError(str(e)) from None


def permissions(place: Place, opts: RuntimeOptions) -> PermissionEngine:
    engine = build_engine(
        place.loaded,
        cwd=place.cwd,
        mode=opts.permission_mode,
        allowed_tools=opts.allowed_tools,
        disallowed_tools=opts.disallowed_tools,
        add_dirs=opts.add_dirs,
        home=opts.home,
        keel_home=place.home_dir,
        channel=opts.channel,
    )
    place.loaded.warnings.extend(engine.warnings)
    return engine


def permission_gate(place: Place, opts: RuntimeOptions, engine: PermissionEngine, bus: EventBus) -> PermissionGate:
    store = TrustStore(place.home_dir)
    return PermissionGate(
        engine,
        bus.emit,
        ask=opts.ask,
        request_hooks=list(opts.permission_hooks),  # the hooks built-in appends; never to the caller's list
        project_settings=place.cwd / ".keel" / "settings.local.json",
        # keel wrote that file itself: it must not cost the user their trust
        on_project_rule=(lambda: _retrust(store, place.cwd)) if place.trust.trusted else None,
    )


def session_services(
    opts: RuntimeOptions, place: Place, info: ModelInfo, engine: PermissionEngine, gate: PermissionGate, sandbox: Any
) -> Services:
    services = Services()
    for kind, item in opts.services.items():
        services.put(kind, item)
    services.put(PermissionGate, gate)  # /sandbox on asks about new hosts through it too
    # what slash commands and front ends know of the session besides its Agent (core.handle)
    services.put(PermissionEngine, engine)
    services.put(LoadedSettings, place.loaded)
    services.put(ModelInfo, info)
    services.put(TrustState, place.trust)
    services.put(DefinitionHooks, DefinitionHooks(definition_hooks))  # an agent definition's own hooks
    if sandbox is not None:
        services.put(type(sandbox), sandbox)
        sandbox.asker = gate  # a new host a sandboxed command reaches is asked about through the gate
    return services


def context_manager(
    opts: RuntimeOptions,
    place: Place,
    info: ModelInfo,
    provider: Provider,
    engine: PermissionEngine,
    services: Services,
    add_dirs: tuple[Path, ...],
    max_tokens: int,
    bus: EventBus,
    memory: MemoryPlugin | None,
    log_: Log,
) -> ContextManager:
    mgr = ContextManager.create(
        provider=provider,
        model=info.model,
        qualified_model=info.qualified,
        context_window=info.context_window,
        max_tokens=max_tokens,
        settings=place.settings.context,
        output_style=place.settings.outputStyle,
        cwd=place.cwd,
        home=opts.home,
        keel_home=place.home_dir,
        env=place.env,
        services=services,
        additional_dirs=add_dirs,
        append=opts.append_system_prompt,
        imports=ImportPolicy(trusted=place.trust.status == "trusted", refuse=import_refusal(engine)),
        sources=opts.setting_sources,
    )
    # ContextManager.create takes none of these yet (context/manager.py): they are set once, here
    mgr.emit = bus.emit
    mgr.memory_context = memory.prompt_context if memory is not None else None
    mgr.transcript = log_.path  # named in the carry-over of a compaction
    mgr.builder.shell = shell_name(place.env)  # the session's $SHELL, for the environment note
    mgr.builder.prefetch()  # the git snapshot for the first request's note, taken while the session starts
    if log_.resumed:
        mgr.replay(log_.resumed.events)
    place.loaded.warnings.extend(mgr.warnings())
    return mgr


def mcp_servers(opts: RuntimeOptions, place: Place, services: Services, bus: EventBus) -> Extension | None:
    return mcp_extension(
        McpSetup(
            cwd=place.cwd,
            home=opts.home,
            keel_home=place.home_dir,
            env=place.env,
            trusted=place.trust.trusted,
            layers=[(str(layer.path), layer.scope, layer.data) for layer in place.loaded.layers],
            cli=list(opts.mcp_config),
            strict=opts.strict_mcp_config,
            project=not opts.skip_project_mcp,
            plugins=plugin_roots(opts.plugin_dirs, place.loaded.layers),
            services=services,
            warn=place.loaded.warnings.append,
            notify=lambda message: bus.emit(Notice(level="warning", message=message)),
        )
    )


def extension_chain(builtins: list[Extension], later: list[Extension], bus: EventBus) -> Extensions:
    """The built-ins in the registry's order, then MCP, the SDK's extensions and the context point
    (before the request validators, which check what every transform made); each extension's
    subscribers on the bus."""
    ext = Extensions()
    for item in builtins:
        ext.add(item)
    last = next((n for n in REQUEST_VALIDATORS if ext.get(n) is not None), None)
    for item in later:
        ext.add(item, before=last)
    for item in ext:
        for subscriber in item.subscribers:
            bus.subscribe(subscriber)
    return ext


def tool_registry(ext: Extensions, services: Services, found: Definitions) -> ToolRegistry:
    """keel's tools, the extensions' (memory), then the definitions' (Task, Agent, Skill)."""
    tools = ToolRegistry(builtin_tools())
    services.put(ToolRegistry, tools)  # extensions whose tools arrive later (MCP servers) add them here
    for item in ext:
        for tool in item.tools:
            tools.register(tool)
    for tool in found.tools:
        tools.register(tool)
    return tools


class Built(msgspec.Struct):
    """A built session: what the Runtime holds."""

    agent: Agent
    log: Log
    place: Place
    model: ModelInfo
    engine: PermissionEngine
    memory: MemoryPlugin | None = None


def build(opts: RuntimeOptions) -> Built:
    """Assemble one session, in order. ``opts.profile`` chooses the built-ins."""
    if opts.profile not in PROFILES:
        raise KeelError(f"no session profile {opts.profile!r} (known: {', '.join(PROFILES)})")
    place = locate(opts)
    settings = place.settings
    info, provider = choose_model(opts, place)
    log_ = open_log(place, opts)
    session_id = log_.session_id
    engine = permissions(place, opts)
    _lazy.warm_later(*FIRST_CALL_MODULES)
    add_dirs = tuple(Path(d) for d in engine.additional_dirs)
    try:
        sandbox = sandbox_for(settings, place.cwd, opts.home, place.home_dir, add_dirs, engine, place.loaded.warnings)
    except KeelError:
        log_.lock.release()
        raise
    bus = session_bus(log_.writer)
    gate = permission_gate(place, opts, engine, bus)
    memory = _memory_plugin(
        memory_config(place.loaded, opts.channel),
        place.cwd,
        place.home_dir,
        session_id,
        info.context_window,
        place.loaded.warnings,
    )
    tool_env = dict(settings.env)  # Bash's extra environment; SessionStart hooks may add to it
    services = session_services(opts, place, info, engine, gate, sandbox)
    spill_dir = place.sessions / session_id / "tool-results"
    parts = SessionParts(
        bus=bus,
        engine=engine,
        gate=gate,
        spill_dir=spill_dir,
        provider=provider,
        model=info.model,
        ask_repeat=opts.ask_repeat,
        memory=memory,
        layers=place.loaded.layers,
        sdk_hooks=opts.hooks,
        session_id=session_id,
        transcript_path=log_.path,
        cwd=place.cwd,
        env=place.env,
        tool_env=tool_env,
        services=services,
        home=opts.home,
        source=opts.start_source or ("resume" if log_.prior else "startup"),
        plugin_dirs=tuple(opts.plugin_dirs),
        trusted=place.trust.trusted,
        reliability=settings.reliability,
        context_window=info.context_window,
        fallback_model=fallback_model_id(
            opts.fallback_model or settings.fallbackModel, info, place.env, place.loaded.warnings
        ),
    )
    builtins, warnings = default_extensions(parts, settings.disabled_hooks, opts.profile)
    place.loaded.warnings.extend(warnings + parts.notices)
    thinking = _int_env(place.env, "MAX_THINKING_TOKENS", 0) or None  # Claude Code's variable
    max_tokens = _max_tokens(info, settings.maxTokens, thinking)
    context_mgr = context_manager(
        opts, place, info, provider, engine, services, add_dirs, max_tokens, bus, memory, log_
    )
    mcp = mcp_servers(opts, place, services, bus)
    recorder = services.put(CheckpointRecorder, CheckpointRecorder(log_.path, place.cwd, bus.emit))  # for /rewind
    # keel's environment note goes on the first message whatever the system prompt (--system-prompt
    # replaces the brief, not the environment), after the host's extensions, before the accounting
    environment = Extension("environment", before_request=context_mgr.builder.attach)
    later = [*([mcp] if mcp is not None else []), *opts.extensions, environment, context_mgr.extension()]
    later.append(recorder.extension())
    ext = extension_chain(builtins, later, bus)
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
        retry=RetryPolicy(max_retries=KeelEnv.of(place.env).max_retries),
    )
    if opts.system_prompt is None:  # --system-prompt replaces keel's prompt for the whole session
        context_mgr.loop_config = config  # the context manager keeps its system prompt current
    context = ToolContext(
        cwd=place.cwd,
        session_id=session_id,
        services=services,
        emit=bus.emit,
        additional_dirs=add_dirs,
        env=tool_env,
        scratch_dir=spill_dir,
        hidden_path=engine.read_denied if engine.has_read_denials() else None,
    )
    found = read_definitions(opts, place, info.context_window)
    found.provide(services)
    agent = Agent(
        provider,
        tool_registry(ext, services, found),
        config,
        bus=bus,
        extensions=ext,
        context=context,
        events=log_.resumed.events if log_.resumed else None,
        mode=lambda: engine.mode,
    )
    attach_agents(agent, found, opts, place, log_)
    place.loaded.warnings.extend(found.warnings)
    return Built(agent, log_, place, info, engine, memory)


def read_definitions(opts: RuntimeOptions, place: Place, context_window: int = 200_000) -> Definitions:
    """Agents, skills, slash commands and plugins of the session's folders (agents/setup.py); the
    skill listing's budget follows the model's context window, as Claude Code's does."""
    from agentkeel.agents.setup import definitions
    from agentkeel.skills.listing import MAX_DESCRIPTION, budget

    settings = place.settings
    chars = budget(context_window, place.env, settings.skillListingBudgetFraction)

    return definitions(
        cwd=place.cwd,
        home=opts.home,
        plugin_dirs=opts.plugin_dirs,
        layers=place.loaded.layers,
        agents=opts.agents,
        skills_allowed=opts.skills,
        listing=(chars, settings.skillListingMaxDescChars or MAX_DESCRIPTION),
        # --setting-sources: "project" covers the project's .claude/.keel folders (as Claude Code)
        scopes=None if opts.setting_sources is None else opts.setting_sources & {"user", "project"},
    )


def attach_agents(agent: Agent, found: Definitions, opts: RuntimeOptions, place: Place, log_: Log) -> None:
    """What holds the Agent: the skill host, the subagent spawner (its children share the built-ins
    of the registry's subagent profile), and the ``agents`` built-in unless ``disabled_hooks`` names it."""
    from agentkeel.agents.setup import attach

    attach(
        agent,
        found,
        session_id=log_.session_id,
        session_dir=place.sessions / log_.session_id,
        trusted=place.trust.status == "trusted",  # explicitly: project agents may not widen permissions otherwise
        env=place.env,
        wait_background=opts.channel != "interactive",
        extension=enabled("agents", place.settings.disabled_hooks, opts.profile),
        not_shared=not_shared(SUBAGENT),
    )
