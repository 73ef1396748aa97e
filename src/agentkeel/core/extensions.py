"""Named extension points of the turn engine.

The loop calls these and knows nothing of what is behind them: the permission system,
hooks, the result guard, memory and the UI attach here (and to the event bus).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from agentkeel.core.provider import ModelRequest, ModelResponse
from agentkeel.core.tools import Tool, ToolOutput


@dataclass
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]
    tool: Tool | None


@dataclass(frozen=True)
class Verdict:
    """A before-tool extension's answer. ``None`` instead of a Verdict means no opinion."""

    decision: Literal["allow", "deny"]
    reason: str = ""
    source: str = ""
    updated_input: dict[str, Any] | None = None


@dataclass(frozen=True)
class StopInfo:
    last_text: str
    num_turns: int
    continued: bool  # a previous on_stop already made the loop go on (stop_hook_active)


BeforeRequest = Callable[[ModelRequest], Awaitable[ModelRequest]]
AfterResponse = Callable[[ModelResponse], Awaitable[None]]
BeforeTool = Callable[[ToolCall], Awaitable[Verdict | None]]
AfterTool = Callable[[ToolCall, ToolOutput], Awaitable[ToolOutput]]
OnStop = Callable[[StopInfo], Awaitable[str | None]]  # a string continues the loop with it


@dataclass
class Extensions:
    before_request: list[BeforeRequest] = field(default_factory=list)
    after_response: list[AfterResponse] = field(default_factory=list)
    before_tool: list[BeforeTool] = field(default_factory=list)
    after_tool: list[AfterTool] = field(default_factory=list)
    on_stop: list[OnStop] = field(default_factory=list)
    hide_tool: list[Callable[[Tool], bool]] = field(default_factory=list)  # hidden from the model
