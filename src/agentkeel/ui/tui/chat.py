"""The chat column: user prompts, streamed Markdown answers (code blocks highlighted by Textual's
Markdown), and collapsible tool blocks (what ran, its exit code, an output preview, a progress
indicator while it runs; Edit/Write show their diff)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.syntax import Syntax
from rich.text import Text
from textual.containers import VerticalScroll
from textual.events import Mount
from textual.widgets import Collapsible, Markdown, Static

from agentkeel.core.tools import Effects
from agentkeel.tools import effects_of
from agentkeel.ui.tui.diffs import diff_stats

if TYPE_CHECKING:
    from textual.widgets.markdown import MarkdownStream

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
PREVIEW_LINES = 6


def call_summary(name: str, tool_input: dict[str, Any], width: int = 60, cwd: Path | None = None) -> str:
    """``Bash(npm test)``: the tool and the one input that says what it does (a path inside the
    working directory relative to it)."""
    for key in ("command", "file_path", "pattern", "path", "url", "description", "prompt"):
        if key in tool_input:
            value = str(tool_input[key]).replace("\n", " ")
            if key in ("file_path", "path") and cwd is not None and value.startswith(str(cwd) + "/"):
                value = value[len(str(cwd)) + 1 :]
            return f"{name}({value[:width]}{'…' if len(value) > width else ''})"
    return f"{name}({json.dumps(tool_input)[: width // 2]})"


def preview(text: str, lines: int = PREVIEW_LINES, *, tail: bool = False) -> str:
    """The first ``lines`` lines of a tool's output, or its last (``tail``: a command's output ends
    with what matters, the error or the summary), with a count of the lines left out."""
    rows = text.rstrip("\n").splitlines()
    if len(rows) <= lines:
        return "\n".join(rows)
    more = f"… +{len(rows) - lines} lines"
    return "\n".join([more, *rows[-lines:]] if tail else [*rows[:lines], more])


class UserBlock(Static):
    """A prompt as the user typed it; context added to it before the model saw it (hook output,
    keel's ``<memory-context>``) is named in one dim line, not shown."""

    DEFAULT_CSS = """
    UserBlock { margin: 1 0 0 0; padding: 0 1; border-left: thick $primary; color: $text; }
    """

    def __init__(self, text: str, added: str = "") -> None:
        shown = Text(text)
        if added:
            shown.append(f"\n{added}", style="dim")
        super().__init__(shown, markup=False)
        self.text = text


class AnswerBlock(Markdown):
    """One assistant answer, streamed. Fragments collect for ``FLUSH_S`` and are appended to the
    Markdown together (Textual's MarkdownStream coalesces further when rendering falls behind):
    the chat re-lays out at most a dozen times a second, so typing stays quick during a stream."""

    FLUSH_S = 0.2
    TYPING_S = 0.15  # a key this recent defers a flush (the prompt's frame comes first) ...
    MAX_DEFER_S = 0.6  # ... but the answer is never more than this far behind
    DEFAULT_CSS = """
    AnswerBlock { margin: 0 0 0 1; padding: 0; background: transparent; }
    """

    def __init__(self, text: str = "") -> None:
        super().__init__(text)
        self.text = text
        self._stream: MarkdownStream | None = None
        self._ready = False  # the initial document is set on mount: appending before it is lost
        self._backlog = ""
        self._flush_due = False
        self._finished = False
        self._pending_since = 0.0

    async def _on_mount(self, event: Mount) -> None:  # type: ignore[override]
        await super()._on_mount(event)
        # Textual calls each class's handler in turn: Markdown's own would run again, with no
        # initial text this time, and blank an answer made whole (a resumed session's)
        event.prevent_default()
        self._ready = True
        if self._finished:
            await self.finish()
        else:
            self._schedule()

    async def write(self, fragment: str) -> None:
        self.text += fragment
        if not self._backlog:
            self._pending_since = time.monotonic()
        self._backlog += fragment
        self._schedule()

    def _schedule(self) -> None:
        if self._ready and self._backlog and not self._flush_due:
            self._flush_due = True
            self.set_timer(self.FLUSH_S, self._flush)

    async def _flush(self, force: bool = False) -> None:
        self._flush_due = False
        if not self._backlog or not self._ready:
            return
        now = time.monotonic()
        typing = now - getattr(self.app, "last_input", 0.0) < self.TYPING_S
        if not force and typing and now - self._pending_since < self.MAX_DEFER_S:
            self._flush_due = True
            self.set_timer(self.TYPING_S, self._flush)
            return
        backlog, self._backlog = self._backlog, ""
        if self._stream is None:
            self._stream = Markdown.get_stream(self)
        await self._stream.write(backlog)

    async def finish(self) -> None:
        if not self._ready:
            self._finished = True  # mounting completes it: the whole answer at once
            return
        await self._flush(force=True)
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None


class NoticeLine(Static):
    DEFAULT_CSS = """
    NoticeLine { color: $text-muted; margin: 0 0 0 1; }
    NoticeLine.-warning { color: $warning; }
    NoticeLine.-error { color: $error; }
    """

    def __init__(self, text: str, level: str = "info") -> None:
        super().__init__(Text(text), markup=False, classes=f"-{level}")
        self.text = text


class ToolBlock(Collapsible):
    """A tool call: the title says what ran and how it ended; inside, the command or diff and a
    preview of the output. While running, the title carries a spinner and the elapsed time."""

    DEFAULT_CSS = """
    ToolBlock { margin: 0 0 0 1; padding: 0; border: none; background: transparent; }
    ToolBlock > Contents { padding: 0 0 0 2; height: auto; }
    ToolBlock .tool-detail { color: $text-muted; }
    ToolBlock .tool-output { color: $text; }
    ToolBlock.-error CollapsibleTitle { color: $error; }
    """

    def __init__(
        self,
        tool_use_id: str,
        name: str,
        tool_input: dict[str, Any],
        diff: str = "",
        cwd: Path | None = None,
        effects: Effects | None = None,
    ) -> None:
        self.tool_use_id = tool_use_id
        self.tool_name = name
        self.tool_input = tool_input
        self.effects = effects if effects is not None else effects_of(name)  # the session's tool's, else a built-in's
        self.summary = call_summary(name, tool_input, cwd=cwd)
        self.started = time.monotonic()
        self.running = True
        self.diff = diff
        self.detail = Static("", classes="tool-detail", markup=False)
        self.output = Static("", classes="tool-output", markup=False)
        super().__init__(self.detail, self.output, title=f"{SPINNER[0]} {self.summary}", collapsed=False)
        self._set_detail()

    def _set_detail(self) -> None:
        if self.diff:
            self.detail.update(Syntax(self.diff, "diff", theme="ansi_dark", background_color="default"))
        elif self.effects.shell and "command" in self.tool_input:
            self.detail.update(Text(f"$ {self.tool_input['command']}"))
        else:
            self.detail.display = False

    def tick(self, frame: int) -> None:
        if self.running:
            elapsed = time.monotonic() - self.started
            self.title = f"{SPINNER[frame % len(SPINNER)]} {self.summary} · running {elapsed:.0f}s"

    def stop(self) -> None:
        """The call was interrupted (or its run ended) before it finished: no spinner, no clock."""
        if not self.running:
            return
        self.running = False
        self.title = f"■ {self.summary} · interrupted after {time.monotonic() - self.started:.1f}s"
        self.add_class("-error")

    def show_output(self, text: str) -> None:
        """The preview of the output: a command's last lines, another tool's first."""
        shown = preview(text, tail=self.effects.preview == "tail")
        self.output.update(Text(shown))
        self.output.display = bool(shown)

    def result(self, text: str, is_error: bool) -> None:
        """The call's whole result, as the model got it: a call still running had none of its own
        (it was interrupted); an edit's diff stays what it shows."""
        if self.running:
            self.stop()
        elif not (self.diff and not is_error):
            self.show_output(text)

    def finish(self, is_error: bool, duration_ms: int, summary: str, metadata: dict[str, Any]) -> None:
        self.running = False
        exit_code = metadata.get("exit_code")
        parts = [f"{'✗' if is_error else '✓'} {self.summary}"]
        if exit_code is not None:
            parts.append(f"exit {exit_code}")
        if self.diff:
            added, removed = diff_stats(self.diff)
            parts.append(f"+{added} -{removed}")
        parts.append(f"{duration_ms / 1000:.1f}s")
        self.title = " · ".join(parts)
        if is_error:
            self.add_class("-error")
        shown = "" if self.diff and not is_error else summary
        self.show_output(shown)
        if not is_error and self.diff == "" and not shown:
            self.collapsed = True


class ChatLog(VerticalScroll):
    """The conversation. Follows the bottom while the user has not scrolled up."""

    DEFAULT_CSS = """
    ChatLog { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    """

    def __init__(self) -> None:
        super().__init__(id="chat")
        self.tools: dict[str, ToolBlock] = {}
        self.answer: AnswerBlock | None = None

    def on_mount(self) -> None:
        self.anchor()  # stays at the bottom as content arrives, until the user scrolls up

    async def add(self, widget: Static | Markdown | Collapsible) -> None:
        await self.mount(widget)

    async def text(self, fragment: str) -> None:
        if self.answer is None:
            self.answer = AnswerBlock()
            await self.add(self.answer)
        await self.answer.write(fragment)

    async def end_answer(self) -> None:
        if self.answer is not None:
            answer, self.answer = self.answer, None
            await answer.finish()

    async def reset(self) -> None:
        await self.end_answer()
        self.tools.clear()
        await self.remove_children()

    def tick(self, frame: int) -> None:
        for block in self.tools.values():
            if block.running:
                block.tick(frame)

    def stop_running(self) -> None:
        for block in self.tools.values():
            block.stop()

    async def retrying(self, text: str) -> None:
        """A model request is retried: one line, updated while the retries follow each other."""
        last = self.children[-1] if self.children else None
        if isinstance(last, NoticeLine) and last.has_class("-retry"):
            last.text = text
            last.update(Text(text))
            return
        line = NoticeLine(text, "warning")
        line.add_class("-retry")
        await self.add(line)
