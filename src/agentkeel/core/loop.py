"""The turn engine: build request -> stream -> run tools -> append -> repeat.

Everything else (permissions, hooks, result guard, memory, UI) attaches through
:class:`~agentkeel.core.extensions.Extensions` and the :class:`~agentkeel.core.events.EventBus`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from contextlib import aclosing
from typing import Literal, TypeVar

from agentkeel.core.events import (
    AssistantMessage,
    Event,
    EventBus,
    Interrupted,
    Notice,
    RequestStarted,
    RunFinished,
    SinkFailed,
    TextDelta,
    ThinkingDelta,
    UserMessage,
)
from agentkeel.core.extensions import Extensions, PromptInfo, StopInfo
from agentkeel.core.provider import (
    ModelRequest,
    ModelResponse,
    PromptTooLongError,
    Provider,
    ProviderError,
    TextChunk,
)
from agentkeel.core.retry import stream_with_retry
from agentkeel.core.run import LoopConfig, Refusal, RunResult, RunStopped, Stop, Subtype
from agentkeel.core.toolrun import ToolRunner
from agentkeel.core.tools import Services, Tool, ToolContext, ToolRegistry
from agentkeel.core.types import ContentBlock, Message, TextBlock, ToolUseBlock, Usage, replace
from agentkeel.core.view import ViewBuilder

log = logging.getLogger("agentkeel.loop")
T = TypeVar("T")

MAX_RECOVERIES = 3  # repaired re-sends of one request (session recovery, model fallback)
INTERRUPTED_BY_USER = "interrupted by user"
# what Claude Code 2.1.328 puts in the conversation after a reply the user interrupted (the partial
# reply stays before it), so the model knows its answer was cut off
INTERRUPTED_MARK = "[Request interrupted by user]"


class _Interrupt(Exception):
    pass


class Agent(ToolRunner):
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
        events: list[Event] | None = None,
        mode: Callable[[], str] | None = None,
    ) -> None:
        self.provider = provider
        self.tools = tools
        self.config = config
        self.bus = bus or EventBus()
        self.ext = extensions or Extensions()
        self.context = context
        self.view = ViewBuilder()  # the model's messages, derived from the events and nothing else
        for event in events or ():
            self.view.add_event(event)
        self.mode = mode or (lambda: "")
        self.prompts = 0
        self.usage = Usage()
        self.cost_usd = 0.0
        self._inflight: asyncio.Future[object] | None = None
        self._shown: list[Tool] | None = None  # the tools shown, while one request is being made
        self._interrupted = False
        self._interrupt_reason = INTERRUPTED_BY_USER
        self._refused: list[Refusal] = []
        self._partial: list[str] = []  # the text streamed so far in the request in flight
        self._stop_reason: str | None = None
        self._during = ""

    @property
    def services(self) -> Services:
        return self.context.services

    @property
    def messages(self) -> list[Message]:
        """What the next request will carry (before ``before_request`` extensions)."""
        return self.view.messages()

    @property
    def interrupted(self) -> bool:
        return self._interrupted

    def interrupt(self, reason: str = "") -> None:
        """Stop the current request or tool batch; the transcript stays valid. ``reason`` is the
        run's error (default "interrupted by user"; "output closed" when the reader went away)."""
        self._interrupted = True
        self._interrupt_reason = reason or INTERRUPTED_BY_USER
        if self._inflight is not None and not self._inflight.done():
            self._inflight.cancel()

    # --- the loop ----------------------------------------------------------------------

    async def run(self, prompt: str | Message, *, source: str = "startup") -> RunResult:
        started = time.monotonic()
        self._interrupted = False
        self._interrupt_reason = INTERRUPTED_BY_USER
        self._refused = []
        self._stop_reason, self._during = None, ""
        turns, last_text, continued = 0, "", False
        try:
            message = await self._submit(prompt if isinstance(prompt, Message) else Message.user(prompt), source)
            self.append(UserMessage(message=message))
            while True:
                if self.config.max_turns is not None and turns >= self.config.max_turns:
                    why = f"reached the maximum number of turns ({self.config.max_turns})"
                    return self._finish("error_max_turns", last_text, turns, started, error=why)
                if self.config.max_budget_usd is not None and self.cost_usd >= self.config.max_budget_usd:
                    why = f"reached the maximum budget (${self.config.max_budget_usd:g}; spent ${self.cost_usd:.4f})"
                    return self._finish("error_max_budget_usd", last_text, turns, started, error=why)
                response = await self._send(turns)
                self._stop_reason = response.stop_reason
                turns += 1
                last_text = response.message.text() or last_text
                uses = response.message.tool_uses()
                if uses:
                    await self._run_tools(uses)
                    continue
                go_on = await self._guard(self._on_stop(StopInfo(last_text, turns, continued)), during="idle")
                if go_on is None:
                    return self._finish("success", last_text, turns, started)
                continued = True
                self.append(UserMessage(message=Message.user(go_on)))
        except _Interrupt:
            self._keep_interrupted()
            return self._finish("interrupted", last_text, turns, started, error=self._interrupt_reason)
        except ProviderError as err:
            await self._on_error(err)
            result = self._finish("error_during_execution", last_text, turns, started, error=str(err))
            result.api_error_status, result.api_error = err.status, True
            return result
        except Stop as stop:
            return self._finish("error_during_execution", last_text, turns, started, error=stop.message)
        except SinkFailed as failed:
            return self._finish("error_during_execution", last_text, turns, started, error=str(failed))

    def _keep_interrupted(self) -> None:
        """A reply the user interrupted stays in the conversation as far as it came, followed by
        Claude Code's ``[Request interrupted by user]``: the next prompt is a turn of its own,
        not merged into the one that was cut off."""
        if self._during != "request" or self._interrupt_reason != INTERRUPTED_BY_USER:
            return
        text = "".join(self._partial)
        self._partial = []
        try:
            if text:
                self.append(
                    AssistantMessage(
                        message=Message(role="assistant", content=[TextBlock(text=text)]), model=self.config.model
                    )
                )
            self.append(UserMessage(message=Message.user(INTERRUPTED_MARK)))
        except SinkFailed:
            pass  # the log broke: the run's result says interrupted all the same

    def failed(self, error: str) -> RunResult:
        """The result of a run that could not start (its session could not be written)."""
        return RunResult("error_during_execution", error, 0, self.usage, round(self.cost_usd, 6), 0, error)

    async def _submit(self, message: Message, source: str) -> Message:
        """The prompt-submit point: extensions may block the prompt or add context blocks."""
        self.prompts += 1
        info = PromptInfo(message.text(), first=self.prompts == 1, source=source)
        extra: list[ContentBlock] = []
        for ext in self.ext:
            if ext.on_prompt is None:
                continue
            try:
                answer = await ext.on_prompt(info)
            except SinkFailed:
                raise
            except RunStopped as stop:
                raise Stop(str(stop)) from None
            except Exception:
                log.exception("prompt extension %s failed", ext.name)
                continue
            if answer is None:
                continue
            if answer.block is not None:
                raise Stop(f"prompt blocked by {ext.name}: {answer.block}")
            extra += [TextBlock(text=c) for c in answer.context if c]
        return Message(role=message.role, content=[*message.content, *extra]) if extra else message

    def request(self) -> ModelRequest:
        """What the next request would carry now (before the ``before_request`` extensions)."""
        return ModelRequest(
            model=self.config.model,
            system=self.config.system,
            messages=self.messages,
            tools=[t.spec() for t in (self._visible_tools() if self._shown is None else self._shown)],
            max_tokens=self.config.max_tokens,
            thinking_budget=self.config.thinking_budget,
        )

    async def _send(self, turn: int) -> ModelResponse:
        """One model request. The context point may compact first; when the provider refuses the
        request as too long it compacts once more and the request is rebuilt and sent again. What
        compaction cannot fix (and every other failure) goes to the ``recover`` extensions."""
        self._shown = self._visible_tools()  # asked once for the request's builds
        try:
            await self._fit(None)
            request = await self._prepared()
        finally:
            self._shown = None
        self.bus.emit(RequestStarted(turn=turn + 1, model=request.model, message_count=len(request.messages)))
        attempt = 0
        compacted = False
        while True:
            try:
                response = await self._guard(self._stream(request), during="request")
                break
            except ProviderError as err:
                attempt += 1
                if isinstance(err, PromptTooLongError) and not compacted and await self._fit(err):
                    compacted = True
                    request = await self._prepared()
                    continue
                request = await self._recover(err, request, attempt)
        return await self._answered(request, response)

    async def _fit(self, error: PromptTooLongError | None) -> bool:
        changed = False
        for ext in self.ext:
            if ext.fit_context is not None:
                fitted = self._guard(ext.fit_context(self.request(), error), during="request")
                event = await self._contained(ext.name, False, fitted, None)
                if event is not None:
                    self.append(event)
                    changed = True
        return changed

    async def _prepared(self) -> ModelRequest:
        request = self.request()
        for ext in self.ext:
            if ext.before_request is not None:
                request = await self._contained(ext.name, ext.fail_closed, ext.before_request(request), request)
        return request

    async def _answered(self, request: ModelRequest, response: ModelResponse) -> ModelResponse:
        response = _unique_tool_ids(response, self.view.tool_ids)
        for ext in self.ext:
            if ext.after_response is not None:
                await self._contained(ext.name, ext.fail_closed, ext.after_response(response), None)
        self.usage = self.usage + response.usage
        cost = self.config.cost(response.usage)
        self.cost_usd += cost
        self.append(
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
        self._partial = []
        # closed here, not left to the garbage collector (a callback and a wake-up of the loop per request)
        async with aclosing(stream_with_retry(self.provider, request, self.config.retry, self.bus.emit)) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, TextChunk):
                    if chunk.kind == "text":
                        self._partial.append(chunk.text)
                    self.bus.emit((TextDelta if chunk.kind == "text" else ThinkingDelta)(text=chunk.text))
                else:
                    self._partial = []
                    return chunk
        raise ProviderError("stream_broken", "the response ended without a final message")

    async def _contained(self, name: str, fail_closed: bool, awaitable: Awaitable[T], fallback: T) -> T:
        """Run a request/response extension under its failure policy."""
        try:
            return await awaitable
        except (asyncio.CancelledError, ProviderError, _Interrupt, Stop, SinkFailed):
            raise
        except RunStopped as stop:
            raise Stop(str(stop)) from None
        except Exception as exc:
            log.exception("extension %s failed", name)
            if fail_closed:
                raise Stop(f"extension {name} failed ({type(exc).__name__}: {exc})") from None
            self.bus.emit(Notice(level="warning", message=f"extension {name} failed and was skipped: {exc}"))
            return fallback

    async def _recover(self, err: ProviderError, request: ModelRequest, attempt: int) -> ModelRequest:
        """A failed request: the first ``recover`` extension with a repaired request wins; with
        none (or after MAX_RECOVERIES) the error stands."""
        if attempt <= MAX_RECOVERIES:
            for ext in self.ext:
                if ext.recover is None:
                    continue
                try:
                    repaired = await ext.recover(err, request, attempt)
                except SinkFailed:
                    raise
                except Exception:
                    log.exception("recover extension %s failed", ext.name)
                    continue
                if repaired is not None:
                    return repaired
        raise err

    async def _on_error(self, err: ProviderError) -> None:
        for ext in self.ext:
            if ext.on_error is None:
                continue
            try:
                await ext.on_error(err)
            except Exception:
                log.exception("on_error extension %s failed", ext.name)

    # --- helpers -----------------------------------------------------------------------

    async def _guard(self, awaitable: Awaitable[T], *, during: Literal["request", "tools", "idle"]) -> T:
        """Await as an interruptible unit: ``interrupt()`` cancels it and we raise _Interrupt."""
        if self._interrupted:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()  # never started: no "coroutine was never awaited" warning
            self._during = during
            self.bus.emit(Interrupted(during=during))
            raise _Interrupt
        task: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        self._inflight = task  # type: ignore[assignment]
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self.interrupted and (current is None or current.cancelling() == 0):
                self._during = during
                self.bus.emit(Interrupted(during=during))
                raise _Interrupt from None
            raise
        finally:
            self._inflight = None

    def _visible_tools(self) -> list[Tool]:
        hiders = [e.hide_tool for e in self.ext if e.hide_tool is not None]  # (``Extensions.hides``, asked once)
        if not hiders:
            return self.tools.visible()
        return self.tools.visible(lambda tool: any(hide(tool) for hide in hiders))

    async def _on_stop(self, info: StopInfo) -> str | None:
        for ext in self.ext:
            if ext.on_stop is None:
                continue
            try:
                message = await ext.on_stop(info)
            except SinkFailed:
                raise
            except RunStopped as stop:
                raise Stop(str(stop)) from None
            except Exception:
                log.exception("on_stop extension %s failed", ext.name)
                continue
            if message:
                return message
        return None

    def append(self, event: Event) -> Event:
        """The one way into the conversation: the bus transforms the event (redaction), the log
        takes it (or the run stops), and the view is built from exactly what was logged, which
        is returned."""
        logged = self.bus.publish(event)
        self.view.add_event(logged)
        return logged

    def _finish(self, subtype: Subtype, text: str, turns: int, started: float, error: str = "") -> RunResult:
        duration = int((time.monotonic() - started) * 1000)
        limit = subtype in ("error_max_turns", "error_max_budget_usd")  # the answer so far stays the result
        result = RunResult(
            subtype,
            text if subtype == "success" or limit else (error or text),
            turns,
            self.usage,
            round(self.cost_usd, 6),
            duration,
            error,
            list(self._refused),
            stop_reason=self._stop_reason,
            interrupted_during=self._during if subtype == "interrupted" else "",
        )
        try:
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
        except SinkFailed as failed:  # the log broke at the very end: the run did not succeed
            result.subtype, result.error = "error_during_execution", str(failed)
            result.result = result.error
        return result


def _unique_tool_ids(response: ModelResponse, taken: Collection[str] = ()) -> ModelResponse:
    """Providers reject a conversation that repeats a tool_use id, and one result would answer
    both: an id repeated within the response, or already used earlier in the session (``taken``;
    a model or proxy that numbers its calls per response), gets a suffix before the message is
    ever appended, so the log, its results and every reader see unique ids."""
    uses = response.message.tool_uses()
    if len({u.id for u in uses}) == len(uses) and not any(u.id in taken for u in uses):
        return response
    seen: set[str] = set(taken)
    blocks: list[ContentBlock] = []
    for block in response.message.content:
        if isinstance(block, ToolUseBlock):
            new_id, n = block.id, 1
            while new_id in seen:
                n += 1
                new_id = f"{block.id}_{n}"
            seen.add(new_id)
            if new_id != block.id:
                block = replace(block, id=new_id)
        blocks.append(block)
    message = Message(role=response.message.role, content=blocks)
    return ModelResponse(message, response.stop_reason, response.usage, response.model)
