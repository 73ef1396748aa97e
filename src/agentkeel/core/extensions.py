"""Named extension points of the turn engine.

The loop calls these and knows nothing of what is behind them: the permission system, the
result guard, memory, hooks and the UI attach here (and to the event bus). An
:class:`Extension` is a named bundle of handlers; :class:`Extensions` is the ordered list the
loop consults. keel's own built-ins are extensions registered by name through the same seam
the SDK uses, so a setting (``disabled_hooks``) can switch one off.

Failure policy, point by point (a crash is an exception from a handler):

=================  =====================================================================
before_tool        fails closed: the call is denied
after_tool         fails closed: the result is withheld
before_request /   fail open (logged, skipped, noticed) unless the extension is
after_response     ``fail_closed``, which ends the run with an error
on_prompt          fails open
fit_context        fails open (the request is sent as it is)
on_stop, on_error  fail open
recover            fails open: a crashing handler is skipped and the error stands
=================  =====================================================================
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import msgspec

from agentkeel.core.events import Event, Subscriber
from agentkeel.core.provider import ModelRequest, ModelResponse, PromptTooLongError, ProviderError
from agentkeel.core.tools import Tool, ToolOutput

Decision = Literal["allow", "ask", "deny"]
_STRENGTH: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}


class ToolCall(msgspec.Struct):
    id: str
    name: str
    input: dict[str, Any]
    tool: Tool | None
    cwd: Path | None = None  # the session's live working directory (the shell's, after any cd)
    mode: str = ""  # the live permission mode
    # who approved this call before the permission gate (a PreToolUse hook's "allow"): the gate
    # then skips a plain ask, never a deny rule or an always-ask (ask rule, protected path)
    approved_by: str = ""


class Verdict(msgspec.Struct, frozen=True):
    """A before-tool extension's answer. ``None`` instead of a Verdict means no opinion.

    Verdicts compose by strength, never by order: deny > ask > allow. ``ask`` is resolved by
    the extension that owns asking (``resolve_ask``: the permission gate), or denied when
    there is nobody to ask. ``updated_input`` replaces the call's input (and is validated
    and checked again by the later extensions)."""

    decision: Decision
    reason: str = ""
    source: str = ""
    updated_input: dict[str, Any] | None = None

    def stronger_than(self, other: Verdict) -> bool:
        return _STRENGTH[self.decision] > _STRENGTH[other.decision]


class StopInfo(msgspec.Struct, frozen=True):
    last_text: str
    num_turns: int
    continued: bool  # a previous on_stop already made the loop go on (stop_hook_active)


class PromptInfo(msgspec.Struct, frozen=True):
    text: str
    first: bool  # the first prompt of this session (SessionStart context belongs with it)
    source: str = "startup"  # startup | resume | fork | clear | compact


class PromptVerdict(msgspec.Struct, frozen=True):
    """A prompt-submit answer: ``block`` (with its reason) stops the prompt before any request;
    ``context`` blocks are added to the user message, after the prompt text."""

    context: tuple[str, ...] = ()
    block: str | None = None


BeforeRequest = Callable[[ModelRequest], Awaitable[ModelRequest]]
AfterResponse = Callable[[ModelResponse], Awaitable[None]]
BeforeTool = Callable[[ToolCall], Awaitable[Verdict | None]]
AfterTool = Callable[[ToolCall, ToolOutput], Awaitable[ToolOutput]]
OnStop = Callable[[StopInfo], Awaitable[str | None]]  # a string continues the loop with it
OnPrompt = Callable[[PromptInfo], Awaitable[PromptVerdict | None]]
OnError = Callable[[ProviderError], Awaitable[None]]
# a request failed (after the provider's own retries): a repaired request to send instead, or None
Recover = Callable[[ProviderError, ModelRequest, int], Awaitable[ModelRequest | None]]
ResolveAsk = Callable[[ToolCall, Verdict], Awaitable[Verdict]]
# before each request, and once more when the provider refused it as too long (the error is given):
# an event that re-bases the view (a compaction) to append, or None to send the request as it is
FitContext = Callable[[ModelRequest, PromptTooLongError | None], Awaitable[Event | None]]
HideTool = Callable[[Tool], bool]
Lifecycle = Callable[[], Awaitable[None]]


class Extension(msgspec.Struct):
    """A named bundle of loop handlers; leave a point None to not take part in it."""

    name: str
    before_request: BeforeRequest | None = None
    after_response: AfterResponse | None = None
    before_tool: BeforeTool | None = None
    after_tool: AfterTool | None = None
    on_stop: OnStop | None = None
    on_prompt: OnPrompt | None = None
    on_error: OnError | None = None
    fit_context: FitContext | None = None
    recover: Recover | None = None  # session recovery, model fallback (at most MAX_RECOVERIES per request)
    resolve_ask: ResolveAsk | None = None
    hide_tool: HideTool | None = None
    tools: list[Tool] = msgspec.field(default_factory=list)  # registered with the session's tools
    subscribers: list[Subscriber] = msgspec.field(default_factory=list)  # attached to the event bus
    start: Lifecycle | None = None  # awaited (with a timeout) before the first request
    start_timeout_s: float | None = None  # that timeout, when the extension owns one (MCP_TIMEOUT)
    close: Lifecycle | None = None  # awaited at the end of the session
    required: bool = False  # a safety extension settings cannot disable (the permission gate)
    fail_closed: bool = False  # before_request/after_response: a crash ends the run


class Extensions(msgspec.Struct):
    """The ordered list of extensions the loop consults."""

    items: list[Extension] = msgspec.field(default_factory=list)

    def add(self, ext: Extension, *, before: str | None = None) -> None:
        if any(e.name == ext.name for e in self.items):
            raise ValueError(f"an extension named {ext.name!r} is already registered")
        index = next((i for i, e in enumerate(self.items) if e.name == before), len(self.items))
        self.items.insert(index, ext)

    def remove(self, name: str) -> bool:
        before = len(self.items)
        self.items = [e for e in self.items if e.name != name]
        return len(self.items) != before

    def get(self, name: str) -> Extension | None:
        return next((e for e in self.items if e.name == name), None)

    def names(self) -> list[str]:
        return [e.name for e in self.items]

    def __iter__(self) -> Iterator[Extension]:
        return iter(tuple(self.items))

    def hides(self, tool: Tool) -> bool:
        return any(e.hide_tool is not None and e.hide_tool(tool) for e in self.items)

    def resolver(self) -> ResolveAsk | None:
        return next((e.resolve_ask for e in self.items if e.resolve_ask is not None), None)


class LifecycleResult(msgspec.Struct, frozen=True):
    """What a subsystem learns from firing a lifecycle event (PreCompact, SubagentStart, ...).

    ``blocked`` with ``reason``: a handler asked to stop what the event announces (a
    SubagentStop hook that wants the child to keep going, a PreCompact hook that refuses);
    ``context``: text handlers asked to add to the model's context."""

    blocked: bool = False
    reason: str = ""
    context: tuple[str, ...] = ()


class LifecyclePoint:
    """The session's lifecycle-event point, a service (``services.get(LifecyclePoint)``).

    Subsystems that own an event of SPEC section 4 (compaction, subagents, skills, instruction
    loading, configuration and file watching) fire it here and know nothing of what listens.
    This base class is what a session without hooks gets: nobody listens. The hooks extension
    puts its dispatcher-backed subclass in the session's services when hooks are configured."""

    def listens(self, event: str) -> bool:
        return False

    async def fire(self, event: str, fields: dict[str, Any], *, match: str | None = None) -> LifecycleResult:
        return LifecycleResult()
