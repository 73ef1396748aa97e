"""Recovery: the todo-continuation enforcer (idle with open todos -> countdown -> continuation prompt)."""

from __future__ import annotations

import asyncio
import json
import time

from agentkeel.core.events import Event, EventBus, TodosUpdated, ToolStarted, UserMessage
from agentkeel.core.extensions import Extension, PromptInfo, PromptVerdict, StopInfo
from agentkeel.reliability.state import ReliabilityState, notice

NAME = "todo-continuation-enforcer"
RECENT_ERROR_S = 3.0
PROMPT = """[SYSTEM REMINDER - TODO CONTINUATION]
Incomplete tasks remain in your todo list. Continue working on the next pending task.
- Proceed without asking for permission
- Mark each task complete when finished
- Do not stop until all tasks are done

Open todos:
{todos}"""


def continuation_prompt(todos: list[dict[str, object]]) -> str:
    lines = [f"- [{t.get('status', 'pending')}] {t.get('content', '')}" for t in todos]
    return PROMPT.format(todos="\n".join(lines))


def todo_enforcer(bus: EventBus, state: ReliabilityState) -> Extension:
    """Failure: the model stops (ends its turn) with todos still open — it summarises, asks "shall
    I continue?" or simply forgets — and in a headless run nobody is there to say "go on".
    Recovery: when the loop is about to go idle with open todos, a countdown
    (``reliability.todoCountdownSeconds``, 2 s) is announced; unless new user input, tool activity,
    an interrupt or a session recovery cancels it, a continuation prompt listing the open todos
    makes the loop go on. At most ``reliability.todoMaxContinuations`` times per prompt, and never
    again when a continuation changed nothing in the list (no progress). It never fights recovery:
    it waits while one is under way or just happened."""
    sent = [0]
    last_snapshot = [""]

    def on_event(event: Event) -> None:
        if isinstance(event, TodosUpdated):
            state.todos = list(event.todos)
        elif isinstance(event, ToolStarted):
            state.cancel_countdown()

    async def on_prompt(info: PromptInfo) -> PromptVerdict | None:
        sent[0] = 0  # a new user prompt: the budget of continuations starts again
        last_snapshot[0] = ""
        state.cancel_countdown()
        return None

    async def on_stop(info: StopInfo) -> str | None:
        open_todos = state.open_todos()
        cfg = state.config
        if not open_todos or sent[0] >= cfg.todoMaxContinuations:
            return None
        if state.recovering or time.monotonic() - state.last_error_at < RECENT_ERROR_S:
            notice(bus, NAME, "open todos, but a recovery is under way: not continuing")
            return None
        snapshot = json.dumps(state.todos, sort_keys=True)
        if snapshot == last_snapshot[0]:
            notice(
                bus,
                NAME,
                f"{len(open_todos)} todo(s) still open and the last continuation made no progress; stopping",
                "warning",
            )
            return None
        cancel = state.countdown_event()
        notice(
            bus, NAME, f"{len(open_todos)} todo(s) open: continuing in {cfg.todoCountdownSeconds:g}s unless cancelled"
        )
        try:
            await asyncio.wait_for(cancel.wait(), cfg.todoCountdownSeconds)
            notice(bus, NAME, "continuation cancelled")
            return None
        except TimeoutError:
            pass  # nobody cancelled (a recovery cancels through state.cancel_countdown)
        sent[0] += 1
        last_snapshot[0] = snapshot
        return continuation_prompt(open_todos)

    def on_user(event: Event) -> None:
        if isinstance(event, UserMessage):
            state.cancel_countdown()

    return Extension(NAME, on_stop=on_stop, on_prompt=on_prompt, subscribers=[on_event, on_user])
