"""Modal dialogs: the permission ask (the line mode's four answers, with the diff of an Edit or
Write so it can be accepted or rejected per file), and a generic chooser (rewind turn, rewind
mode, what to do with a session)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
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


class ElicitationScreen(ModalScreen[dict[str, Any] | str | None]):
    """An MCP server's form (``elicitation/create``): one field per property of its schema, filled
    with the schema's defaults. Enter accepts (the values, typed as the schema says), Ctrl-D
    declines, Esc cancels."""

    DEFAULT_CSS = """
    ElicitationScreen { align: center middle; }
    ElicitationScreen > VerticalScroll {
        width: 90%; max-width: 110; height: auto; max-height: 90%;
        border: round $accent; background: $panel; padding: 0 1;
    }
    ElicitationScreen .dialog-title { text-style: bold; color: $accent; }
    ElicitationScreen .field-label { color: $text-muted; }
    ElicitationScreen .dialog-error { color: $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel"),
        Binding("ctrl+d", "decline", "decline"),
    ]

    def __init__(self, server: str, message: str, schema: dict[str, Any]) -> None:
        super().__init__()
        self.server = server
        self.message = message
        props = schema.get("properties")
        self.fields: dict[str, dict[str, Any]] = props if isinstance(props, dict) else {}
        self.required = set(schema.get("required") or [])

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(f"MCP server {self.server} asks"), classes="dialog-title")
            yield Static(Text(self.message), classes="dialog-text")
            for name, spec in self.fields.items():
                label = spec.get("title") or name
                if spec.get("description"):
                    label += f": {spec['description']}"
                if isinstance(spec.get("enum"), list):
                    label += f" ({' | '.join(map(str, spec['enum']))})"
                yield Static(Text(label + (" *" if name in self.required else "")), classes="field-label")
                default = spec.get("default")
                value = (
                    ", ".join(map(str, default))
                    if isinstance(default, list)
                    else ("" if default is None else str(default))
                )
                yield Input(value=value, id=f"field-{name}")
            yield Static("", classes="dialog-error", id="error")
            yield Static(Text("Enter: send · Ctrl-D: decline · Esc: cancel"), classes="field-label")

    def on_mount(self) -> None:
        inputs = self.query(Input)
        if inputs:
            inputs.first().focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        content, problem = form_values(
            self.fields, self.required, {n: self.query_one(f"#field-{n}", Input).value for n in self.fields}
        )
        if problem:
            self.query_one("#error", Static).update(Text(problem))
            return
        self.dismiss(content)

    def action_decline(self) -> None:
        self.dismiss("decline")

    def action_cancel(self) -> None:
        self.dismiss(None)


def form_values(
    fields: dict[str, dict[str, Any]], required: set[str], typed: dict[str, str]
) -> tuple[dict[str, Any], str]:
    """The form's answers as the schema types them (an empty field is left out), or what is wrong."""
    out: dict[str, Any] = {}
    for name, spec in fields.items():
        text = typed.get(name, "").strip()
        if not text:
            if name in required:
                return {}, f"{spec.get('title') or name} is required"
            continue
        kind = spec.get("type")
        try:
            if kind == "integer":
                out[name] = int(text)
            elif kind == "number":
                out[name] = float(text)
            elif kind == "boolean":
                out[name] = text.lower() in ("y", "yes", "true", "1", "on")
            elif kind == "array":
                out[name] = [part.strip() for part in text.split(",") if part.strip()]
            else:
                out[name] = text
        except ValueError:
            return {}, f"{spec.get('title') or name} must be a {kind}"
    return out, ""
