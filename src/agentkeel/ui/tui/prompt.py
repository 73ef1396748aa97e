"""The input box: Enter sends; Shift-Enter, Ctrl-J or a trailing backslash add a line; Up/Down
walk the history at the first/last line; ``/`` completes commands from the session's registry
(with their argument hints) and ``@`` completes file paths with a fuzzy match."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import OptionList, Static, TextArea
from textual.widgets.option_list import Option

from agentkeel.ui.tui.files import History, fuzzy_rank, mention_at, project_files


@dataclass(frozen=True)
class Suggestion:
    label: str  # what the list shows
    start: int  # the text offset the replacement starts at
    end: int
    insert: str  # what replaces text[start:end]


class Completer:
    """Suggestions for the text before the cursor: commands or file mentions."""

    def __init__(self, commands: Callable[[str], list[dict[str, str]]], cwd: Path) -> None:
        self.commands = commands
        self.cwd = cwd
        self._files: list[str] | None = None

    @property
    def files(self) -> list[str]:
        if self._files is None:
            self._files = project_files(self.cwd)
        return self._files

    def suggest(self, text: str, cursor: int) -> list[Suggestion]:
        head = text[:cursor]
        if head.startswith("/") and " " not in head and "\n" not in head:
            return [
                Suggestion(
                    " ".join(x for x in (c["name"], c["argument_hint"], "·", c["description"]) if x)[:100],
                    0,
                    cursor,
                    c["name"] + " ",
                )
                for c in self.commands(head)[:20]
            ]
        mention = mention_at(text, cursor)
        if mention is not None:
            start, word = mention
            return [Suggestion("@" + path, start, cursor, "@" + path + " ") for path in fuzzy_rank(word, self.files)]
        return []

    def hint(self, text: str) -> str:
        """``/name `` typed: that command's argument hint and description."""
        if not text.startswith("/") or "\n" in text:
            return ""
        name, sep, args = text.partition(" ")
        if not sep or args.strip():
            return ""
        for item in self.commands(name):
            if item["name"] == name:
                return f"{name} {item['argument_hint']}  {item['description']}".strip()
        return ""


class PromptInput(TextArea):
    DEFAULT_CSS = """
    PromptInput { height: auto; min-height: 3; max-height: 10; border: round $primary; padding: 0 1; }
    PromptInput:focus { border: round $accent; }
    """

    class Submitted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, completer: Completer, history: History, dropdown: OptionList, hint: Static) -> None:
        super().__init__("", id="prompt", soft_wrap=True, show_line_numbers=False, tab_behavior="focus")
        self.completer = completer
        self.prompt_history = history
        self.dropdown = dropdown
        self.hint = hint
        self.suggestions: list[Suggestion] = []
        self.highlight_cursor_line = False

    # --- completion ---------------------------------------------------------------------

    def _offset(self) -> int:
        row, col = self.cursor_location
        lines = self.text.split("\n")
        return sum(len(line) + 1 for line in lines[:row]) + col

    def refresh_suggestions(self) -> None:
        self.suggestions = self.completer.suggest(self.text, self._offset())
        self.dropdown.clear_options()
        if self.suggestions:
            self.dropdown.add_options([Option(Text(s.label)) for s in self.suggestions])
            self.dropdown.highlighted = 0
        self.dropdown.display = bool(self.suggestions)
        hint = "" if self.suggestions else self.completer.hint(self.text)
        self.hint.update(Text(hint))
        self.hint.display = bool(hint)

    def accept_suggestion(self, index: int | None = None) -> None:
        chosen = self.dropdown.highlighted if index is None else index
        if chosen is None or not (0 <= chosen < len(self.suggestions)):
            return
        s = self.suggestions[chosen]
        text = self.text[: s.start] + s.insert + self.text[s.end :]
        self.set_text(text, s.start + len(s.insert))
        self.refresh_suggestions()

    def _stale(self) -> bool:
        """The list shown is not the one for the text typed now (its change is still queued)."""
        return self.completer.suggest(self.text, self._offset()) != self.suggestions

    def _typed_in_full(self) -> bool:
        """The highlighted suggestion is what is typed already (``/rewind``): Enter sends it."""
        chosen = self.dropdown.highlighted
        if chosen is None or not (0 <= chosen < len(self.suggestions)):
            return False
        s = self.suggestions[chosen]
        return self.text[s.start : s.end].strip() == s.insert.strip()

    def set_text(self, text: str, cursor: int | None = None) -> None:
        self.load_text(text)
        where = len(text) if cursor is None else cursor
        before = text[:where].split("\n")
        self.cursor_location = (len(before) - 1, len(before[-1]))

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        self.refresh_suggestions()

    # --- keys ---------------------------------------------------------------------------

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        self.app.last_input = time.monotonic()  # type: ignore[attr-defined]  # streaming defers to typing
        open_list = self.dropdown.display and bool(self.suggestions)
        if open_list and key in ("enter", "tab") and self._stale():
            self.refresh_suggestions()  # keys came faster than the list followed: act on what is typed
            open_list = bool(self.suggestions)
        handled = True
        if open_list and key == "enter" and self._typed_in_full():
            self._submit()
        elif open_list and key in ("tab", "enter"):
            self.accept_suggestion()
        elif open_list and key in ("up", "down"):
            count = len(self.suggestions)
            current = self.dropdown.highlighted or 0
            self.dropdown.highlighted = (current + (1 if key == "down" else -1)) % count
        elif open_list and key == "escape":
            self.dropdown.display = False
        elif key in ("shift+enter", "ctrl+j", "alt+enter"):
            self.insert("\n")
        elif key == "enter":
            if self.text.endswith("\\") and self._offset() == len(self.text):
                self.set_text(self.text[:-1] + "\n")
            else:
                self._submit()
        elif key == "up" and self.cursor_at_first_line:
            previous = self.prompt_history.previous()
            if previous is not None:
                self.set_text(previous)
        elif key == "down" and self.cursor_at_last_line:
            following = self.prompt_history.next()
            if following is not None:
                self.set_text(following)
        else:
            handled = False
        if handled:
            event.stop()
            event.prevent_default()
            return
        await super()._on_key(event)

    def _submit(self) -> None:
        text = self.text.strip()
        if not text:
            return
        self.prompt_history.add(text)
        self.set_text("")
        self.dropdown.display = False
        self.post_message(self.Submitted(text))


def dropdown_widgets() -> tuple[OptionList, Static]:
    dropdown = OptionList(id="completions")
    dropdown.can_focus = False
    dropdown.display = False
    hint = Static("", id="arghint", markup=False)
    hint.display = False
    return dropdown, hint
