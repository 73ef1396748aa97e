"""The extensions every session starts with, by name, in order.

Each entry builds one :class:`~agentkeel.core.extensions.Extension` from the session's parts.
``disabled_hooks: ["loop-detector"]`` in any settings file leaves one out; a ``required``
entry (the permission gate) cannot be left out, and saying so is a warning, not a hole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import msgspec
from msgspec.structs import replace

from agentkeel.config.settings import ReliabilitySettings, SettingsLayer
from agentkeel.core.events import EventBus, Notice
from agentkeel.core.extensions import Extension, ToolCall, Verdict
from agentkeel.core.provider import Provider
from agentkeel.core.tools import Services, Tool
from agentkeel.memory.toolnames import MEMORY_TOOLS
from agentkeel.policy.permissions import PermissionEngine, PermissionGate
from agentkeel.policy.redaction import session_bus
from agentkeel.policy.safety import AskRepeat, CircuitBreaker, LoopDetector, ResultGuard
from agentkeel.reliability.comments import comment_checker
from agentkeel.reliability.errors import error_detector
from agentkeel.reliability.fallback import model_fallback
from agentkeel.reliability.messages import empty_sanitizer, pairing_validator, thinking_validator
from agentkeel.reliability.monitor import context_monitor, output_truncator
from agentkeel.reliability.pruning import context_pruning
from agentkeel.reliability.recovery import session_recovery
from agentkeel.reliability.registry import session_state
from agentkeel.reliability.shell import non_interactive_env
from agentkeel.reliability.state import ReliabilityState
from agentkeel.reliability.todo import todo_enforcer
from agentkeel.telemetry import telemetry_builtin
from agentkeel.tools.output import OutputBudget
from agentkeel.tools.schemas import lazy_tool

if TYPE_CHECKING:
    from agentkeel.memory.plugin import MemoryPlugin
    from agentkeel.tools.shell import ShellState

log = logging.getLogger(__name__)


class SessionParts(msgspec.Struct):
    """What the built-in extensions are made from."""

    bus: EventBus
    engine: PermissionEngine
    gate: PermissionGate
    spill_dir: Path
    provider: Provider
    model: str
    ask_repeat: AskRepeat | None = None
    memory: MemoryPlugin | None = None
    notices: list[str] = msgspec.field(default_factory=list)  # warnings the runtime shows at start
    # for the hooks dispatcher
    layers: list[SettingsLayer] = msgspec.field(default_factory=list)  # every settings layer, with its scope
    sdk_hooks: dict[str, Any] = msgspec.field(default_factory=dict)  # RuntimeOptions.hooks
    session_id: str = ""
    transcript_path: Path | None = None
    cwd: Path | None = None
    env: dict[str, str] = msgspec.field(default_factory=dict)  # the session's environment (hooks run with it)
    tool_env: dict[str, str] | None = None  # Bash's extra environment (CLAUDE_ENV_FILE lands here)
    services: Services | None = None  # the session's services (the shell's live cwd, for CwdChanged)
    home: Path | None = None
    source: str = "startup"  # SessionStart's source: startup | resume
    plugin_dirs: tuple[Path, ...] = ()  # RuntimeOptions.plugin_dirs: their hooks/hooks.json
    trusted: bool = True  # the project is trusted (a plugin inside an untrusted one stays inert)
    # for the reliability built-ins
    reliability: ReliabilitySettings | None = None
    context_window: int = 0  # the model's window in tokens
    fallback_model: str = ""  # the provider's id of the fallback model ("" for none)
    disabled: tuple[str, ...] = ()  # disabled_hooks (default_extensions fills it)


Factory = Callable[[SessionParts], Extension | None]


MAIN = "main"  # a session: keel, keel -p, the SDK, the TUI, the web app
SUBAGENT = "subagent"  # a Task child: shares the parent's instances of its profile's built-ins
HOOK_AGENT = "hook-agent"  # an "agent" hook's read-only loop
BATCH_TASK = "batch-task"  # one task of `keel batch` (a session of its own)
PROFILES = (MAIN, SUBAGENT, HOOK_AGENT, BATCH_TASK)
SESSIONS = frozenset({MAIN, SUBAGENT, BATCH_TASK})
EVERY = frozenset(PROFILES)


class Builtin(msgspec.Struct, frozen=True):
    name: str
    description: str
    factory: Factory
    required: bool = False
    always: bool = False  # built even when disabled: the factory reads ``parts.disabled`` itself
    profiles: frozenset[str] = SESSIONS  # the kinds of session it is part of
    # built with the session's Agent (agents/setup.py), not from its parts: ``enabled`` says whether
    late: bool = False


def _loop_detector(parts: SessionParts) -> Extension:
    return LoopDetector(parts.ask_repeat).extension()


def _circuit_breaker(parts: SessionParts) -> Extension:
    breaker = CircuitBreaker(parts.bus.emit)
    return Extension("circuit-breaker", before_tool=breaker.before, after_tool=breaker.after)


def _hooks(parts: SessionParts) -> Extension | None:
    """The hook dispatcher for the user's hooks (settings, plugins, the SDK). With none, no
    dispatcher is built."""
    from agentkeel.hooks.config import load_hooks, plugin_hooks, plugin_roots

    dirs = plugin_roots(parts.plugin_dirs, parts.layers)
    plugins = plugin_hooks(dirs, project=parts.cwd, trusted=parts.trusted) if dirs else None
    config = load_hooks(parts.layers, parts.sdk_hooks, plugins)
    parts.notices += config.warnings
    if not config.hooks or parts.cwd is None or parts.transcript_path is None:
        return None
    # the dispatcher, its runners and output parsing load only when some hook is configured
    from agentkeel.hooks import HookContext, HookDispatcher, HooksExtension, matcher_error

    parts.notices += [f"{h.source}: hooks.{h.event}: {e}" for h in config.hooks if (e := matcher_error(h.matcher))]
    context = HookContext(
        session_id=parts.session_id,
        transcript_path=parts.transcript_path,
        project_dir=parts.cwd,
        emit=parts.bus.emit,
        mode=lambda: parts.engine.mode,
        env={**parts.env, **(parts.tool_env or {})},
        env_file=parts.spill_dir.parent / "hook-env.sh",
        provider=parts.provider,
        model=parts.model,
        home=str(parts.home or Path.home()),
        spawned=_watched(parts.services),
        agent_session=_hook_agent_session(parts),
    )
    dispatcher = HookDispatcher(config, context)
    hooks = HooksExtension(dispatcher, tool_env=parts.tool_env, source=parts.source, services=parts.services)
    parts.gate.request_hooks.append(hooks.permission_request)
    return hooks.extension()


def _hook_agent_session(parts: SessionParts) -> Callable[[], tuple[EventBus, list[Extension]]]:
    """An agent hook's bus and built-ins: the ``hook-agent`` profile, made from this session's
    parts (its window, its settings), with a bus and services of their own."""

    def session() -> tuple[EventBus, list[Extension]]:
        bus = session_bus(None)  # nothing of the hook agent's is written to the session
        child = msgspec.structs.replace(
            parts,
            bus=bus,
            spill_dir=parts.spill_dir.parent / "hook-agents" / "tool-results",
            services=Services(),
            notices=[],
        )
        extensions, _ = default_extensions(child, list(parts.disabled), HOOK_AGENT)
        return bus, extensions

    return session


class _Watched:
    """Command hooks tagged and registered with the session's process watchdog, as Bash's shells
    are: a ``kill -9`` of keel ends a hook still running (and what it started) too. The shell
    state is found at the first command hook, not before (the first request does not wait for it)."""

    def __init__(self, services: Services) -> None:
        self._services = services
        self._shells: ShellState | None = None

    def _state(self) -> ShellState:
        if self._shells is None:
            from agentkeel.tools.shell import ShellState

            self._shells = self._services.get(ShellState)
        return self._shells

    @property
    def tag(self) -> str:
        # once the shells are closed (SessionEnd hooks run after), the watchdog's last sweep must not
        # find a hook that starts then
        shells = self._state()
        if shells.watchdog.closed:
            return ""
        # the watchdog runs before the hook starts: a kill -9 of keel at any moment after finds the
        # hook and its children by this tag, registered group or not
        shells.watchdog.ensure()
        return f"{shells.session}:hooks"

    def started(self, pgid: int) -> None:
        self._state().watchdog.register(pgid)

    def ended(self, pgid: int) -> None:
        self._state().watchdog.unregister(pgid)


def _watched(services: Services | None) -> _Watched | None:
    return _Watched(services) if services is not None else None


def _settings_watch(parts: SessionParts) -> Extension | None:
    """Settings files changed during the session: ConfigChange, then their new deny/ask rules."""
    if parts.cwd is None:
        return None
    from agentkeel.hooks.configchange import SettingsWatch

    if parts.services is None:
        parts.services = Services()
    watch = SettingsWatch(_settings_files(parts), parts.engine, parts.services, parts.bus.emit, trusted=parts.trusted)
    return watch.extension()


def _settings_files(parts: SessionParts) -> dict[Path, str]:
    """The settings files watched: every layer read, and the project's that may appear."""
    files = {layer.path: str(layer.scope) for layer in parts.layers}
    if parts.cwd is not None:
        for folder in (".claude", ".keel"):
            files.setdefault(parts.cwd / folder / "settings.json", "project")
            files.setdefault(parts.cwd / folder / "settings.local.json", "local")
    return files


def _permission_gate(parts: SessionParts) -> Extension:
    gate = parts.gate

    async def resolve(call: ToolCall, verdict: Verdict) -> Verdict:
        return await gate.resolve(call, verdict.reason)

    return Extension(
        "permission-gate", before_tool=gate, resolve_ask=resolve, hide_tool=parts.engine.hidden, required=True
    )


def _result_guard(parts: SessionParts) -> Extension:
    return Extension("result-guard", after_tool=ResultGuard(), required=True)


def _output_budget(parts: SessionParts) -> Extension:
    return Extension("output-budget", after_tool=OutputBudget.from_env(parts.spill_dir, parts.env))


def _memory(parts: SessionParts) -> Extension | None:
    """Memory: capture on keel's own events, context at each prompt, its tools, the summary at the end."""
    memory = parts.memory
    if memory is None:
        return None
    return memory.extension(parts.bus.emit, parts.provider, parts.model, _memory_tools(memory))


def _memory_tools(memory: MemoryPlugin) -> list[Tool]:
    """Stand-ins that build memory's tools (and import pydantic) at their first call; none when
    memory held nothing at session start (``MemoryPlugin.offers_tools``)."""
    if not memory.offers_tools():
        return []
    real: dict[str, Tool] = {}

    def loader(name: str) -> Callable[[], Tool]:
        def load() -> Tool:
            if not real:
                real.update({t.name: t for t in memory.tools()})
            return real[name]

        return load

    lazy = [lazy_tool(name, loader(name)) for name in MEMORY_TOOLS]
    return [t for t in lazy if t is not None] if all(lazy) else memory.tools()


def _with_the_agent(parts: SessionParts) -> None:
    """A ``late`` built-in: made with the session's Agent by its owner (agents/setup.py)."""
    return None


Build = Callable[[EventBus, ReliabilityState], Extension | None]
AsksTools = Callable[[EventBus, ReliabilityState, Services | None], Extension | None]


class Reliability:
    """A reliability built-in's factory: its handler (``build``, whose docstring names the failure
    it exists for), made on the session's one ReliabilityState."""

    def __init__(self, build: Build | AsksTools, *, asks_tools: bool = False) -> None:
        self.build = build
        self.asks_tools = asks_tools  # the handler is given the session's Services (its tools' effects)

    def __call__(self, parts: SessionParts) -> Extension | None:
        state = _reliability_state(parts)
        if self.asks_tools:
            return cast(AsksTools, self.build)(parts.bus, state, parts.services)
        return cast(Build, self.build)(parts.bus, state)


def _reliability_state(parts: SessionParts) -> ReliabilityState:
    if parts.services is None:
        parts.services = Services()
    return session_state(parts.services, parts.reliability, parts.context_window, parts.fallback_model)


def _non_interactive_env(parts: SessionParts) -> Extension | None:
    return non_interactive_env(parts.bus, _reliability_state(parts), parts.tool_env)


BUILTINS: tuple[Builtin, ...] = (
    # per-conversation state: a subagent has its own (not the parent's)
    Builtin(
        "loop-detector",
        "asks or stops when the same call repeats (doom loop)",
        _loop_detector,
        profiles=frozenset({MAIN, BATCH_TASK}),
    ),
    Builtin("circuit-breaker", "pauses an external tool after repeated failures", _circuit_breaker),
    Builtin("hooks", "Claude Code-compatible hooks from settings and the SDK", _hooks),
    Builtin("settings-watch", "settings changed mid-session: ConfigChange, then new deny/ask rules", _settings_watch),
    Builtin(
        "non-interactive-env",
        "refuses editors, full-screen programs, git add -p / rebase -i; no pagers or prompts",
        _non_interactive_env,
    ),
    Builtin("permission-gate", "the permission engine and the ask flow", _permission_gate, required=True),
    Builtin("result-guard", "cleans and redacts every tool result", _result_guard, required=True, profiles=EVERY),
    Builtin("output-budget", "spills large tool output to a file", _output_budget, profiles=EVERY),
    Builtin(
        "tool-output-truncator",
        "cuts a tool result to half the context headroom",
        Reliability(output_truncator),
        profiles=EVERY,
    ),
    Builtin("comment-checker", "flags narrating comments an Edit or Write added", Reliability(comment_checker)),
    Builtin("memory", "memory capture, context injection and tools", _memory, profiles=frozenset({MAIN, BATCH_TASK})),
    Builtin("error-pattern-detector", "names the cause of a provider 400", Reliability(error_detector)),
    Builtin(
        "session-recovery",
        "repairs the request after a recognised 400 and re-sends it",
        Reliability(session_recovery),
    ),
    Builtin("model-fallback", "switches to fallbackModel after repeated provider errors", Reliability(model_fallback)),
    Builtin("context-window-monitor", "warns at 70/85/95% of the context window", Reliability(context_monitor)),
    Builtin(
        "todo-continuation-enforcer",
        "idle with open todos: countdown, then a continuation prompt",
        Reliability(todo_enforcer),
    ),
    Builtin(
        "dynamic-context-pruning",
        "dedupes calls, supersedes writes, purges old errors",
        Reliability(context_pruning, asks_tools=True),
    ),
    Builtin(
        "empty-message-sanitizer",
        "fills or drops empty content in the request",
        Reliability(empty_sanitizer),
        profiles=EVERY,
    ),
    Builtin(
        "thinking-block-validator",
        "thinking blocks first, or none",
        Reliability(thinking_validator),
        profiles=EVERY,
    ),
    Builtin(
        "tool-pairing-validator",
        "every tool_use answered once in the request",
        Reliability(pairing_validator),
        profiles=EVERY,
    ),
    Builtin("telemetry", "OpenTelemetry as Claude Code's", telemetry_builtin, profiles=frozenset({MAIN, BATCH_TASK})),
    Builtin(
        "agents",
        "subagents' results, an inline skill's allowed-tools, path-activated skills, the Agent alias",
        _with_the_agent,
        late=True,
    ),
)


# they check the request every other transform made: SDK extensions go before them
REQUEST_VALIDATORS = ("empty-message-sanitizer", "thinking-block-validator", "tool-pairing-validator")


def default_extensions(
    parts: SessionParts, disabled: list[str], profile: str = MAIN
) -> tuple[list[Extension], list[str]]:
    """The built-ins of ``profile`` minus the disabled ones, and warnings about the disabled list."""
    names = {b.name for b in BUILTINS}
    warnings: list[str] = []
    for name in disabled:
        if name not in names:
            known = ", ".join(b.name for b in BUILTINS if not b.required)
            warnings.append(f"disabled_hooks: no built-in named '{name}' (known: {known})")
    out: list[Extension] = []
    parts.disabled = tuple(disabled)
    for builtin in BUILTINS:
        if profile not in builtin.profiles or builtin.late:
            continue
        if builtin.name in disabled:
            if builtin.required:
                warnings.append(f"disabled_hooks: '{builtin.name}' is a safety check and cannot be disabled")
            elif not builtin.always:
                continue
        ext = builtin.factory(parts)
        if ext is not None:
            out.append(ext)
    return out, warnings


def enabled(name: str, disabled: list[str] | tuple[str, ...], profile: str = MAIN) -> bool:
    """Whether the built-in ``name`` is part of a ``profile`` session with ``disabled_hooks``."""
    builtin = next((b for b in BUILTINS if b.name == name), None)
    if builtin is None or profile not in builtin.profiles:
        return False
    return builtin.required or builtin.always or name not in disabled


def not_shared(profile: str = SUBAGENT) -> frozenset[str]:
    """The built-ins a ``profile`` child does not share with its parent: its own, or none."""
    return frozenset(b.name for b in BUILTINS if profile not in b.profiles)


def notice(bus: EventBus, message: str) -> None:
    bus.emit(Notice(level="warning", message=message))


def definition_hooks(
    parent: Any,
    hooks: dict[str, Any],
    *,
    bus: EventBus,
    scratch: Path,
    provider: Any,
    model: str,
    agent_id: str,
    transcript: Path,
    workdir: Path,
    env: dict[str, str],
    services: Services,
) -> tuple[Extension | None, list[str] | None]:
    """An agent definition's own hooks, made by the session's ``hooks`` built-in bound to the child
    (agents.agenthooks.DefinitionHooks): (the extension, its notices), or (None, None) when the
    session has no permission gate or hooks built-in to make them with."""
    from agentkeel.policy.permissions import PermissionGate

    gate = next((e.before_tool for e in parent.ext if e.name == "permission-gate"), None)
    builtin = next((b for b in BUILTINS if b.name == "hooks"), None)
    if not isinstance(gate, PermissionGate) or builtin is None:
        return None, None
    parts = SessionParts(
        bus=bus,
        engine=gate.engine,
        # PermissionRequest hooks of a definition are not wired into the session's gate: a copy takes them
        gate=replace(gate, request_hooks=[]),
        spill_dir=scratch,
        provider=provider,
        model=model,
        sdk_hooks=hooks,
        session_id=agent_id,
        transcript_path=transcript,
        cwd=workdir,
        env=env,
        services=services,
        source="startup",
    )
    built = builtin.factory(parts)
    return built, parts.notices
