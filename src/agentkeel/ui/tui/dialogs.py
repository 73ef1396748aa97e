"""Modal dialogs: the permission ask (the line mode's four answers, with the diff of an Edit or
Write so it can be accepted or rejected per file), and a generic chooser (rewind turn, rewind
mode, what to do with a session)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option


@dataclass(frozen=True)
class Choice:
    key: str  # the shortcut letter, and what the dialog returns
    label: str


def permission_choices(rules: tuple[str, ...] | list[str]) -> list[Choice]:
    """The same answers as the line mode: once, this session (with rules), this project, no."""
    choices = [Choice("y", "Yes, once")]
    if rules:
        joined = ", ".join(rules)
        choices.append(Choice("s", f"Yes, and allow {joined} for this session"))
        choices.append(Choice("p", f"Yes, and always allow {joined} in this project"))
    choices.append(Choice("n", "No, and tell the model what to do instead (esc)"))
    return choices


ANSWERS = {"y": "allow", "s": "allow_session", "p": "allow_project", "n": "deny"}


class ChooserScreen(ModalScreen[str | None]):
    """A titled list of choices; Enter or a choice's letter picks it, Esc cancels (None)."""

    DEFAULT_CSS = """
    ChooserScreen { align: center middle; }
    ChooserScreen > Vertical {
        width: 90%; max-width: 110; height: auto; max-height: 90%;
        border: round $accent; background: $panel; padding: 0 1;
    }
    ChooserScreen .dialog-title { text-style: bold; color: $accent; }
    ChooserScreen .dialog-body { height: auto; max-height: 60%; }
    ChooserScreen OptionList { height: auto; max-height: 12; border: none; padding: 0; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, title: str, choices: list[Choice], body: str = "", diff: str = "", cancel: str | None = None):
        super().__init__()
        self.dialog_title = title
        self.choices = choices
        self.body = body
        self.diff = diff
        self.cancel_value = cancel

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.dialog_title), classes="dialog-title")
            if self.body:
                yield Static(Text(self.body), classes="dialog-text")
            if self.diff:
                with VerticalScroll(classes="dialog-body"):
                    yield Static(Syntax(self.diff, "diff", theme="ansi_dark", background_color="default"))
            yield OptionList(*[Option(Text(f"[{c.key}] {c.label}"), id=c.key) for c in self.choices], id="choices")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def on_key(self, event: events.Key) -> None:
        key = event.character
        if key and any(c.key == key for c in self.choices):
            event.stop()
            self.dismiss(key)

    def action_cancel(self) -> None:
        self.dismiss(self.cancel_value)


def permission_dialog(reason: str, summary: str, rules: tuple[str, ...] | list[str], diff: str) -> ChooserScreen:
    title = "Apply this edit?" if diff else "Allow this tool call?"
    return ChooserScreen(title, permission_choices(rules), body=f"{summary}\n{reason}", diff=diff, cancel="n")
