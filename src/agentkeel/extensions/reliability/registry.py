"""The reliability built-ins by name, built from the session's parts (see extensions/builtins.py)."""

from __future__ import annotations

from collections.abc import Callable

from agentkeel.core.events import EventBus
from agentkeel.core.extensions import Extension
from agentkeel.core.tools import Services
from agentkeel.extensions.reliability.comments import comment_checker
from agentkeel.extensions.reliability.errors import error_detector
from agentkeel.extensions.reliability.fallback import model_fallback
from agentkeel.extensions.reliability.messages import empty_sanitizer, pairing_validator, thinking_validator
from agentkeel.extensions.reliability.monitor import context_monitor, output_truncator
from agentkeel.extensions.reliability.pruning import context_pruning
from agentkeel.extensions.reliability.recovery import session_recovery
from agentkeel.extensions.reliability.shell import non_interactive_env
from agentkeel.extensions.reliability.state import ReliabilityState
from agentkeel.extensions.reliability.todo import todo_enforcer
from agentkeel.settings import ReliabilitySettings

Build = Callable[[EventBus, ReliabilityState], Extension | None]

HANDLERS: dict[str, Build] = {
    "thinking-block-validator": thinking_validator,
    "empty-message-sanitizer": empty_sanitizer,
    "tool-pairing-validator": pairing_validator,
    "comment-checker": comment_checker,
    "context-window-monitor": context_monitor,
    "tool-output-truncator": output_truncator,
    "error-pattern-detector": error_detector,
    "session-recovery": session_recovery,
    "todo-continuation-enforcer": todo_enforcer,
    "model-fallback": model_fallback,
    "dynamic-context-pruning": context_pruning,
}


def session_state(
    services: Services, config: ReliabilitySettings | None, context_window: int, fallback_model: str
) -> ReliabilityState:
    """The session's one ReliabilityState (a service), configured the first time it is asked for."""
    state = services.find(ReliabilityState)
    if state is None:
        state = services.put(
            ReliabilityState,
            ReliabilityState(
                config=config or ReliabilitySettings(),
                context_window=context_window,
                fallback_model=fallback_model,
            ),
        )
    return state


def build(
    name: str,
    bus: EventBus,
    services: Services,
    *,
    config: ReliabilitySettings | None = None,
    context_window: int = 0,
    fallback_model: str = "",
    tool_env: dict[str, str] | None = None,
) -> Extension | None:
    """The reliability built-in ``name`` for one session (its parts passed by extensions/builtins.py)."""
    state = session_state(services, config, context_window, fallback_model)
    if name == "non-interactive-env":
        return non_interactive_env(bus, state, tool_env)
    if name == "dynamic-context-pruning":  # asks the session's tools what they protect
        return context_pruning(bus, state, services)
    return HANDLERS[name](bus, state)
