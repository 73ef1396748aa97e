"""Consolidation: session summaries, reflexion lessons, per-agent MEMORY.md, the markdown mirror.

Nothing here calls a model by default. A session summary is extractive (the prompts, the
files touched, the commands and their exit codes, the last answer); a caller that wants a
model-written summary passes ``summarise`` with its own budget.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkeel.memory.model import Entry, now_iso, one_line
from agentkeel.memory.store import MemoryStore


def extractive_summary(entries: Sequence[Entry], limit_chars: int = 1200) -> str:
    prompts = [one_line(e.text, 160) for e in entries if e.type == "user_prompt"]
    files: dict[str, None] = {}
    commands: list[str] = []
    failures = 0
    for e in entries:
        if e.type != "tool_observation":
            continue
        path = e.metadata.get("file_path")
        if isinstance(path, str) and e.metadata.get("tool") in ("Write", "Edit", "MultiEdit", "NotebookEdit"):
            files[path] = None
        if "command" in e.metadata:
            code = e.metadata.get("exit_code")
            commands.append(
                f"{one_line(str(e.metadata['command']), 80)}" + (f" (exit {code})" if code is not None else "")
            )
        if e.metadata.get("success") is False:
            failures += 1
    answers = [e for e in entries if e.type == "assistant_response" and e.text.strip()]
    parts: list[str] = []
    if prompts:
        parts.append("Asked: " + " | ".join(prompts[:3]) + (f" (+{len(prompts) - 3} more)" if len(prompts) > 3 else ""))
    if files:
        parts.append("Changed: " + ", ".join(list(files)[:12]))
    if commands:
        parts.append("Ran: " + "; ".join(commands[-6:]))
    if failures:
        parts.append(f"{failures} tool call(s) failed")
    if answers:
        parts.append("Outcome: " + one_line(answers[-1].text, 300))
    return "\n".join(parts)[:limit_chars]


def summarise_session(
    store: MemoryStore,
    project: str,
    session: str,
    summarise: Callable[[str], str] | None = None,
) -> str | None:
    """Write (or supersede) the session's summary; returns its id, or None for an empty session."""
    entries = list(store.export(project=project, session=session))
    entries = [e for e in entries if e.type != "session_summary" and not e.superseded_by]
    if not entries:
        return None
    text = extractive_summary(entries)
    if summarise is not None:
        try:
            text = summarise(text) or text
        except Exception:  # a model summary is optional; the extractive one stands
            pass
    record = {
        "id": f"summary:{session}:{len(entries)}",
        "type": "session_summary",
        "project": project,
        "session": session,
        "timestamp": now_iso(),
        "text": text,
        "metadata": {"entries": len(entries), "summary": one_line(text, 140)},
    }
    previous = [e for e in store.recent(["session_summary"], project=project, limit=50) if e.session == session]
    if previous:
        return store.supersede(previous[0].id, record)
    store.add_many([record])
    return str(record["id"])


@dataclass
class Lesson:
    """A reflexion lesson after a task (seed 004 17-A)."""

    task_type: str
    success: bool
    score: float
    lessons: list[str]
    strengths: list[str] = field(default_factory=list)
    weaknesses: list[str] = field(default_factory=list)
    task: str = ""

    def text(self) -> str:
        lines = [
            f"{'Succeeded' if self.success else 'Failed'} at {self.task_type} (score {self.score:.2f}): {self.task}"
        ]
        lines += [f"Lesson: {item}" for item in self.lessons]
        lines += [f"Worked: {item}" for item in self.strengths]
        lines += [f"Fell short: {item}" for item in self.weaknesses]
        return "\n".join(lines)


def record_lesson(store: MemoryStore, lesson: Lesson, project: str = "", session: str = "") -> str:
    from agentkeel.memory.model import new_record_id

    record_id = new_record_id()
    store.add_many(
        [
            {
                "id": record_id,
                "type": "lesson",
                "project": project,
                "session": session,
                "timestamp": now_iso(),
                "text": lesson.text(),
                "metadata": {
                    "task_type": lesson.task_type,
                    "success": lesson.success,
                    "score": lesson.score,
                    "strengths": lesson.strengths,
                    "weaknesses": lesson.weaknesses,
                    "lessons": lesson.lessons,
                    "summary": one_line("; ".join(lesson.lessons) or lesson.task, 140),
                },
            }
        ]
    )
    return record_id


def lessons_for(store: MemoryStore, task: str, project: str | None = None, k: int = 3) -> list[Any]:
    """Lessons from similar tasks (this project's first, then anyone's)."""
    hits = store.search(task, k=k, type="lesson", project=project) if project else []
    if len(hits) < k:
        seen = {h.id for h in hits}
        hits += [h for h in store.search(task, k=k, type="lesson") if h.id not in seen][: k - len(hits)]
    return hits


# -- per-agent-type MEMORY.md ----------------------------------------------------------------------


def agent_memory_files(agent_type: str, cwd: Path, keel_home: Path) -> list[tuple[str, Path]]:
    """``MEMORY.md`` for an agent type at user, project and local scope (read in that order)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", agent_type or "main")
    return [
        ("user", keel_home / "agents" / safe / "MEMORY.md"),
        ("project", cwd / ".keel" / "agents" / safe / "MEMORY.md"),
        ("local", cwd / ".keel" / "agents" / safe / "MEMORY.local.md"),
    ]


def read_agent_memory(agent_type: str, cwd: Path, keel_home: Path, limit_chars: int = 4000) -> str:
    parts: list[str] = []
    for scope, path in agent_memory_files(agent_type, cwd, keel_home):
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text:
            parts.append(f"<!-- {scope}: {path} -->\n{text}")
    return "\n\n".join(parts)[:limit_chars]


# -- the human-editable markdown mirror ----------------------------------------------------------

_LINE = re.compile(r"^- \[(?P<id>[^\]]+)\] (?P<text>.*)$")
MIRRORED = ("fact", "lesson", "session_summary")


def write_mirror(store: MemoryStore, path: Path, project: str) -> int:
    """Facts, lessons and session summaries of a project as ``- [id] text`` lines, grouped by type."""
    by_type: dict[str, list[Entry]] = {t: [] for t in MIRRORED}
    for entry in store.export(project=project, type=list(MIRRORED)):
        if not entry.superseded_by:
            by_type[entry.type].append(entry)
    lines = [
        f"# keel memory: {project}",
        "",
        "Edit a line to correct it (the old entry is superseded, not deleted); add `- text` lines for new facts;",
        "then run `keel mem sync`.",
        "",
    ]
    for kind in MIRRORED:
        lines.append(f"## {kind}")
        lines += [f"- [{e.id}] {' '.join(e.text.split())}" for e in by_type[kind]]
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return sum(len(v) for v in by_type.values())


def sync_mirror(store: MemoryStore, path: Path, project: str) -> dict[str, int]:
    """Apply a mirror's edits: changed lines supersede their entry, new ``- text`` lines become facts."""
    from agentkeel.memory.model import new_record_id

    current = {e.id: e for e in store.export(project=project, type=list(MIRRORED)) if not e.superseded_by}
    kind = "fact"
    changed = added = 0
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.startswith("## "):
            kind = raw[3:].strip() if raw[3:].strip() in MIRRORED else "fact"
            continue
        match = _LINE.match(raw)
        if match:
            old = current.get(match["id"])
            if old is not None and " ".join(old.text.split()) != match["text"].strip():
                store.supersede(
                    old.id,
                    {
                        "id": new_record_id(),
                        "type": old.type,
                        "project": project,
                        "text": match["text"].strip(),
                        "metadata": {**old.metadata, "edited": True},
                    },
                )
                changed += 1
        elif raw.startswith("- ") and raw[2:].strip():
            store.add_many([{"id": new_record_id(), "type": kind, "project": project, "text": raw[2:].strip()}])
            added += 1
    write_mirror(store, path, project)
    return {"changed": changed, "added": added}
