"""The session's context manager: a service (``services.get(ContextManager)``) and one extension.

It builds the system prompt, keeps the accounting, tracks the working state, injects nested
instructions and path rules when files are touched, and compacts: before a request when the
context passes the threshold (or would not fit), and when the provider refuses a request as too
long (the loop then retries it once). Each compaction is a :class:`Compaction` event appended to
the log; PreCompact / PostCompact and InstructionsLoaded go through the lifecycle point.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from agentkeel.config.settings import ContextSettings
from agentkeel.context.builder import PromptBuilder
from agentkeel.context.compaction import (
    COMPACT_MARK,
    SUMMARY_SYSTEM,
    WHOLE_REQUEST,
    Plan,
    Summariser,
    SummaryFailed,
    compact,
)
from agentkeel.context.instructions import ImportPolicy, InstructionFile, Instructions, render
from agentkeel.context.state import ResumedView, WorkingState, named_path, touches_files
from agentkeel.context.styles import find_style
from agentkeel.context.tokens import Accounting, Breakdown, Estimator, Window, breakdown
from agentkeel.core.events import Event, Notice
from agentkeel.core.extensions import Extension, LifecyclePoint, ToolCall
from agentkeel.core.provider import ModelRequest, ModelResponse, PromptTooLongError, Provider
from agentkeel.core.run import LoopConfig
from agentkeel.core.tools import Services, ToolOutput
from agentkeel.core.types import Message, TextBlock
from agentkeel.core.view import Compaction
from agentkeel.tools import effects_of

EARLY_AFTER_REQUESTS = 12  # the fewest model requests between two early compactions
log = logging.getLogger("agentkeel.context")


@dataclass
class ContextManager:
    provider: Provider
    model: str
    window: Window
    settings: ContextSettings
    instructions: Instructions
    builder: PromptBuilder
    services: Services
    emit: Any = None  # the bus's emit, for notices
    state: WorkingState = field(default_factory=WorkingState)
    accounting: Accounting = field(init=False)
    estimator: Estimator = field(init=False)
    notes: list[str] = field(default_factory=list)
    last_request: ModelRequest | None = None
    # the memory layer's context for a text (its prompt injection), re-injected after compaction
    memory_context: Callable[[str], str | None] | None = None
    # the session's loop config: its system prompt is kept up to date before each request (a
    # before_request extension of the host that changes the prompt still has the last word)
    loop_config: LoopConfig | None = None
    # the session's transcript file: the carry-over after a compaction points the model at it
    transcript: Path | None = None
    # the task the memory context was last found for, and that context (see ``carry``)
    _memory_carried: tuple[str, str] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.estimator = Estimator(self.model)
        self.accounting = Accounting(self.estimator, self.window)

    # --- construction ---------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        *,
        provider: Provider,
        model: str,
        qualified_model: str,
        context_window: int,
        max_tokens: int,
        settings: ContextSettings | None,
        output_style: str | None,
        cwd: Path,
        home: Path,
        keel_home: Path,
        env: dict[str, str],
        services: Services,
        additional_dirs: tuple[Path, ...] = (),
        append: str | None = None,
        imports: ImportPolicy | None = None,
        sources: frozenset[str] | None = None,
    ) -> ContextManager:
        """``sources``: the instruction files' scopes to read (``--setting-sources``; None: all)."""
        config = settings or ContextSettings()
        size = config.window or context_window
        window = Window(size, reserve=min(max_tokens, 20_000, size // 4), threshold=config.autoCompactThreshold)
        instructions = Instructions.load(cwd, home, keel_home, env, imports, sources)
        style, warning = find_style(output_style, cwd, home)
        builder = PromptBuilder(
            cwd, qualified_model, instructions, style, int(window.usable * config.promptBudget), additional_dirs, append
        )
        mgr = cls(provider, model, window, config, instructions, builder, services)
        if warning:
            mgr.notes.append(warning)
        services.put(ContextManager, mgr)
        return mgr

    def replay(self, events: list[Event]) -> None:
        """A resumed session: the working state from its log, and the compactions it had."""
        last: Compaction | None = None
        for event in events:
            self.state.on_event(event)
            if isinstance(event, Compaction):
                self.accounting.compactions += 1
                last = event
        if last is not None:
            self.services.put(ResumedView, ResumedView(len(last.messages), last.tokens_before))

    def warnings(self) -> list[str]:
        return [*self.notes, *self.instructions.notes, *self.builder.dropped]

    # --- the extension ------------------------------------------------------------------

    def extension(self) -> Extension:
        return Extension(
            "context",
            fit_context=self._fit,
            before_request=self._before_request,
            after_response=self._after_response,
            after_tool=self._after_tool,
            subscribers=[self.state.on_event],
            start=self._start,
        )

    def system_prompt(self) -> str:
        return self.builder.text()

    async def _start(self) -> None:
        for f in self.instructions.files:
            await self._loaded(f)

    async def _loaded(self, f: InstructionFile) -> None:
        point = self.services.find(LifecyclePoint)
        if point is None or not point.listens("InstructionsLoaded"):
            return
        fields: dict[str, Any] = {
            "file_path": str(f.path),
            "memory_type": f.scope.capitalize(),
            "load_reason": f.reason,
        }
        if f.imported_by is not None:
            fields["parent_file_path"] = str(f.imported_by)
        if f.globs:
            fields["globs"] = list(f.globs)
        await point.fire("InstructionsLoaded", fields, match=f.reason)

    async def _before_request(self, request: ModelRequest) -> ModelRequest:
        self.last_request = request
        self.accounting.sent(request)
        return request

    async def _after_response(self, response: ModelResponse) -> None:
        self.accounting.reported(response.usage)

    async def _after_tool(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        effects = call.tool.effects if call.tool is not None else effects_of(call.name)
        raw = named_path(effects, call.input)
        if not touches_files(effects) or output.is_error or not raw:
            return output
        path = Path(raw) if Path(raw).is_absolute() else (call.cwd or self.instructions.cwd) / raw
        if effects.writes and path in self.instructions.sources():
            self.builder.invalidate()  # the session edited an instruction file: the next request sees it
        added = self.instructions.touched(path)
        if not added:
            return output
        for f in added:
            await self._loaded(f)
        note = "\n\n".join(render(f) for f in added)
        reminder = f"\n\n<system-reminder>\nInstructions that apply to {raw}:\n{note}\n</system-reminder>"
        if isinstance(output.content, str):
            return ToolOutput(output.content + reminder, output.is_error, output.metadata)
        return ToolOutput([*output.content, TextBlock(text=reminder)], output.is_error, output.metadata)

    # --- compaction ----------------------------------------------------------------------

    def tokens(self, request: ModelRequest) -> int:
        return self.accounting.current(request)

    def breakdown(self, request: ModelRequest | None = None) -> Breakdown:
        request = request or self.last_request
        if request is None:
            return Breakdown({})
        _, sections = self.builder.build()
        parts: dict[str, int] = {}
        for s in sections:
            parts[s.kind] = parts.get(s.kind, 0) + len(s.text) + 2
        return breakdown(request, self.estimator, parts)

    async def _fit(self, request: ModelRequest, error: PromptTooLongError | None) -> Event | None:
        if error is not None and error.limit and error.limit < self.window.size:
            # the provider named the real window: smaller than the catalog said
            self.window.size = error.limit
            self.window.reserve = min(self.window.reserve, error.limit // 4)
        system = self.builder.text()
        if self.loop_config is not None:
            self.loop_config.system = system
        request = msgspec.structs.replace(request, system=system)
        tokens = self.tokens(request)
        limit = self.window.usable
        full = tokens >= self.window.threshold * limit
        early = not full and self._early(request, tokens)
        auto = self.settings.autoCompact and (full or early)
        if error is None and not auto and tokens < limit:
            return None
        if error is not None and not self.settings.compactOnOverflow:
            return None  # the refusal goes on to the recover extensions (session recovery's shrink)
        trigger = "overflow" if error is not None else "auto"
        event = await self.compact_messages(request, trigger)
        if event is None and early and error is None and tokens < limit:
            # blocked by a PreCompact hook, or nothing to compact: asked again 12 requests on, not each
            self.accounting.requests_at_compaction = self.accounting.requests
        return event

    def _early(self, request: ModelRequest, tokens: int) -> bool:
        """Past ``earlyCompactThreshold`` with 12 requests since the last compaction: compacting
        now costs less than re-reading the larger context on every later request (#35). Not when
        the system prompt and the tools alone take half of that share: a compaction could not
        bring the context far enough below it to pay."""
        early, limit = self.settings.earlyCompactThreshold, self.window.usable
        since = self.accounting.requests - self.accounting.requests_at_compaction
        if not (0 < early < self.window.threshold and tokens >= early * limit and since >= EARLY_AFTER_REQUESTS):
            return False
        fixed = self.estimator.tokens(len(request.system) + self.estimator.tools_chars(request.tools))
        return fixed < early * limit / 2

    def _plan(self, request: ModelRequest) -> Plan:
        """The conversation after a compaction fits what is left of half the window once the system
        prompt and the tools are counted: the next request is at most half the window, so the next
        compaction is many turns away (a floor of a quarter of the room when the prompt alone is big)."""
        fixed = self.estimator.tokens(len(request.system) + self.estimator.tools_chars(request.tools))
        room = max(200, self.window.usable - fixed)
        return Plan(
            target=max(int(room * 0.25), self.window.size // 2 - fixed),
            keep=int(self.window.usable * self.settings.keepRecent),
            summary_max=max(200, min(8000, int(room * 0.15))),
            summariser_input=max(1000, self.window.usable - 4000 - self.estimator.tokens(len(SUMMARY_SYSTEM))),
            timeout_s=self.settings.summaryTimeoutS,
        )

    def carry(self) -> list[str]:
        """What is re-injected after every compaction: the working state, the active skills, and
        the nested instructions and path rules of the files in play."""
        extra = [self.state.render(), self.state.render_skills()]
        if self.memory_context is not None and self.state.task:
            extra.append(self._memory_for(self.state.task))
        applies = self.instructions.for_files([*self.state.changed, *self.state.files])
        if applies:
            extra.append(
                "Instructions for the files in play (re-loaded after compaction):\n"
                + "\n\n".join(render(f) for f in applies)
            )
        return [x for x in extra if x]

    def _memory_for(self, task: str) -> str:
        """The memory context for the task, searched once per task: it is about earlier sessions
        (the memory layer leaves this session's own records out), and a long task compacts again and
        again, each time with a search that would find the same."""
        if self._memory_carried is not None and self._memory_carried[0] == task:
            return self._memory_carried[1]
        assert self.memory_context is not None
        try:
            found = self.memory_context(task) or ""
        except Exception:  # memory fails open (and is asked again next time)
            log.exception("memory context for the carry-over failed")
            return ""
        self._memory_carried = (task, found)
        return found

    async def compact_messages(self, request: ModelRequest, trigger: str, instructions: str = "") -> Compaction | None:
        point = self.services.find(LifecyclePoint) or LifecyclePoint()
        pre = await point.fire(
            "PreCompact",
            {"trigger": "manual" if trigger == "manual" else "auto", "custom_instructions": instructions},
            match="manual" if trigger == "manual" else "auto",
        )
        if pre.blocked:
            self._notice("warning", f"compaction blocked by a PreCompact hook: {pre.reason}")
            return None
        before = self.tokens(request)
        plan = self._plan(request)
        extra = [*self.carry(), *pre.context]
        # the summary asked after the conversation as it is, when the answer has room in the window
        # beside the thinking budget (Anthropic refuses max_tokens <= budget_tokens); its limit is
        # the summary's, or less when the room is less. A prompt that overflowed goes as a
        # transcript, in chunks if need be.
        room = self.window.size - before - self.estimator.tokens(len(WHOLE_REQUEST)) - 500
        budget = request.thinking_budget or 0
        plan.whole_max = min(plan.summary_max, room - budget)
        if budget:  # nor more output than the session's own requests ask (within the model's cap)
            plan.whole_max = min(plan.whole_max, request.max_tokens - budget)
        whole = self._whole(request) if trigger != "overflow" and plan.whole_max >= 1024 else None
        outcome = await compact(
            request.messages,
            plan,
            self.estimator,
            strategy=self.settings.strategy,
            summarise=self._summarise,
            extra=extra,
            instructions=instructions,
            source=str(self.transcript) if self.transcript is not None else "",
            whole=whole,
            manual=trigger == "manual",
        )
        if outcome is None:
            return None
        self.builder.invalidate()  # the environment block (and the instruction files) are read anew
        after_req = ModelRequest(request.model, request.system, outcome.messages, request.tools, request.max_tokens)
        after = self.estimator.tokens(self.estimator.request_chars(after_req))
        event = Compaction(
            messages=outcome.messages,
            trigger=trigger,
            strategy=self.settings.strategy,
            stage=outcome.stage,
            tokens_before=before,
            tokens_after=after,
            summary=outcome.summary,
            state=self.state.snapshot(),
        )
        self.accounting.compacted()
        for note in outcome.notes:
            log.info("compaction: %s", note)
        self._notice("info", f"context compacted ({trigger}, {outcome.stage}): {before} -> {after} tokens")
        await point.fire(
            "PostCompact",
            {
                "trigger": "manual" if trigger == "manual" else "auto",
                "stage": outcome.stage,
                "summary": outcome.summary,
            },
            match="manual" if trigger == "manual" else "auto",
        )
        return event

    def _whole(self, request: ModelRequest) -> Summariser:
        """The summariser that sends the conversation as the last request did (its system prompt,
        tools and messages: a prefix the provider has cached) with the instruction after it, as a
        text block at the end of the last user message (two user messages in a row are refused by
        strict chat templates). Its answer gets the summary's limit plus the thinking budget.

        The tools stay and no ``tool_choice`` is sent: removing the tools changes the cached prefix
        from its start, and a changed ``tool_choice`` drops the cached messages on Anthropic; so the
        instruction says to call no tool, and an answer that calls one is rejected (``_ask``)."""

        async def whole(instruction: str, max_tokens: int) -> str:
            budget = request.thinking_budget or 0  # the same thinking setting: a change drops the cache
            # the first message as it was sent, with the environment note (a before_request step that
            # comes after this one): without it the cached prefix would end at the system prompt
            sent = await self.builder.attach(request)
            messages = list(sent.messages)
            if messages and messages[-1].role == "user":
                last = messages[-1]
                messages[-1] = Message(role="user", content=[*last.content, TextBlock(text=instruction)])
            else:
                messages.append(Message.user(instruction))
            return await self._ask(msgspec.structs.replace(request, messages=messages, max_tokens=max_tokens + budget))

        return whole

    async def _summarise(self, text: str, max_tokens: int) -> str:
        request = ModelRequest(
            model=self.model,
            system=SUMMARY_SYSTEM,
            messages=[Message.user(f"{COMPACT_MARK}\nSummarise this session so far:\n\n{text}")],
            tools=[],
            max_tokens=max_tokens,
        )
        return await self._ask(request)

    async def _ask(self, request: ModelRequest) -> str:
        """The summary the model wrote; SummaryFailed when its answer is not one: it called a tool
        (a plan to look things up, not a note) or stopped at the output limit (a cut-off note)."""
        final: ModelResponse | None = None
        async for chunk in self.provider.stream(request):
            if isinstance(chunk, ModelResponse):
                final = chunk
        if final is None:
            raise RuntimeError("the summary stream ended without a message")
        if final.message.tool_uses() or final.stop_reason == "tool_use":
            raise SummaryFailed("the summariser called a tool instead of writing the summary")
        if final.stop_reason == "max_tokens":
            raise SummaryFailed(f"the summary was cut off at the output limit ({request.max_tokens} tokens)")
        return final.message.text()

    def _notice(self, level: str, message: str) -> None:
        if self.emit is not None:
            try:
                self.emit(Notice(level=level, message=message))  # type: ignore[arg-type]
            except Exception:
                log.exception("notice failed")
