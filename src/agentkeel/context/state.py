"""The working state that survives compaction, maintained from the event stream.

Current task (the user's latest request), files in play (read or changed), decisions with their
reasons and key facts (lines the model writes as ``Decision: ... because ...`` / ``Fact: ...``),
and the open todos (TodoWrite). It is rebuilt from the session log on resume (every event it reads
is persisted), carried in each compaction event, and re-injected after every compaction.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from agentkeel.core.events import AssistantMessage, Event, TodosUpdated, ToolFinished, ToolResults, UserMessage
from agentkeel.core.tools import Effects
from agentkeel.core.types import TextBlock, ToolResultBlock
from agentkeel.tools import effects_of

_DECISION = re.compile(
    r"^\s*(?:[-*]\s*)?(?:\*\*)?(?:decision|decided)(?:\*\*)?\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE
)
_FACT = re.compile(
    r"^\s*(?:[-*]\s*)?(?:\*\*)?(?:key fact|fact|note)(?:\*\*)?\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE
)
_MAX_ITEMS = 20
_MAX_TASK = 1500
_MAX_SKILLS = 3  # the most recent skills re-injected after a compaction
_MAX_SKILL_CHARS = 8000
_SKILL_NAME = re.compile(r"\A<command-name>/([^<\s]+)</command-name>")
_SKILL_MARK = "Base directory for this skill:"  # how an inline skill's text is framed (skills/run.py)


class ResumedView(msgspec.Struct, frozen=True):
    """A resumed session's view started at a compaction of the log (a service, see
    ``ContextManager.replay``): its ``messages`` (how many) and the context before it, in tokens.
    The first request after that compaction held exactly those messages; per-request transforms
    that depend on what was sent before (pruning) rebuild their state from it."""

    messages: int
    tokens_before: int


def touches_files(effects: Effects) -> bool:
    """A call of a tool with these effects reads or changes the files its paths name."""
    return bool(effects.path_fields) and (effects.reads or effects.writes)


def named_path(effects: Effects, tool_input: dict[str, Any]) -> str:
    """The first path the call names, as the model wrote it ('' when none)."""
    for field in effects.path_fields:
        value = tool_input.get(field)
        if isinstance(value, str) and value:
            return value
    return ""


def _push(items: list[str], value: str, limit: int = _MAX_ITEMS) -> None:
    value = value.strip()
    if not value:
        return
    if value in items:
        items.remove(value)
    items.append(value)
    del items[:-limit]


class WorkingState(msgspec.Struct):
    task: str = ""
    files: list[str] = msgspec.field(default_factory=list)
    changed: list[str] = msgspec.field(default_factory=list)
    decisions: list[str] = msgspec.field(default_factory=list)
    facts: list[str] = msgspec.field(default_factory=list)
    todos: list[dict[str, Any]] = msgspec.field(default_factory=list)
    # active skills: name -> the skill's expanded text as the conversation got it (the Skill tool's
    # result, or a /name the user typed); re-injected after a compaction, which would drop it.
    # A skill's text is known by its frame (skills/run.py), whichever tool returned it.
    skills: dict[str, str] = msgspec.field(default_factory=dict)

    def _skill_used(self, text: str) -> None:
        m = _SKILL_NAME.match(text)
        if m is None or _SKILL_MARK not in text:
            return
        self.skills.pop(m[1], None)
        self.skills[m[1]] = text[:_MAX_SKILL_CHARS]
        while len(self.skills) > _MAX_SKILLS:
            self.skills.pop(next(iter(self.skills)))

    def on_event(self, event: Event) -> None:
        if isinstance(event, UserMessage):
            text = "".join(b.text for b in event.message.content if isinstance(b, TextBlock)).strip()
            if text and not text.startswith("<"):
                self.task = text[:_MAX_TASK]
            elif text:
                self._skill_used(text)
        elif isinstance(event, ToolResults):
            for block in event.message.content:
                if isinstance(block, ToolResultBlock) and not block.is_error:
                    self._skill_used(block.text())
        elif isinstance(event, AssistantMessage):
            text = event.message.text()
            for m in _DECISION.finditer(text):
                _push(self.decisions, m[1])
            for m in _FACT.finditer(text):
                _push(self.facts, m[1])
        elif isinstance(event, ToolFinished) and touches_files(effects := effects_of(event.name)):
            path = named_path(effects, event.input)
            if path:
                _push(self.files, path)
                if effects.writes and not event.is_error:
                    _push(self.changed, path)
        elif isinstance(event, TodosUpdated):
            self.todos = [dict(t) for t in event.todos]

    def open_todos(self) -> list[dict[str, Any]]:
        return [t for t in self.todos if t.get("status") != "completed"]

    def snapshot(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "files": list(self.files),
            "changed": list(self.changed),
            "decisions": list(self.decisions),
            "facts": list(self.facts),
            "todos": [dict(t) for t in self.todos],
            "skills": sorted(self.skills),
        }

    def render(self) -> str:
        lines = ["<working-state>"]
        if self.task:
            lines += ["Current task (the user's latest request):", self.task]
        if self.files:
            changed = set(self.changed)
            lines.append("Files in play: " + ", ".join(f + (" (changed)" if f in changed else "") for f in self.files))
        if self.decisions:
            lines.append("Decisions taken (keep to them unless the user says otherwise):")
            lines += [f"- {d}" for d in self.decisions]
        if self.facts:
            lines.append("Key facts:")
            lines += [f"- {f}" for f in self.facts]
        todos = self.open_todos()
        if todos:
            lines.append("Open todos:")
            lines += [f"- [{t.get('status', 'pending')}] {t.get('content', '')}" for t in todos]
        lines.append("</working-state>")
        return "\n".join(lines) if len(lines) > 2 else ""

    def render_skills(self) -> str:
        if not self.skills:
            return ""
        parts = "\n\n".join(self.skills.values())
        return f"Skills in use (re-loaded after compaction; keep following them):\n{parts}"
