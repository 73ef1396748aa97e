"""The TUI application: one Runtime (the same one ``keel -p`` and the line mode build), a chat
driven by its event bus, and the input, dialogs and panels around it.

Events arrive on the bus synchronously from the runtime's tasks; the app queues them and a
single pump applies them to the widgets in order, so a burst of stream deltas never blocks the
engine and the screen never shows them out of order.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import ListView, OptionList, Static

from agentkeel.app.runtime import Runtime, RuntimeOptions
from agentkeel.commands.registry import CommandRegistry
from agentkeel.core.events import (
    AssistantMessage,
    Event,
    Interrupted,
    Notice,
    RequestStarted,
    RunFinished,
    StreamRetry,
    TextDelta,
    TodosUpdated,
    ToolFinished,
    ToolResults,
    ToolStarted,
    UserMessage,
)
from agentkeel.core.extensions import ToolCall
from agentkeel.core.tools import Effects
from agentkeel.core.types import ToolResultBlock
from agentkeel.policy.permissions import Answer, Decision
from agentkeel.session.store import keel_home
from agentkeel.tools import effects_of
from agentkeel.ui.tui.chat import ChatLog, NoticeLine, ToolBlock, UserBlock, call_summary
from agentkeel.ui.tui.dialogs import ANSWERS, Choice, ChooserScreen, permission_dialog
from agentkeel.ui.tui.diffs import diff_for_call
from agentkeel.ui.tui.files import History
from agentkeel.ui.tui.prompt import Completer, PromptInput, dropdown_widgets
from agentkeel.ui.tui.session_ops import SessionOps
from agentkeel.ui.tui.side import HeaderBar, MeterBar, SessionItem, Sidebar, next_mode, project_sessions

OptionsFactory = Callable[[], RuntimeOptions]  # a fresh copy of the session's options each call
DOUBLE_PRESS_S = 2.0
START_HINT = "Type a prompt · / commands · @ files · Ctrl-C interrupts · /exit leaves"
INSTEAD = "Denied, and the turn is stopped. Tell keel what to do instead:"


class KeelApp(App[int]):
    """``make_options`` gives the session's RuntimeOptions; the app adds its own ask callbacks and
    builds the Runtime from them (again with ``resume``/``fork_session`` set, to switch sessions)."""

    TITLE = "keel"
    CSS = """
    Screen { layout: vertical; }
    #main { height: 1fr; }
    #left { width: 1fr; }
    #completions { height: auto; max-height: 8; border: none; background: $panel; padding: 0 1; }
    #arghint { color: $text-muted; padding: 0 2; height: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "interrupt / exit", priority=True, show=False),
        Binding("shift+tab", "cycle_mode", "mode", priority=True, show=False),
        Binding("ctrl+b", "toggle_sidebar", "sessions", show=False),
        Binding("ctrl+t", "toggle_theme", "light/dark", show=False),
        Binding("escape", "escape", "rewind (esc esc)", show=False),
    ]

    def __init__(
        self,
        make_options: OptionsFactory,
        *,
        first_prompt: str = "",
        home: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        theme: str | None = None,
    ) -> None:
        super().__init__()
        self.make_options = make_options
        self.first_prompt = first_prompt
        self.home = home or keel_home()
        self.clock = clock
        self.rt: Runtime = self.build_runtime()
        self.ops = SessionOps(self)
        self._queue: asyncio.Queue[Event | asyncio.Future[None]] = asyncio.Queue()
        self._unsubscribe: Callable[[], None] | None = None
        self._thread = threading.get_ident()
        self.running: asyncio.Task[Any] | None = None
        self.pending: list[str] = []
        self.status = "idle"
        self.turn = 0
        self.context_tokens = 0
        self.cost = 0.0
        self.todos: list[dict[str, Any]] = []
        self._diffs: dict[str, str] = {}
        self.last_input = 0.0  # when a key last reached the prompt (a stream defers its re-render to typing)
        self._last_ctrl_c = -10.0
        self._last_escape = -10.0
        self._frame = 0
        self._stop_at = ""  # the denied call whose result ends the turn ("No, and tell the model what to do")
        self._told_no = False
        self.hint = "enter send · ctrl+j newline · shift+tab mode · ctrl+c interrupt"
        if theme:
            self.theme = theme

    # --- layout -------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        dropdown, hint = dropdown_widgets()
        registry = self.rt.agent.services.find(CommandRegistry)
        completer = Completer(
            registry.completions if registry is not None else (lambda prefix: []), self.rt.agent.context.cwd
        )
        yield HeaderBar(id="header")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield ChatLog()
                yield dropdown
                yield hint
                yield PromptInput(completer, History(self.home / "history"), dropdown, hint)
                yield MeterBar(id="meter")
            yield Sidebar(id="side")

    async def on_mount(self) -> None:
        self.attach_runtime()
        self.query_one(PromptInput).focus()
        self.query_one(Sidebar).display = self.size.width >= 110
        self.set_interval(0.1, self._tick)
        self.set_interval(1.0, self._poll_agents)
        self.run_worker(self._pump(), exclusive=False, group="pump")
        await self.refresh_sessions()
        self.show_header()
        await self.query_one(ChatLog).add(NoticeLine(START_HINT))
        await self.ops.show_history()
        if self.first_prompt:
            self.submit(self.first_prompt)

    def on_resize(self) -> None:
        if not getattr(self, "_sidebar_pinned", False):
            self.query_one(Sidebar).display = self.size.width >= 110

    # --- the runtime and its bus ----------------------------------------------------------

    def build_runtime(self, resume: str | None = None, fork: bool = False) -> Runtime:
        opts = self.make_options()
        opts.channel = "interactive"
        opts.ask = self.ask
        opts.ask_repeat = self.ask_repeat
        if resume is not None:
            opts.resume, opts.continue_session, opts.session_id, opts.fork_session = resume, False, None, fork
        return Runtime.create(opts)

    def attach_runtime(self) -> None:
        from agentkeel.mcp import mcp_pool

        if self._unsubscribe is not None:
            self._unsubscribe()
        self._unsubscribe = self.rt.bus.subscribe(self._on_bus)
        pool = mcp_pool(self.rt.agent.services)
        if pool is not None:  # MCP servers' elicitations: a dialog
            pool.set_elicitation(self.elicit)

    def _on_bus(self, event: Event) -> None:
        if isinstance(event, ToolStarted) and (does := self._effects(event.name)).writes:
            # the edit runs right after this returns: its diff is taken now, from the file as it is
            cwd = self.rt.agent.context.cwd
            self._diffs[event.tool_use_id] = diff_for_call(event.name, event.input, cwd, 40, does)
        if isinstance(event, ToolFinished) and self._stop_at and event.tool_use_id == self._stop_at:
            # the user said no and will say what to do instead: the denial is recorded, the turn ends
            self._stop_at = ""
            self.rt.agent.interrupt()
        if threading.get_ident() == self._thread:
            self._queue.put_nowait(event)
        else:
            self.call_from_thread(self._queue.put_nowait, event)

    async def drain(self) -> None:
        """Wait until every event emitted so far is on screen."""
        marker: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(marker)
        await marker

    async def _pump(self) -> None:
        carry: Event | asyncio.Future[None] | None = None
        while True:
            event = carry if carry is not None else await self._queue.get()
            carry = None
            if isinstance(event, asyncio.Future):
                if not event.done():
                    event.set_result(None)
                continue
            if isinstance(event, TextDelta):
                # the deltas that queued up while the last frame rendered go out as one fragment
                parts = [event.text]
                while not self._queue.empty():
                    following = self._queue.get_nowait()
                    if not isinstance(following, TextDelta):
                        carry = following
                        break
                    parts.append(following.text)
                event = TextDelta(text="".join(parts)) if len(parts) > 1 else event
            try:
                await self.apply(event)
            except Exception:  # a display problem never stops the session
                self.log.error(f"cannot show {event.type}")

    async def apply(self, event: Event) -> None:
        chat = self.query_one(ChatLog)
        if isinstance(event, TextDelta):
            await chat.text(event.text)
            return
        if isinstance(event, RequestStarted):
            self.status = "thinking"
        elif isinstance(event, StreamRetry):
            await chat.end_answer()
            await chat.retrying(
                f"model request failed ({event.error}); retrying in {event.delay_s:.1f}s (attempt {event.attempt})"
            )
        elif isinstance(event, ToolStarted):
            await chat.end_answer()
            diff = self._diffs.pop(event.tool_use_id, "")
            block = ToolBlock(
                event.tool_use_id,
                event.name,
                event.input,
                diff=diff,
                cwd=self.rt.agent.context.cwd,
                effects=self._effects(event.name),
            )
            chat.tools[event.tool_use_id] = block
            await chat.add(block)
            self.status = f"running {event.name}"
        elif isinstance(event, ToolFinished):
            found = chat.tools.get(event.tool_use_id)
            if found is None:  # never started: denied, or stopped before it ran
                found = ToolBlock(
                    event.tool_use_id,
                    event.name,
                    event.input,
                    cwd=self.rt.agent.context.cwd,
                    effects=self._effects(event.name),
                )
                chat.tools[event.tool_use_id] = found
                await chat.add(found)
            found.finish(event.is_error, event.duration_ms, event.summary, event.metadata)
            self.status = "thinking"
        elif isinstance(event, ToolResults):
            for result in event.message.content:
                shown = chat.tools.get(result.tool_use_id) if isinstance(result, ToolResultBlock) else None
                if isinstance(result, ToolResultBlock) and shown is not None:
                    shown.result(result.text(), result.is_error)
        elif isinstance(event, AssistantMessage):
            await chat.end_answer()
            usage = event.usage
            self.context_tokens = (
                usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens + usage.output_tokens
            )
            self.cost += event.cost_usd
        elif isinstance(event, TodosUpdated):
            self.todos = list(event.todos)
            self.query_one(Sidebar).show_todos(self.todos)
        elif isinstance(event, Notice):
            if event.level != "info" or "background agent" in event.message:
                await chat.add(NoticeLine(event.message, event.level))
        elif isinstance(event, Interrupted):
            await chat.end_answer()
            chat.stop_running()
            await chat.add(NoticeLine(INSTEAD if self._told_no else "[interrupted]", "warning"))
        elif isinstance(event, RunFinished):
            await chat.end_answer()
            chat.stop_running()
            if event.is_error and event.subtype != "interrupted":
                await chat.add(NoticeLine(f"[{event.subtype}] {event.result}", "error"))
        elif isinstance(event, UserMessage) and self.turn <= 1:
            await self.refresh_sessions()  # the new session gets its title in the sidebar
        self.show_header()

    def show_header(self) -> None:
        if not self.screen_stack or not self.query(HeaderBar):
            return  # closing: the widgets are gone
        self.query_one(HeaderBar).show(
            self.rt.model.qualified, self.rt.permissions.mode, self.status, self.turn, self.rt.session_id
        )
        self.query_one(MeterBar).show(self.context_tokens, self.rt.model.context_window, self.cost, self.hint)

    def _tick(self) -> None:
        self._frame += 1
        for chat in self.query(ChatLog):  # none while closing
            chat.tick(self._frame)

    def _poll_agents(self) -> None:
        from agentkeel.agents.background import BackgroundAgents

        agents = self.rt.agent.services.find(BackgroundAgents)
        if agents is None or not self.query(Sidebar):
            return
        rows = [
            (agent_id, "running" if not task.done() else ("cancelled" if task.cancelled() else "done"))
            for agent_id, task in agents.tasks.items()
        ]
        self.query_one(Sidebar).show_agents(rows)

    async def refresh_sessions(self) -> None:
        if not self.query(Sidebar):
            return  # closing
        entries = project_sessions(self.home, self.rt.agent.context.cwd)
        if not any(e.session_id == self.rt.session_id for e in entries):
            from agentkeel.ui.tui.side import SessionEntry

            entries.insert(0, SessionEntry(self.rt.session_id, "(this session)", self.turn, self.cost))
        await self.query_one(Sidebar).show_sessions(entries, self.rt.session_id)

    # --- asking the user ------------------------------------------------------------------

    async def ask(self, call: ToolCall, decision: Decision) -> Answer:
        """The permission callback: the same four answers as the line mode. "No" (or Esc) also
        stops the turn, once the denial is recorded, and puts the cursor back in the prompt: what
        the user types next is the instruction (as Claude Code's "No, and tell Claude what to do
        differently"); another call of the same batch is then denied without asking."""
        if self._told_no:
            return "deny"
        await self.drain()  # what led to the ask is on screen first (and the status is not overwritten)
        diff = diff_for_call(call.name, call.input, self.rt.agent.context.cwd, effects=self._effects(call.name))
        screen = permission_dialog(
            decision.reason,
            call_summary(call.name, call.input, 200, self.rt.agent.context.cwd),
            decision.suggestions,
            diff,
        )
        self.status = "waiting for you"
        self.show_header()
        choice = await self.choose(screen)
        answer: Answer = ANSWERS.get(choice or "n", "deny")  # type: ignore[assignment]
        own, nested = self._own_call(call.id), self._in_subagent()
        if answer == "deny" and call.tool is not None and (own or nested):  # (not a network ask, nor a
            self._told_no = True  # background agent's: that one is denied and the turn goes on)
            if own:
                self._stop_at = call.id  # the turn stops once the denial is recorded
            else:
                self.rt.agent.interrupt()  # a subagent's call: the turn (and the subagent) stop now
            self.status = "stopping"
            self.query_one(PromptInput).focus()
        else:
            self.status = f"running {call.name}"
        return answer

    def _own_call(self, call_id: str) -> bool:
        """A call of this session's last answer (not a subagent's: those have a bus of their own)."""
        answer = next((m for m in reversed(self.rt.agent.messages) if m.role == "assistant"), None)
        return answer is not None and any(use.id == call_id for use in answer.tool_uses())

    def _in_subagent(self) -> bool:
        """The turn is waiting on a subagent (a Task call still running, so not a background one)."""
        busy = self.running is not None and not self.running.done()
        return busy and any(b.running and b.effects.delegates for b in self.query_one(ChatLog).tools.values())

    def _effects(self, name: str) -> Effects:
        """What a call of the session's tool ``name`` does, as the tool declares it."""
        tool = self.rt.agent.tools.get(name)
        return tool.effects if tool is not None else effects_of(name)

    async def elicit(self, server: str, params: Any) -> Any:
        """An MCP server asks the user: its form as a dialog (or, for a URL, whether to open it)."""
        from mcp_types import ElicitResult

        from agentkeel.ui.tui.dialogs import ElicitationScreen

        await self.drain()
        self.status = "waiting for you"
        self.show_header()
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def finish(value: Any) -> None:
            if not done.done():
                done.set_result(value)

        if getattr(params, "mode", "form") == "url":
            screen = ChooserScreen(
                f"MCP server {server} asks you to open a page",
                [Choice("y", f"Open {params.url}"), Choice("n", "No")],
                body=params.message,
                cancel="n",
            )
            answer = await self.choose(screen)
            return ElicitResult(action="accept" if answer == "y" else "decline")
        given = params.requested_schema
        schema = given.model_dump(by_alias=True, exclude_none=True) if hasattr(given, "model_dump") else dict(given)
        await self.push_screen(ElicitationScreen(server, params.message, schema), callback=finish)
        value = await done
        self.status = "running"
        if value is None:
            return ElicitResult(action="cancel")
        if value == "decline":
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content=value)

    async def ask_repeat(self, call: ToolCall, count: int) -> bool:
        screen = ChooserScreen(
            f"{call.name} was called with the same input {count} times",
            [Choice("y", "Let it run again"), Choice("n", "No")],
            body=call_summary(call.name, call.input, 200, self.rt.agent.context.cwd),
            cancel="n",
        )
        return await self.choose(screen) == "y"

    async def choose(self, screen: ChooserScreen) -> str | None:
        done: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

        def finish(value: str | None) -> None:
            if not done.done():
                done.set_result(value)

        await self.push_screen(screen, callback=finish)
        return await done

    # --- prompts --------------------------------------------------------------------------

    def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        self.submit(message.text)

    def submit(self, text: str) -> None:
        if self.running is not None and not self.running.done():
            self.pending.append(text)
            self.notify(f"queued: {text[:40]}", timeout=2)
            return
        self.running = asyncio.ensure_future(self._run(text))

    async def _run(self, text: str) -> None:
        chat = self.query_one(ChatLog)
        while True:
            if text in ("/exit", "/quit"):
                await self.shutdown()
                return
            if await self.ops.local_command(text):
                pass
            else:
                await self._run_prompt(chat, text)
            if not self.pending:
                break
            text = self.pending.pop(0)
        self.status = "idle"
        self.show_header()
        await self.refresh_sessions()

    async def _run_prompt(self, chat: ChatLog, text: str) -> None:
        from agentkeel.commands.run import route_line

        await chat.add(UserBlock(text))
        self.status = "thinking"
        self._told_no, self._stop_at = False, ""
        self.show_header()
        try:
            await self.rt.start()
            prompt = text
            if text.startswith("/"):
                routed = await route_line(self.rt, text, interactive=True)
                if routed.kind == "output":
                    await chat.add(NoticeLine(routed.text))
                    self.show_header()
                    return
                if routed.kind == "error":
                    await chat.add(NoticeLine(f"[{routed.command or 'command'}] {routed.text}", "error"))
                    return
                prompt = routed.text
            self.turn += 1
            await self.rt.run(prompt)
        except Exception as exc:  # the engine reports its own failures; this is the UI's last net
            await chat.add(NoticeLine(f"keel: {type(exc).__name__}: {exc}", "error"))
        finally:
            await self.drain()
            await chat.end_answer()
            self._told_no, self._stop_at = False, ""  # (a background agent's ask after it is asked again)

    # --- keys -----------------------------------------------------------------------------

    async def action_interrupt(self) -> None:
        now = self.clock()
        busy = self.running is not None and not self.running.done()
        if now - self._last_ctrl_c < DOUBLE_PRESS_S:
            await self.shutdown()
            return
        self._last_ctrl_c = now
        if busy:
            self.rt.agent.interrupt()
            self.status = "interrupting"
            self.show_header()
        else:
            prompt = self.query_one(PromptInput)
            if prompt.text:
                prompt.set_text("")
            self.notify("Ctrl-C again to exit", timeout=DOUBLE_PRESS_S)

    def action_cycle_mode(self) -> None:
        mode = next_mode(self.rt.permissions.mode)
        self.rt.permissions.mode = mode  # type: ignore[assignment]
        self.show_header()

    def action_toggle_sidebar(self) -> None:
        side = self.query_one(Sidebar)
        side.display = not side.display
        self._sidebar_pinned = True

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme != "textual-light" else "textual-dark"

    async def action_escape(self) -> None:
        now = self.clock()
        if now - self._last_escape < DOUBLE_PRESS_S and (self.running is None or self.running.done()):
            self._last_escape = -10.0
            self.submit("/rewind")
            return
        self._last_escape = now

    async def on_list_view_selected(self, event: ListView.Selected) -> None:
        item = event.item
        if isinstance(item, SessionItem):
            await self.ops.session_menu(item.entry.session_id)

    async def on_unmount(self) -> None:
        """However the app ends (Ctrl-C twice, /exit, an error): stop the turn, close the session."""
        if self.running is not None and not self.running.done():
            self.rt.agent.interrupt()
            self.running.cancel()
            try:
                await asyncio.wait_for(asyncio.shield(self.running), 5)
            except (asyncio.CancelledError, TimeoutError, Exception):
                pass
        await self.rt.aclose()

    async def shutdown(self) -> None:
        if self.running is not None and not self.running.done() and self.running is not asyncio.current_task():
            self.rt.agent.interrupt()
        await self.rt.aclose()
        self.exit(0)

    def show_notice(self, text: str, level: str = "info") -> Any:
        return self.query_one(ChatLog).add(NoticeLine(text, level))

    def hint_text(self) -> Text:
        return Text(self.hint)

    def focus_prompt(self, text: str = "") -> None:
        prompt = self.query_one(PromptInput)
        prompt.set_text(text)
        prompt.focus()

    @property
    def completions(self) -> OptionList:
        return self.query_one("#completions", OptionList)

    @property
    def sidebar_text(self) -> str:
        return str(self.query_one("#todos", Static).render())
