"""The frame around the chat: the header (model, permission mode, status, turn), the meter
(context used, cost), and the sidebar (this project's sessions, the todo list, background
agents). Each is a plain widget the app updates from bus events."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import ListItem, ListView, Static

MODES = ("default", "acceptEdits", "plan")  # what Shift-Tab cycles through, as in Claude Code
MODE_LABELS = {
    "default": "default",
    "acceptEdits": "accept edits",
    "plan": "plan mode",
    "bypassPermissions": "bypass permissions",
    "dontAsk": "don't ask",
}


def next_mode(current: str) -> str:
    """Shift-Tab: default -> acceptEdits -> plan -> default. bypassPermissions (only when the
    session started with it) joins the cycle after plan."""
    cycle = (*MODES, "bypassPermissions") if current == "bypassPermissions" else MODES
    if current not in cycle:
        return "default"
    return cycle[(cycle.index(current) + 1) % len(cycle)]


@dataclass
class SessionEntry:
    session_id: str
    title: str
    turns: int
    cost_usd: float
    parent_id: str | None = None


def project_sessions(home: Path, cwd: Path, limit: int = 50) -> list[SessionEntry]:
    """This project's sessions, newest first: the session index when it is there (title, turns,
    cost), else the session files themselves."""
    try:
        from agentkeel.session.index import SessionIndex

        rows = SessionIndex(home).list(cwd, limit=limit)
        return [SessionEntry(r.session_id, r.title or r.first_prompt, r.turns, r.cost_usd, r.parent_id) for r in rows]
    except Exception:  # not merged yet, or a damaged index: fall back to the files (fail open)
        pass
    from agentkeel.session.load import list_sessions
    from agentkeel.session.store import project_dir

    return [SessionEntry(s.id, s.first_prompt, 0, 0.0) for s in list_sessions(project_dir(home, cwd))[:limit]]


class HeaderBar(Static):
    DEFAULT_CSS = """
    HeaderBar { dock: top; height: 1; background: $primary; color: $text; padding: 0 1; }
    """

    def show(self, model: str, mode: str, status: str, turn: int, session_id: str) -> None:
        line = Text()
        line.append("keel", style="bold")
        line.append(f" · {model} · ")
        line.append(f"⏵⏵ {MODE_LABELS.get(mode, mode)}", style="bold" if mode != "default" else "")
        line.append(f" · {status} · turn {turn} · {session_id[:8]}")
        self.update(line)


class MeterBar(Static):
    DEFAULT_CSS = """
    MeterBar { height: 1; color: $text-muted; padding: 0 1; }
    """

    def show(self, used: int, window: int, cost: float, hint: str) -> None:
        pct = 100.0 * used / window if window else 0.0
        cells = 10
        filled = min(cells, round(pct / 100 * cells))
        line = Text()
        line.append("ctx ")
        line.append("█" * filled + "░" * (cells - filled), style="bold red" if pct > 80 else "")
        line.append(f" {pct:.0f}% ({_k(used)}/{_k(window)}) · ${cost:.4f}")
        if hint:
            line.append(f" · {hint}")
        self.update(line)


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


class SessionItem(ListItem):
    def __init__(self, entry: SessionEntry, current: bool) -> None:
        self.entry = entry
        mark = "●" if current else "○"
        title = (entry.title or "(no prompt yet)").replace("\n", " ")
        meta = f"{entry.session_id[:8]}"
        if entry.turns:
            meta += f" · {entry.turns} turn{'s' if entry.turns != 1 else ''}"
        if entry.cost_usd:
            meta += f" · ${entry.cost_usd:.2f}"
        if entry.parent_id:
            meta += " · fork"
        super().__init__(Static(Text(f"{mark} {title[:60]}\n  {meta}"), markup=False))


class Sidebar(VerticalScroll):
    DEFAULT_CSS = """
    Sidebar { width: 38; dock: right; border-left: solid $primary-background; padding: 0 1; }
    Sidebar .side-title { text-style: bold; color: $accent; margin: 1 0 0 0; }
    Sidebar ListView { height: auto; max-height: 16; background: transparent; }
    Sidebar .side-body { color: $text; }
    """

    def compose(self) -> Any:
        yield Static("Sessions", classes="side-title")
        yield ListView(id="sessions")
        yield Static("Todos", classes="side-title")
        yield Static("(none)", id="todos", classes="side-body", markup=False)
        yield Static("Background agents", classes="side-title")
        yield Static("(none)", id="agents", classes="side-body", markup=False)

    async def show_sessions(self, entries: list[SessionEntry], current: str) -> None:
        view = self.query_one("#sessions", ListView)
        await view.clear()
        await view.extend([SessionItem(e, e.session_id == current) for e in entries])

    def show_todos(self, todos: list[dict[str, Any]]) -> None:
        self.query_one("#todos", Static).update(todo_text(todos))

    def show_agents(self, agents: list[tuple[str, str]]) -> None:
        text = "\n".join(f"{'◐' if status == 'running' else '●'} {name} {status}" for name, status in agents)
        self.query_one("#agents", Static).update(Text(text or "(none)"))


def todo_text(todos: list[dict[str, Any]]) -> Text:
    if not todos:
        return Text("(none)")
    out = Text()
    for item in todos:
        status = str(item.get("status", "pending"))
        mark = {"completed": "☒", "in_progress": "◐"}.get(status, "☐")
        label = str(
            item.get("activeForm") if status == "in_progress" and item.get("activeForm") else item.get("content", "")
        )
        style = "strike dim" if status == "completed" else ("bold" if status == "in_progress" else "")
        out.append(f"{mark} {label}\n", style=style)
    out.rstrip()
    return out
