"""The session's one :class:`ReliabilityState`, which the reliability built-ins share (each one is
an entry of :data:`agentkeel.app.extensions.BUILTINS`, the one registry of built-ins)."""

from __future__ import annotations

from agentkeel.config.settings import ReliabilitySettings
from agentkeel.core.tools import Services
from agentkeel.reliability.state import ReliabilityState


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
