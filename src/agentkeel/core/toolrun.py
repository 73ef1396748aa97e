"""The tool half of the agent loop: a reply's tool calls are batched, gated (validation, prechecks,
``before_tool`` extensions, asks), run with a timeout, passed through ``after_tool`` and appended
one result at a time. :class:`~agentkeel.core.loop.Agent` inherits it from :class:`ToolRunner`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal, TypeVar

from agentkeel.core.events import Event, EventBus, SinkFailed, ToolFinished, ToolResults, ToolStarted
from agentkeel.core.extensions import Extensions, ToolCall, Verdict
from agentkeel.core.run import LoopConfig, Refusal, RunStopped, Stop
from agentkeel.core.tools import Services, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, Workdir
from agentkeel.core.types import ContentBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock
from agentkeel.core.view import INTERRUPTED_RESULT

log = logging.getLogger("agentkeel.loop")
T = TypeVar("T")


class ToolRunner:
    """The tool-running methods of :class:`~agentkeel.core.loop.Agent`, which sets these attributes."""

    tools: ToolRegistry
    config: LoopConfig
    bus: EventBus
    ext: Extensions
    context: ToolContext
    mode: Callable[[], str]
    _refused: list[Refusal]

    if TYPE_CHECKING:

        @property
        def services(self) -> Services: ...

        async def _guard(self, awaitable: Awaitable[T], *, during: Literal["request", "tools", "idle"]) -> T: ...

        def append(self, event: Event) -> Event: ...

    async def _run_tools(self, uses: list[ToolUseBlock]) -> None:
        """Each result is appended (and so persisted) the moment its tool finishes: a crash in
        the middle of a batch loses no finished tool's output."""
        done: set[str] = set()
        try:
            for batch in self._batches(uses):
                await self._guard(self._run_batch(batch, done), during="tools")
        finally:
            left = [u for u in uses if u.id not in done]
            if left:
                blocks: list[ContentBlock] = [
                    ToolResultBlock(tool_use_id=u.id, content=INTERRUPTED_RESULT, is_error=True) for u in left
                ]
                self.append(ToolResults(message=Message(role="user", content=blocks)))

    async def _run_batch(self, batch: list[ToolUseBlock], done: set[str]) -> None:
        gated: list[tuple[ToolCall, Verdict]] = []
        for use in batch:
            call, verdict = await self._gate(use)
            if verdict.decision != "allow":  # recorded as decided, even if the batch is interrupted next
                self._refused.append(Refusal(call.id, call.name, dict(call.input), verdict.source, verdict.reason))
            gated.append((call, verdict))

        async def one(call: ToolCall, verdict: Verdict) -> None:
            block, notes = await self._execute(call, verdict)
            done.add(block.tool_use_id)
            self.append(ToolResults(message=Message(role="user", content=[block, *notes])))

        calls = [asyncio.ensure_future(one(call, verdict)) for call, verdict in gated]
        try:
            await asyncio.gather(*calls)
        finally:  # gather ends at the first call to fail or stop: an interrupt waits for each to stop
            left = [c for c in calls if not c.done()]
            for c in left:
                if not c.cancelling():
                    c.cancel()
            if left:
                await asyncio.wait(left)

    def _batches(self, uses: list[ToolUseBlock]) -> list[list[ToolUseBlock]]:
        """Consecutive concurrency-safe calls run together; every other call runs alone, in order."""
        batches: list[list[ToolUseBlock]] = []
        for use in uses:
            if self._parallel(use) and batches and all(self._parallel(u) for u in batches[-1]):
                batches[-1].append(use)
            else:
                batches.append([use])
        return batches

    def _parallel(self, use: ToolUseBlock) -> bool:
        tool = self.tools.get(use.name)
        return tool is not None and tool.parallel

    async def _gate(self, use: ToolUseBlock) -> tuple[ToolCall, Verdict]:
        """validate -> before_tool extensions (policy, hooks) -> one verdict, the strongest.

        Extensions see the validated input and the session's live cwd and mode. A crash denies.
        An ``ask`` goes to the extension that resolves asks, or is denied with nobody to ask."""
        workdir = self.services.find(Workdir)
        call = ToolCall(
            id=use.id,
            name=use.name,
            input=dict(use.input),
            tool=self.tools.get(use.name),
            cwd=(workdir.path if workdir is not None and workdir.path is not None else self.context.cwd),
            mode=self.mode(),
        )
        if call.tool is None:
            return call, Verdict("deny", f"No such tool: {use.name}. Available: {self._tool_names()}", "unknown-tool")
        invalid = _invalid(call.tool, call.input)
        if invalid:
            return call, Verdict("deny", invalid, "validation")
        invalid = await call.tool.precheck(call.input, self._context(call))
        if invalid:  # a call that cannot succeed fails with the tool's error, before anyone is asked
            return call, Verdict("deny", invalid, "validation")
        verdict = Verdict("allow")
        for ext in self.ext:
            if ext.before_tool is None:
                continue
            try:
                answer = await ext.before_tool(call)
            except SinkFailed:  # the log broke (the gate records its decision): the run stops
                raise
            except RunStopped as stop:
                raise Stop(str(stop)) from None
            except Exception as exc:  # fail closed: a crashing check denies
                log.exception("before_tool extension %s failed for %s", ext.name, call.name)
                return call, Verdict("deny", f"Permission check failed ({type(exc).__name__}); denied", ext.name)
            if answer is None:
                continue
            if answer.updated_input is not None and answer.decision != "deny":
                invalid = _invalid(call.tool, answer.updated_input)
                if invalid:
                    return call, Verdict("deny", f"{ext.name} changed the input: {invalid}", ext.name)
                call.input = dict(answer.updated_input)
            if answer.decision == "deny":
                return call, answer
            if answer.stronger_than(verdict) or verdict.decision == "allow":
                verdict = Verdict(answer.decision, answer.reason, answer.source or ext.name)
        if verdict.decision == "ask":
            verdict = await self._resolve_ask(call, verdict)
        return call, verdict

    async def _resolve_ask(self, call: ToolCall, verdict: Verdict) -> Verdict:
        resolve = self.ext.resolver()
        if resolve is None:
            return Verdict("deny", f"{verdict.reason or call.name + ' asks for approval'}; nobody to ask", "ask")
        try:
            answer = await resolve(call, verdict)
        except SinkFailed:
            raise
        except Exception:
            log.exception("resolving an ask for %s failed", call.name)
            return Verdict("deny", "asking for permission failed; denied for safety", "ask")
        return answer if answer.decision != "ask" else Verdict("deny", answer.reason or "not approved", "ask")

    async def _execute(self, call: ToolCall, verdict: Verdict) -> tuple[ToolResultBlock, list[TextBlock]]:
        started = time.monotonic()
        if verdict.decision != "allow":
            output = ToolOutput(verdict.reason or f"Permission to use {call.name} was denied.", is_error=True)
        else:
            assert call.tool is not None
            self.bus.emit(ToolStarted(tool_use_id=call.id, name=call.name, input=call.input))
            output = await self._invoke(call)
        for ext in self.ext:
            if ext.after_tool is None:
                continue
            try:
                notes = output.notes
                output = await ext.after_tool(call, output)
                if notes and not output.notes:  # an extension that rebuilt the output keeps the notes
                    output.notes = notes
            except SinkFailed:  # an extension's event could not be logged: the run stops
                raise
            except RunStopped as stop:
                raise Stop(str(stop)) from None
            except Exception:  # fail closed: never pass on a result a guard could not check
                log.exception("after_tool extension %s failed for %s", ext.name, call.name)
                output = ToolOutput("[result withheld: post-processing failed]", is_error=True)
        duration = int((time.monotonic() - started) * 1000)
        self.bus.emit(
            ToolFinished(
                tool_use_id=call.id,
                name=call.name,
                is_error=output.is_error,
                duration_ms=duration,
                summary=output.text()[:200],
                input=call.input,
                metadata=output.metadata,
            )
        )
        block = ToolResultBlock(tool_use_id=call.id, content=output.content or "", is_error=output.is_error)
        return block, [TextBlock(text=n) for n in output.notes]

    async def _invoke(self, call: ToolCall) -> ToolOutput:
        tool = call.tool
        assert tool is not None
        timeout = tool.timeout_s if tool.timeout_s is not None else self.config.default_tool_timeout_s
        ctx = self._context(call)
        try:
            args = tool.parse(call.input)
            return await asyncio.wait_for(tool.run(args, ctx), timeout)
        except ToolError as err:
            return ToolOutput(str(err), is_error=True)
        except TimeoutError:
            return ToolOutput(f"{tool.name} timed out after {timeout:g}s", is_error=True)
        except (asyncio.CancelledError, SinkFailed):
            raise
        except Exception as exc:
            log.exception("tool %s crashed", tool.name)
            return ToolOutput(f"{tool.name} failed: {type(exc).__name__}: {exc}", is_error=True)

    def _context(self, call: ToolCall) -> ToolContext:
        return ToolContext(
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

    def _tool_names(self) -> str:
        return ", ".join(t.name for t in self.tools.list())


def _invalid(tool: Tool, raw: dict[str, object]) -> str:
    """Why the input does not fit the tool's schema, or ''."""
    try:
        tool.parse(dict(raw))
    except ToolError as err:
        return str(err)
    return ""
