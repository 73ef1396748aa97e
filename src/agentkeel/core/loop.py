"""The turn engine: build request -> stream -> run tools -> append -> repeat.

Everything else (permissions, hooks, result guard, memory, UI) attaches through
:class:`~agentkeel.core.extensions.Extensions` and the :class:`~agentkeel.core.events.EventBus`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from agentkeel.core.events import (
    AssistantMessage,
    EventBus,
    Interrupted,
    RequestStarted,
    RunFinished,
    TextDelta,
    ThinkingDelta,
    ToolFinished,
    ToolResults,
    ToolStarted,
    UserMessage,
)
from agentkeel.core.extensions import Extensions, StopInfo, ToolCall, Verdict
from agentkeel.core.provider import ModelRequest, ModelResponse, Provider, ProviderError, TextChunk
from agentkeel.core.retry import RetryPolicy, stream_with_retry
from agentkeel.core.tools import Services, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry
from agentkeel.core.types import Message, ToolResultBlock, ToolUseBlock, Usage
from agentkeel.core.view import INTERRUPTED_RESULT

log = logging.getLogger("agentkeel.loop")
T = TypeVar("T")

Subtype = Literal["success", "error_max_turns", "error_max_budget_usd", "error_during_execution", "interrupted"]


@dataclass
class LoopConfig:
    model: str
    system: str = ""
    max_tokens: int = 8192
    max_turns: int | None = None
    max_budget_usd: float | None = None
    thinking_budget: int | None = None
    default_tool_timeout_s: float = 600.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    cost: Callable[[Usage], float] = lambda _usage: 0.0


@dataclass
class RunResult:
    subtype: Subtype
    result: str
    num_turns: int
    usage: Usage
    total_cost_usd: float
    duration_ms: int
    error: str = ""

    @property
    def is_error(self) -> bool:
        return self.subtype != "success"


class _Interrupt(Exception):
    pass


class Agent:
    """One conversation with one model. ``run`` drives a prompt to a stop."""

    def __init__(
        self,
        provider: Provider,
        tools: ToolRegistry,
        config: LoopConfig,
        *,
        bus: EventBus | None = None,
        extensions: Extensions | None = None,
        context: ToolContext,
        messages: list[Message] | None = None,
    ) -> None:
        self.provider = provider
        self.tools = tools
        self.config = config
        self.bus = bus or EventBus()
        self.ext = extensions or Extensions()
        self.context = context
        self.messages: list[Message] = list(messages or [])
        self.usage = Usage()
        self.cost_usd = 0.0
        self._inflight: asyncio.Future[object] | None = None
        self._interrupted = False

    @property
    def services(self) -> Services:
        return self.context.services

    @property
    def interrupted(self) -> bool:
        return self._interrupted

    def interrupt(self) -> None:
        """Stop the current request or tool batch; the transcript stays valid."""
        self._interrupted = True
        if self._inflight is not None and not self._inflight.done():
            self._inflight.cancel()

    # --- the loop ----------------------------------------------------------------------

    async def run(self, prompt: str | Message) -> RunResult:
        started = time.monotonic()
        self._interrupted = False
        message = prompt if isinstance(prompt, Message) else Message.user(prompt)
        self._append(UserMessage(message=message))
        turns, last_text, continued = 0, "", False
        try:
            while True:
                if self.config.max_turns is not None and turns >= self.config.max_turns:
                    return self._finish("error_max_turns", last_text, turns, started)
                if self.config.max_budget_usd is not None and self.cost_usd >= self.config.max_budget_usd:
                    return self._finish("error_max_budget_usd", last_text, turns, started)
                response = await self._request(turns)
                turns += 1
                last_text = response.message.text() or last_text
                uses = response.message.tool_uses()
                if uses:
                    await self._run_tools(uses)
                    continue
                go_on = await self._on_stop(StopInfo(last_text, turns, continued))
                if go_on is None:
                    return self._finish("success", last_text, turns, started)
                continued = True
                self._append(UserMessage(message=Message.user(go_on)))
        except _Interrupt:
            return self._finish("interrupted", last_text, turns, started, error="interrupted by user")
        except ProviderError as err:
            return self._finish("error_during_execution", last_text, turns, started, error=str(err))

    async def _request(self, turn: int) -> ModelResponse:
        request = ModelRequest(
            model=self.config.model,
            system=self.config.system,
            messages=self.messages,
            tools=[t.spec() for t in self._visible_tools()],
            max_tokens=self.config.max_tokens,
            thinking_budget=self.config.thinking_budget,
        )
        for hook in self.ext.before_request:
            request = await hook(request)
        self.bus.emit(RequestStarted(turn=turn + 1, model=request.model, message_count=len(request.messages)))
        response = await self._guard(self._stream(request), during="request")
        for after in self.ext.after_response:
            await after(response)
        self.usage = self.usage + response.usage
        cost = self.config.cost(response.usage)
        self.cost_usd += cost
        self._append(
            AssistantMessage(
                message=response.message,
                model=response.model or request.model,
                stop_reason=response.stop_reason,
                usage=response.usage,
                cost_usd=cost,
            )
        )
        return response

    async def _stream(self, request: ModelRequest) -> ModelResponse:
        async for chunk in stream_with_retry(self.provider, request, self.config.retry, self.bus.emit):
            if isinstance(chunk, TextChunk):
                self.bus.emit(TextDelta(text=chunk.text) if chunk.kind == "text" else ThinkingDelta(text=chunk.text))
            else:
                return chunk
        raise ProviderError("stream_broken", "the response ended without a final message")

    # --- tools -------------------------------------------------------------------------

    async def _run_tools(self, uses: list[ToolUseBlock]) -> None:
        results: dict[str, ToolResultBlock] = {}
        try:
            for batch in self._batches(uses):
                await self._guard(self._run_batch(batch, results), during="tools")
        finally:
            blocks = [
                results.get(u.id) or ToolResultBlock(tool_use_id=u.id, content=INTERRUPTED_RESULT, is_error=True)
                for u in uses
            ]
            self._append(ToolResults(message=Message(role="user", content=list(blocks))))

    async def _run_batch(self, batch: list[ToolUseBlock], results: dict[str, ToolResultBlock]) -> None:
        gated = [await self._gate(use) for use in batch]

        async def one(call: ToolCall, verdict: Verdict) -> None:
            block = await self._execute(call, verdict)
            results[block.tool_use_id] = block

        await asyncio.gather(*(one(call, verdict) for call, verdict in gated))

    def _batches(self, uses: list[ToolUseBlock]) -> list[list[ToolUseBlock]]:
        """Consecutive read-only calls run together; every other call runs alone, in order."""
        batches: list[list[ToolUseBlock]] = []
        for use in uses:
            tool = self.tools.get(use.name)
            read_only = tool is not None and tool.read_only
            if read_only and batches and self._all_read_only(batches[-1]):
                batches[-1].append(use)
            else:
                batches.append([use])
        return batches

    def _all_read_only(self, batch: list[ToolUseBlock]) -> bool:
        return all((t := self.tools.get(u.name)) is not None and t.read_only for u in batch)

    async def _gate(self, use: ToolUseBlock) -> tuple[ToolCall, Verdict]:
        call = ToolCall(id=use.id, name=use.name, input=dict(use.input), tool=self.tools.get(use.name))
        if call.tool is None:
            return call, Verdict("deny", f"No such tool: {use.name}. Available: {self._tool_names()}")
        verdict = Verdict("allow")
        for check in self.ext.before_tool:
            try:
                answer = await check(call)
            except Exception as exc:  # fail closed: a crashing check denies
                log.exception("before_tool check failed for %s", call.name)
                return call, Verdict("deny", f"Permission check failed ({type(exc).__name__}); denied")
            if answer is None:
                continue
            if answer.decision == "deny":
                return call, answer
            if answer.updated_input is not None:
                call.input = dict(answer.updated_input)
            verdict = answer
        return call, verdict

    async def _execute(self, call: ToolCall, verdict: Verdict) -> ToolResultBlock:
        started = time.monotonic()
        if verdict.decision == "deny":
            output = ToolOutput(verdict.reason or f"Permission to use {call.name} was denied.", is_error=True)
        else:
            assert call.tool is not None
            self.bus.emit(ToolStarted(tool_use_id=call.id, name=call.name, input=call.input))
            output = await self._invoke(call)
        for after in self.ext.after_tool:
            try:
                output = await after(call, output)
            except Exception:  # fail closed: never pass on a result a guard could not check
                log.exception("after_tool hook failed for %s", call.name)
                output = ToolOutput("[result withheld: post-processing failed]", is_error=True)
        duration = int((time.monotonic() - started) * 1000)
        summary = output.text()[:200]
        self.bus.emit(
            ToolFinished(
                tool_use_id=call.id, name=call.name, is_error=output.is_error, duration_ms=duration, summary=summary
            )
        )
        return ToolResultBlock(tool_use_id=call.id, content=output.content or "", is_error=output.is_error)

    async def _invoke(self, call: ToolCall) -> ToolOutput:
        tool = call.tool
        assert tool is not None
        timeout = tool.timeout_s if tool.timeout_s is not None else self.config.default_tool_timeout_s
        ctx = ToolContext(
            cwd=self.context.cwd,
            session_id=self.context.session_id,
            services=self.context.services,
            emit=self.bus.emit,
            tool_use_id=call.id,
            additional_dirs=self.context.additional_dirs,
            env=self.context.env,
            scratch_dir=self.context.scratch_dir,
            hidden_path=self.context.hidden_path,
        )
        try:
            args = tool.parse(call.input)
            return await asyncio.wait_for(tool.run(args, ctx), timeout)
        except ToolError as err:
            return ToolOutput(str(err), is_error=True)
        except TimeoutError:
            return ToolOutput(f"{tool.name} timed out after {timeout:g}s", is_error=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("tool %s crashed", tool.name)
            return ToolOutput(f"{tool.name} failed: {type(exc).__name__}: {exc}", is_error=True)

    # --- helpers -----------------------------------------------------------------------

    async def _guard(self, awaitable: Awaitable[T], *, during: Literal["request", "tools"]) -> T:
        """Await as an interruptible unit: ``interrupt()`` cancels it and we raise _Interrupt."""
        if self._interrupted:
            self.bus.emit(Interrupted(during=during))
            raise _Interrupt
        task: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        self._inflight = task  # type: ignore[assignment]
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self.interrupted and (current is None or current.cancelling() == 0):
                self.bus.emit(Interrupted(during=during))
                raise _Interrupt from None
            raise
        finally:
            self._inflight = None

    def _visible_tools(self) -> list[Tool]:
        hide = self.ext.hide_tool
        return self.tools.visible(lambda t: any(h(t) for h in hide))

    def _tool_names(self) -> str:
        return ", ".join(t.name for t in self.tools.list())

    async def _on_stop(self, info: StopInfo) -> str | None:
        for hook in self.ext.on_stop:
            try:
                message = await hook(info)
            except Exception:
                log.exception("on_stop hook failed")
                continue
            if message:
                return message
        return None

    def _append(self, event: UserMessage | AssistantMessage | ToolResults) -> None:
        self.messages.append(event.message)
        self.bus.emit(event)

    def _finish(self, subtype: Subtype, text: str, turns: int, started: float, error: str = "") -> RunResult:
        duration = int((time.monotonic() - started) * 1000)
        result = RunResult(
            subtype,
            text if subtype == "success" else (error or text),
            turns,
            self.usage,
            round(self.cost_usd, 6),
            duration,
            error,
        )
        self.bus.emit(
            RunFinished(
                subtype=subtype,
                is_error=result.is_error,
                result=result.result,
                num_turns=turns,
                duration_ms=duration,
                usage=self.usage,
                total_cost_usd=result.total_cost_usd,
            )
        )
        return result
