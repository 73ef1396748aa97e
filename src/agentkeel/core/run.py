"""What a run is configured with and how it ends: :class:`LoopConfig`, :class:`RunResult` with its
:class:`Refusal` list, and the exceptions that end a run (:class:`RunStopped` from an extension,
:class:`Stop` inside the loop)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import msgspec

from agentkeel.core.retry import RetryPolicy
from agentkeel.core.types import Usage

Subtype = Literal["success", "error_max_turns", "error_max_budget_usd", "error_during_execution", "interrupted"]


class LoopConfig(msgspec.Struct):
    model: str
    system: str = ""
    max_tokens: int = 8192
    max_turns: int | None = None
    max_budget_usd: float | None = None
    thinking_budget: int | None = None
    default_tool_timeout_s: float = 600.0
    retry: RetryPolicy = msgspec.field(default_factory=RetryPolicy)
    cost: Callable[[Usage], float] = lambda _usage: 0.0


class RunResult(msgspec.Struct):
    """How a run ended. ``result`` is the last answer (for a limit too: what the model had said so
    far) or, for a failure, the error; ``error`` says why a run that is not a success ended.
    ``refused`` lists the calls a before-tool check did not let run (who refused, in ``source``);
    ``api_error_status`` is the HTTP status of the provider error that ended the run."""

    subtype: Subtype
    result: str
    num_turns: int
    usage: Usage
    total_cost_usd: float
    duration_ms: int
    error: str = ""
    refused: list[Refusal] = msgspec.field(default_factory=list)
    api_error_status: int | None = None
    api_error: bool = False  # the provider failed the run (an HTTP error, or no answer at all)
    stop_reason: str | None = None  # the last model reply's (Claude Code reports it on every result)
    interrupted_during: str = ""  # an interrupted run: what it stopped ("request", "tools", "idle")

    @property
    def is_error(self) -> bool:
        return self.subtype != "success"


class Refusal(msgspec.Struct, frozen=True):
    """A tool call that did not run because a check said no (``source``: the verdict's source)."""

    tool_use_id: str
    tool_name: str
    tool_input: dict[str, Any]
    source: str
    reason: str = ""


class RunStopped(Exception):
    """Raised by an extension (from any point but ``on_error``, ``recover`` and ``resolve_ask``) to end the
    run on purpose: the run ends as ``error_during_execution`` with this message as its error,
    whatever the extension's failure policy (a loop detector that saw the model ignore its refusals)."""


class Stop(Exception):
    """End the run with an error a seam reported (a failed transcript write, a fail-closed
    extension, a blocked prompt)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
