"""What the reliability built-ins of one session share (a service: ``services.get(ReliabilityState)``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec

from agentkeel.config.settings import ReliabilitySettings
from agentkeel.core.events import EventBus, Notice


class ReliabilityState(msgspec.Struct):
    config: ReliabilitySettings = msgspec.field(default_factory=ReliabilitySettings)
    context_window: int = 0  # the model's window in tokens (0: unknown)
    last_input_tokens: int = 0  # the context the last response reported (input + cache)
    recovering: bool = False  # session recovery is repairing a failed request
    last_error_at: float = 0.0  # monotonic time of the last provider error
    strip_thinking: bool = False  # the provider refused thinking blocks: leave them out from now on
    shrink: bool = False  # the provider said the prompt is too long: prune hard from now on
    fallback_model: str = ""  # the configured fallback model (the provider's model id)
    fallback_active: bool = False
    todos: list[dict[str, Any]] = msgspec.field(default_factory=list)
    _cancel: asyncio.Event | None = None

    def used_fraction(self) -> float:
        if self.context_window <= 0:
            return 0.0
        return self.last_input_tokens / self.context_window

    def headroom_tokens(self) -> int | None:
        if self.context_window <= 0 or self.last_input_tokens <= 0:
            return None
        return max(self.context_window - self.last_input_tokens, 0)

    def open_todos(self) -> list[dict[str, Any]]:
        return [t for t in self.todos if t.get("status") != "completed"]

    def error_seen(self) -> None:
        self.last_error_at = time.monotonic()

    # --- the todo countdown: cancelled by new input, tool activity or recovery -------------

    def countdown_event(self) -> asyncio.Event:
        self._cancel = asyncio.Event()
        return self._cancel

    def cancel_countdown(self) -> None:
        """New user input or tool activity: a continuation under way is called off."""
        if self._cancel is not None:
            self._cancel.set()


def notice(bus: EventBus, handler: str, message: str, level: str = "info") -> None:
    """A reliability handler's action, on the bus (and so in stream-json and the transcript)."""
    bus.emit(Notice(level="warning" if level == "warning" else "info", message=f"[{handler}] {message}"))
