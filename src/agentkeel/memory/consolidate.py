"""Consolidation: session summaries, reflexion lessons, per-agent MEMORY.md, the markdown mirror.

Nothing here calls a model by default. A session summary is extractive (the prompts, the
files touched, the commands and their exit codes, the last answer); a caller that wants a
model-written summary passes ``summarise`` with its own budget.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from agentkeel.memory.model import Entry, now_iso, one_line
from agentkeel.memory.store import MemoryStore
from agentkeel.tools import effects_of


def extractive_summary(entries: Sequence[Entry], limit_chars: int = 1200) -> str:
    prompts = [one_line(e.text, 160) for e in entries if e.type == "user_prompt"]
    files: dict[str, None] = {}
    commands: list[str] = []
    failures = 0
    refused: dict[str, int] = {}
    for e in entries:
        if e.type != "tool_observation":
            continue
        if e.metadata.get("denied"):  # never ran: nothing changed, nothing was run
            tool = str(e.metadata.get("tool"))
            refused[tool] = refused.get(tool, 0) + 1
            continue
        path = e.metadata.get("file_path")
        if isinstance(path, str) and _edits(e):
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
    if refused:
        parts.append(f"Not run (denied): {_tally(refused)}")
    if answers:
        parts.append("Outcome: " + one_line(answers[-1].text, 300))
    return "\n".join(parts)[:limit_chars]


class Lesson(msgspec.Struct):
    """A reflexion lesson after a task (seed 004 17-A)."""

    task_type: str
    success: bool
    score: float
    lessons: list[str]
    strengths: list[str] = msgspec.field(default_factory=list)
    weaknesses: list[str] = msgspec.field(default_factory=list)
    task: str = ""

    def text(self) -> str:
        lines = [
            f"{'Succeeded' if self.success else 'Failed'} at {self.task_type} (score {self.score:.2f}): {self.task}"
        ]
        lines += [f"Lesson: {item}" for item in self.lessons]
        lines += [f"Worked: {item}" for item in self.strengths]
        lines += [f"Fell short: {item}" for item in self.weaknesses]
        return "\n".join(lines)


def lesson_record(lesson: Lesson, project: str = "", session: str = "") -> dict[str, Any]:
    from agentkeel.memory.model import new_record_id

    return {
        "id": new_record_id(),
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


_TASK_TYPES = (
    ("bugfix", re.compile(r"\b(fix|bug|broken|crash|error|fail\w*|regression|issue)\b", re.I)),
    ("testing", re.compile(r"\b(tests?|coverage|pytest|jest|spec)\b", re.I)),
    ("refactor", re.compile(r"\b(refactor\w*|rename|clean\s*up|simplify|extract|move)\b", re.I)),
    ("feature", re.compile(r"\b(add|implement|create|build|support|introduce|write)\b", re.I)),
    ("review", re.compile(r"\b(review|audit|check)\b", re.I)),
    ("question", re.compile(r"^\s*(what|why|how|where|which|who|explain|describe)\b", re.I)),
)
_CHECK = re.compile(
    r"\b(pytest|tox|nox|unittest|jest|vitest|mocha|go (test|vet|build)|cargo (test|check|build|clippy)|"
    r"(npm|pnpm|yarn|bun) (run )?(test|build|lint|check)|make( \w+)?|mypy|pyright|ruff|eslint|tsc|gradle|mvn)\b"
)


def _edits(e: Entry) -> bool:
    """The observation is of a call that changes files (as its tool declares)."""
    return effects_of(str(e.metadata.get("tool"))).writes


def task_type(task: str) -> str:
    for name, pattern in _TASK_TYPES:
        if pattern.search(task):
            return name
    return "general"


def reflect(entries: Sequence[Entry]) -> Lesson | None:
    """A reflexion lesson from what a session did, with no model call.

    The signal is the session's own evidence: the last check it ran (tests, build, lint) and
    its exit code, which tool calls failed and what worked after them, whether edits were ever
    verified. A session that ran no tool taught nothing worth a lesson and returns None.
    """
    prompts = [e for e in entries if e.type == "user_prompt"]
    calls = [e for e in entries if e.type == "tool_observation"]
    if not prompts or not calls:
        return None
    task = one_line(prompts[0].text, 160)
    refused = [e for e in calls if e.metadata.get("denied")]  # denied or invalid: never ran
    runs = [e for e in calls if not e.metadata.get("denied")]
    refused_tally = _tally(_counts(refused))
    if not runs:
        return Lesson(
            task_type=task_type(task),
            success=False,
            score=0.0,
            lessons=[
                f"every tool call of the session was denied ({refused_tally}): nothing it proposed was carried out"
            ],
            weaknesses=[f"{len(refused)} tool call(s) denied: {refused_tally}"],
            task=task,
        )
    failed = [e for e in runs if e.metadata.get("success") is False]
    checks = [e for e in runs if _CHECK.search(str(e.metadata.get("command", "")))]
    # the files it changed: an edit that failed (old_string not found, a stale Read) changed nothing
    edited = list(dict.fromkeys(str(e.metadata.get("file_path")) for e in runs if _edits(e) and _succeeded(e)))
    last_check = checks[-1] if checks else None
    check_ok = None if last_check is None else _succeeded(last_check)
    ok_ratio = 1 - (len(failed) + len(refused)) / len(calls)
    if check_ok is None:
        success = _succeeded(runs[-1])
        score = 0.5 * ok_ratio + 0.25
    else:
        success = check_ok
        score = 0.5 * ok_ratio + (0.5 if check_ok else 0.0)
    if not edited and any(_edits(e) for e in [*refused, *failed]):
        success = False  # the change it set out to make was never made
        score = min(score, 0.25)

    strengths: list[str] = []
    weaknesses: list[str] = []
    lessons: list[str] = []
    if last_check is not None:
        command = one_line(str(last_check.metadata.get("command")), 80)
        code = last_check.metadata.get("exit_code")
        if check_ok:
            strengths.append(f"verified with `{command}`" + (f" (exit {code})" if code is not None else ""))
        else:
            weaknesses.append(f"`{command}` still failing at the end" + (f" (exit {code})" if code is not None else ""))
            lessons.append(f"`{command}` was still failing when the session ended; start from its output")
    elif edited:
        weaknesses.append(f"changed {len(edited)} file(s) without running a test or build")
        lessons.append("run the project's tests or build after editing; this session never checked its change")
    if edited:
        strengths.append("changed " + ", ".join(edited[:5]))
    if failed:
        weaknesses.append(f"{len(failed)} tool call(s) failed: " + _tally(_counts(failed)))
    if refused:
        weaknesses.append(f"{len(refused)} tool call(s) denied: {refused_tally}")
        if not success:
            lessons.append(f"{refused_tally} denied: ask for the permission the task needs, or find another way")
    for bad, fix in _recoveries(runs):
        lessons.append(f"{bad.metadata.get('tool')} failed ({_describe(bad)}); what worked next: {_describe(fix)}")
    if success and not lessons:
        steps = list(dict.fromkeys(_step(e) for e in runs))
        lessons.append("an approach that worked: " + " -> ".join(steps[:8]))
    return Lesson(
        task_type=task_type(task),
        success=success,
        score=round(max(0.0, min(1.0, score)), 2),
        lessons=lessons[:4],
        strengths=strengths,
        weaknesses=weaknesses,
        task=task,
    )


def _counts(entries: Sequence[Entry]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in entries:
        counts[str(e.metadata.get("tool"))] = counts.get(str(e.metadata.get("tool")), 0) + 1
    return counts


def _tally(counts: dict[str, int]) -> str:
    return ", ".join(f"{t} x{n}" for t, n in counts.items())


def _succeeded(entry: Entry) -> bool:
    code = entry.metadata.get("exit_code")
    return entry.metadata.get("success") is not False and (code is None or code == 0)


def _describe(entry: Entry) -> str:
    """`command` (exit n) for a shell run, else the observation's first line (which carries a tool's error)."""
    if "command" in entry.metadata:
        code = entry.metadata.get("exit_code")
        return f"`{one_line(str(entry.metadata['command']), 80)}`" + (f" exit {code}" if code is not None else "")
    return one_line((entry.text.strip().splitlines() or [""])[0], 100)


def _step(entry: Entry) -> str:
    tool = str(entry.metadata.get("tool"))
    if "command" in entry.metadata:
        return f"{tool} `{one_line(str(entry.metadata['command']), 40)}`"
    path = entry.metadata.get("file_path")
    return f"{tool} {Path(str(path)).name}" if path else tool


def _recoveries(runs: Sequence[Entry]) -> list[tuple[Entry, Entry]]:
    """Each failed tool call paired with the next successful call of the same tool."""
    pairs: list[tuple[Entry, Entry]] = []
    for i, bad in enumerate(runs):
        if _succeeded(bad):
            continue
        tool = bad.metadata.get("tool")
        fix = next((e for e in runs[i + 1 :] if e.metadata.get("tool") == tool and _succeeded(e)), None)
        if fix is not None and all(fix is not f for _, f in pairs):
            pairs.append((bad, fix))
    return pairs[:3]


def lessons_for(
    store: MemoryStore, task: str, project: str | None = None, k: int = 3, others: bool = False
) -> list[Any]:
    """Lessons from similar tasks: this project's; with ``others`` (the user's
    ``memory.crossProject``), this project's first, then anyone's, from one search of every
    project's lessons (each search scans the word index once; the first prompt makes this one)."""
    if project and not others:
        return store.search(task, k=k, type="lesson", project=project)
    hits = store.search(task, k=LESSON_POOL, type="lesson")
    if project:
        hits = [h for h in hits if h.project == project] + [h for h in hits if h.project != project]
    return hits[:k]


LESSON_POOL = 30  # the best lessons of every project that this project's are picked from first


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


_HEADER = (
    "Edit a line to correct it (the old entry is superseded, not deleted); add `- text` lines for new facts;",
    "then run `keel mem sync`.",
)
_KEPT = "## kept as you wrote them (`keel mem sync` reads only `- text` lines)"


class MirrorError(ValueError):
    """The mirror cannot be read (not UTF-8, not a file); the message is one line."""


def write_mirror(store: MemoryStore, path: Path, project: str, kept: Sequence[str] = ()) -> int:
    """Facts, lessons and session summaries of a project as ``- [id] text`` lines, grouped by type;
    ``kept``: lines of the user's that are no entry, written back at the end as they were."""
    by_type: dict[str, list[Entry]] = {t: [] for t in MIRRORED}
    for entry in store.export(project=project, type=list(MIRRORED)):
        if not entry.superseded_by:
            by_type[entry.type].append(entry)
    lines = [f"# keel memory: {project}", "", *_HEADER, ""]
    for kind in MIRRORED:
        lines.append(f"## {kind}")
        lines += [f"- [{e.id}] {' '.join(e.text.split())}" for e in by_type[kind]]
        lines.append("")
    if kept:
        lines += [_KEPT, *kept, ""]
    _replace_text(path, "\n".join(lines))
    return sum(len(v) for v in by_type.values())


def _writer_alive(pid: str) -> bool:
    """Whether the process that named a temporary file (``.<name>.<pid>.tmp``) is still running: a
    second ``keel mem sync`` at the same time must not delete the first one's file mid-write."""
    import os

    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # alive, another user's
    return True


def _replace_text(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a kill mid-write must not leave the user's mirror torn);
    a symbolic link stays a link (its target is written) and an existing file keeps its mode."""
    import os

    from agentkeel.config.localfiles import ignore_local_files

    path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    ignore_local_files(path)  # in a project's .keel/: git-ignored, as keel's other local files there
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):  # left by a write a kill interrupted
        if not _writer_alive(stale.name.removesuffix(".tmp").rsplit(".", 1)[-1]):
            stale.unlink(missing_ok=True)
    try:
        mode: int | None = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


_LESSON_HEAD = re.compile(r"^(?P<outcome>Succeeded|Failed) at (?P<kind>[\w-]+) \(score (?P<score>[0-9.]+)\): ?")
_LESSON_PART = re.compile(r"(?:^|\s)(Lesson|Worked|Fell short): ")


def edited(kind: str, text: str, metadata: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The text and metadata of an entry the user rewrote in the mirror: every field derived from
    the old wording (the one-line summary searches show; a lesson's outcome, score and lists) is
    derived again from the new one, so nothing keeps saying what the user corrected."""
    meta = {**metadata, "edited": True, "summary": one_line(text, 140)}
    if kind != "lesson":
        return text, meta
    head = _LESSON_HEAD.match(text)
    body = text[head.end() :] if head else text
    pieces = _LESSON_PART.split(body)
    lists: dict[str, list[str]] = {"Lesson": [], "Worked": [], "Fell short": []}
    for label, item in zip(pieces[1::2], pieces[2::2], strict=False):
        if item.strip():
            lists[label].append(item.strip())
    task = pieces[0].strip()
    if head is None and not any(lists.values()):  # rewritten freely: the whole line is the lesson
        lists["Lesson"], task = [text], str(metadata.get("task", ""))
    lesson = Lesson(
        task_type=head["kind"] if head else str(metadata.get("task_type", "general")),
        success=head["outcome"] == "Succeeded" if head else bool(metadata.get("success", False)),
        score=float(head["score"]) if head else float(metadata.get("score", 0.0) or 0.0),
        lessons=lists["Lesson"],
        strengths=lists["Worked"],
        weaknesses=lists["Fell short"],
        task=task,
    )
    rebuilt = lesson_record(lesson)["metadata"]
    return (lesson.text() if head else text), {**meta, **rebuilt, "edited": True}


def sync_mirror(store: MemoryStore, path: Path, project: str) -> dict[str, int]:
    """Apply a mirror's edits: changed lines supersede their entry, new ``- text`` lines become facts.

    Running it again after it was interrupted (a kill before the mirror was rewritten) changes
    nothing twice: the id of each new entry is derived from what it records (the project, the
    line's text and which occurrence of that text it is; for an edit, the entry it replaces and
    its new text), and an id already stored is skipped. A new line is a fact whatever section it
    sits under: summaries and lessons come from sessions, not from the mirror."""
    stored = list(store.export(project=project, type=list(MIRRORED)))
    current = {e.id: e for e in stored if not e.superseded_by}
    known = {e.id for e in stored}
    changed = added = 0
    seen: dict[str, int] = {}
    try:
        body = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise MirrorError(
            f"{path} is not UTF-8 text (byte {e.start}); save it as UTF-8 and run `keel mem sync` again "
            "(nothing was changed)"
        ) from None
    except OSError as e:
        raise MirrorError(f"cannot read {path}: {e.strerror or e}") from None
    template = {f"# keel memory: {project}", *_HEADER, _KEPT, *(f"## {kind}" for kind in MIRRORED)}
    kept: list[str] = []  # the user's lines that are no entry: never dropped
    for raw in body.splitlines():
        match = _LINE.match(raw)
        if match and match["id"] in known:
            old = current.get(match["id"])
            if old is not None and " ".join(old.text.split()) != match["text"].strip():
                text, metadata = edited(old.type, match["text"].strip(), old.metadata)
                store.supersede(
                    old.id,
                    {
                        "id": _derived_id("edit", old.id, text),
                        "type": old.type,
                        "project": project,
                        "session": old.session,
                        "text": text,
                        "metadata": metadata,
                    },
                )
                changed += 1
        elif raw.startswith("- ") and raw[2:].strip():
            text = raw[2:].strip()
            nth = seen[text] = seen.get(text, 0) + 1
            fact = {
                "id": _derived_id("fact", project, text, str(nth)),
                "type": "fact",
                "project": project,
                "text": text,
            }
            if store.add_many([fact]):
                added += 1
        elif raw.strip() and raw.rstrip() not in template and not (match and match["id"] in known):
            kept.append(raw)
    write_mirror(store, path, project, kept)
    return {"changed": changed, "added": added}


def _derived_id(kind: str, *parts: str) -> str:
    import hashlib

    digest = hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"mirror-{kind}:{digest}"
