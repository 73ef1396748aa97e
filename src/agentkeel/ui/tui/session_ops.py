"""Session operations of the TUI: resume, fork and rewind (through the session package's API:
``agentkeel.session.history``), and showing a resumed conversation. The engine is never touched
directly: a resume or fork builds a new Runtime from the same options as the first one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from agentkeel.app.runtime import KeelError
from agentkeel.core.events import AssistantMessage
from agentkeel.core.types import Message, TextBlock
from agentkeel.ui.tui.chat import AnswerBlock, ChatLog, NoticeLine, UserBlock, call_summary
from agentkeel.ui.tui.dialogs import Choice, ChooserScreen

if TYPE_CHECKING:
    from pathlib import Path

    from agentkeel.app.runtime import Runtime
    from agentkeel.session.history import RewindMode


class KeelApp(Protocol):
    """What session operations need of the app (``tui.app.KeelApp``, which imports this module)."""

    rt: Runtime
    home: Path
    turn: int
    context_tokens: int
    cost: float

    def build_runtime(self, resume: str | None = None, fork: bool = False) -> Runtime: ...
    def attach_runtime(self) -> None: ...
    async def drain(self) -> None: ...
    def focus_prompt(self, text: str = "") -> None: ...
    async def refresh_sessions(self) -> None: ...
    def show_header(self) -> None: ...
    async def choose(self, screen: ChooserScreen) -> str | None: ...
    def show_notice(self, text: str, level: str = "info") -> Any: ...
    def query_one(self, selector: Any) -> Any: ...


REWIND_MODES = [
    Choice("b", "Restore code and conversation"),
    Choice("c", "Restore conversation only"),
    Choice("o", "Restore code only"),
]
MODE_OF: dict[str, RewindMode] = {"b": "both", "c": "conversation", "o": "code"}
TURN_KEYS = "123456789abcdefghijklmnopqrstuvwxyz"
INJECTED = ("<memory-context", "<system-reminder")  # context keel or a hook added to a prompt


class SessionOps:
    def __init__(self, app: KeelApp) -> None:
        self.app = app

    async def local_command(self, text: str) -> bool:
        """The commands the TUI handles itself (they change what is on screen); False for the rest."""
        name, _, args = text.strip().partition(" ")
        words = args.split()
        if name == "/rewind" and not words:
            await self.rewind_dialog()
        elif name == "/rewind" and len(words) <= 2 and words[0].isdigit():
            mode = words[1] if len(words) == 2 else "both"
            if mode not in ("both", "code", "conversation"):
                await self.app.show_notice("usage: /rewind [N [code|conversation|both]]", "error")
            else:
                await self.do_rewind(int(words[0]), mode)  # type: ignore[arg-type]
        elif name == "/fork" and not words:
            await self.switch(self.app.rt.session_id, fork=True)
        elif name == "/fork" and len(words) == 1 and words[0].isdigit():
            await self.fork_at(int(words[0]))
        elif name == "/resume" and args.strip():
            await self.switch(args.strip(), fork=False)
        else:
            return False
        return True

    # --- showing a conversation -----------------------------------------------------------

    async def show_history(self) -> None:
        """The conversation so far (a resumed or rewound session), from the model's view: each
        prompt as typed (also one that follows an interrupted call's result in the same message),
        each answer, each call; and the header's turn, cost and context from the session's log."""
        chat = self.app.query_one(ChatLog)
        for message in self.app.rt.agent.messages:
            if message.role == "user":
                parts = prompt_parts(message)
                if parts is not None:
                    await chat.add(UserBlock(*parts))
                continue
            text = message.text().strip()
            if text:
                await chat.add(AnswerBlock(text))
            for use in message.tool_uses():
                await chat.add(
                    NoticeLine(f"● {call_summary(use.name, dict(use.input), cwd=self.app.rt.agent.context.cwd)}")
                )
        self.count_session()

    def count_session(self) -> None:
        """The header's turn, cost and context for a session with a past (resumed, forked, rewound)."""
        from agentkeel.session import history
        from agentkeel.session.load import load_session

        app = self.app
        if not app.rt.session_path.exists():
            return
        try:
            events = load_session(app.rt.session_path).events
            turns = len(history.user_turns(app.rt.session_path))
        except Exception:  # the figures are a convenience: a log that cannot be read leaves them be
            return
        answers = [e for e in events if isinstance(e, AssistantMessage)]
        app.turn, app.cost = turns, sum(e.cost_usd for e in answers)
        if answers:
            u = answers[-1].usage
            app.context_tokens = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens + u.output_tokens
        app.show_header()

    # --- resume / fork ----------------------------------------------------------------------

    async def switch(self, session_ref: str, *, fork: bool) -> None:
        app = self.app
        if not fork and session_ref == app.rt.session_id:
            return
        old = app.rt
        if fork:
            await app.drain()
        try:
            new = app.build_runtime(resume=session_ref, fork=fork)
        except KeelError as e:
            await app.show_notice(f"keel: {e}", "error")
            return
        await old.aclose()
        app.rt = new
        app.attach_runtime()
        app.turn, app.cost, app.context_tokens = 0, 0.0, 0
        chat = app.query_one(ChatLog)
        await chat.reset()
        verb = "Forked" if fork else "Resumed"
        await chat.add(NoticeLine(f"{verb} session {session_ref[:8]}: now in {new.session_id[:8]}"))
        await self.show_history()
        await app.refresh_sessions()
        app.show_header()

    async def session_menu(self, session_id: str) -> None:
        current = session_id == self.app.rt.session_id
        choices = [Choice("f", "Fork it (a copy under a new id)")]
        if current:
            choices.append(Choice("w", "Rewind to an earlier turn"))
        else:
            choices.insert(0, Choice("r", "Resume it"))
        picked = await self.app.choose(ChooserScreen(f"Session {session_id[:8]}", choices))
        if picked == "r":
            await self.switch(session_id, fork=False)
        elif picked == "f":
            await self.switch(session_id, fork=True)
        elif picked == "w":
            await self.rewind_dialog()

    # --- rewind -----------------------------------------------------------------------------

    async def rewind_dialog(self) -> None:
        from agentkeel.session import history

        app = self.app
        await app.drain()
        try:
            turns = history.user_turns(app.rt.session_path)
        except Exception as e:  # a damaged log: say so, change nothing
            await app.show_notice(f"cannot read this session's turns: {e}", "error")
            return
        if not turns:
            await app.show_notice("nothing to rewind: no prompt in this session yet")
            return
        shown = turns[-len(TURN_KEYS) :]
        choices = [Choice(TURN_KEYS[i], _turn_label(t.index, t.text, t.files_changed)) for i, t in enumerate(shown)]
        picked = await app.choose(ChooserScreen("Rewind to just before which prompt?", choices))
        if picked is None:
            return
        turn = shown[TURN_KEYS.index(picked)]
        how = await app.choose(ChooserScreen(f"Rewind to before: {turn.text[:60]}", REWIND_MODES))
        if how is None:
            return
        await self.do_rewind(turn.index, MODE_OF[how], turn.text)

    async def do_rewind(self, index: int, mode: RewindMode, prompt: str | None = None) -> None:
        """Rewind (code, conversation or both) to just before user turn ``index``; the chat is
        redrawn from the conversation that is left, and the prompt of that turn is put back."""
        from agentkeel.session import history

        app = self.app
        await app.drain()
        if prompt is None:
            turns = {t.index: t.text for t in history.user_turns(app.rt.session_path)}
            prompt = turns.get(index, "")
        try:
            try:
                result = await history.rewind(app.rt, index, mode)
            except history.RewindConflict as conflict:  # hand edits since: show them and ask
                if not await self._confirm_overwrite(conflict.files):
                    await app.show_notice("not rewound: nothing was changed")
                    return
                result = await history.rewind(app.rt, index, mode, force=True)
        except Exception as e:  # nothing was appended when it fails: the session goes on as it was
            await app.show_notice(f"rewind failed: {e}", "error")
            return
        await app.drain()
        chat = app.query_one(ChatLog)
        await chat.reset()
        await self.show_history()
        await chat.add(NoticeLine(_rewound(index, mode, result)))
        if result.warning:
            await chat.add(NoticeLine(result.warning, "warning"))
        if mode != "code":
            app.focus_prompt(prompt)

    async def _confirm_overwrite(self, files: tuple[str, ...]) -> bool:
        shown = ", ".join(files[:6]) + (f" and {len(files) - 6} more" if len(files) > 6 else "")
        title = f"{len(files)} file(s) changed since keel last changed them: {shown}. Overwrite them?"
        choices = [Choice("n", "No, keep them (do not rewind)"), Choice("y", "Yes, overwrite them")]
        return await self.app.choose(ChooserScreen(title, choices)) == "y"

    async def fork_at(self, index: int) -> None:
        """``/fork N``: a new session holding the turns before N; the TUI continues in it."""
        from agentkeel.session.fork import fork_session

        app = self.app
        await app.drain()
        try:
            new_id = fork_session(app.home, app.rt.agent.context.cwd, app.rt.session_id, at_turn=index)
        except Exception as e:
            await app.show_notice(f"fork failed: {e}", "error")
            return
        await self.switch(new_id, fork=False)


def _turn_label(index: int, text: str, files: Any) -> str:
    first = text.strip().replace("\n", " ")
    label = f"#{index} {first[:60]}{'…' if len(first) > 60 else ''}"
    if files:
        label += f"  ({len(files)} file{'s' if len(files) != 1 else ''} changed)"
    return label


def _rewound(index: int, mode: str, result: Any) -> str:
    parts = [f"Rewound ({mode}) to before turn {index}"]
    if mode != "code":
        parts.append(f"the conversation keeps {result.conversation_turns} turn(s)")
    if result.restored_files:
        parts.append("restored " + ", ".join(result.restored_files))
    if result.removed_files:
        parts.append("removed " + ", ".join(result.removed_files))
    return "; ".join(parts)


def prompt_parts(message: Message) -> tuple[str, str] | None:
    """A user message as shown: the prompt, and a note naming the context added to it (a hook's
    output, keel's ``<memory-context>``: text blocks after the prompt's, or glued to its end).
    None: no prompt in it (only tool results)."""
    texts = [b.text for b in message.content if isinstance(b, TextBlock) and b.text.strip()]
    at = next((i for i, t in enumerate(texts) if not t.lstrip().startswith(INJECTED)), None)
    if at is None:
        return None
    prompt = texts[at]
    cut = min((prompt.find("\n" + tag) for tag in INJECTED if "\n" + tag in prompt), default=len(prompt))
    extra = [*texts[:at], prompt[cut:], *texts[at + 1 :]]
    extra = [t.strip() for t in extra if t.strip()]
    memory = sum(t.startswith("<memory-context") for t in extra)
    added = [
        *(["memory"] if memory else []),
        *([f"hook output ({len(extra) - memory})"] if len(extra) > memory else []),
    ]
    return prompt[:cut].strip(), f"+ context: {', '.join(added)}" if added else ""
