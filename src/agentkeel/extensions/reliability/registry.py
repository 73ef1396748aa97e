"""The reliability built-ins by name, built from the session's parts (see extensions/builtins.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from agentkeel.extensions.builtins import SessionParts

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


def session_state(parts: SessionParts) -> ReliabilityState:
    """The session's one ReliabilityState (a service), configured from the parts the first time."""
    if parts.services is None:
        parts.services = Services()
    state = parts.services.find(ReliabilityState)
    if state is None:
        state = parts.services.put(
            ReliabilityState,
            ReliabilityState(
                config=parts.reliability or ReliabilitySettings(),
                context_window=parts.context_window,
                fallback_model=parts.fallback_model,
            ),
        )
    return state


def build(name: str, parts: SessionParts) -> Extension | None:
    state = session_state(parts)
    if name == "non-interactive-env":
        return non_interactive_env(parts.bus, state, parts.tool_env)
    return HANDLERS[name](parts.bus, state)
