"""Memory in a session: capture from the bus, context at each prompt, tools, a summary at the end.

Memory attaches to a session one way: the ``memory`` extension (:meth:`MemoryPlugin.extension`),
on keel's own events. ``start`` reports a damaged store or outbox; ``on_prompt`` records the
prompt and returns the ``<memory-context>`` block; its bus subscribers record what the tools
reported (``ToolFinished``'s facts and ``ToolResults``' text, already redacted by the bus, the
denied calls as not run) and the answers; ``close`` writes the summary and lesson and flushes the
outbox; ``tools`` are MemorySearch, MemoryTimeline and MemoryGet. Nothing is decoded back from a
Claude Code hook payload.

Configured by the ``memory`` settings key (validated as ``agentkeel.config.settings.MemorySettings``)::

    "memory": {"enabled": true, "store": "~/.keel/memory/memory.db" | "postgresql://...",
               "embedder": "auto" | "none" | "minilm" | "openai:<model>", "project": "<override>",
               "excludeTools": ["<tool>"], "maskPatterns": ["ACME-[0-9]+"], "inject": true, "tools": true,
               "lessons": true, "summary": "extractive" | "model", "summaryMaxTokens": 400}

At session end the plugin writes an extractive summary and, when the session ran tools, a
reflexion lesson (``consolidate.reflect``); both go through the outbox like any capture.

The runtime builds one ``MemoryPlugin`` per session. Everything here fails open: a broken
store costs the session its memory, never its work, and the session is told. A damaged
``memory.db`` (found by the check started with the session, or by any read) turns context
and the memory tools off while capture keeps filling the outbox for the repair to index; a
damaged outbox turns capture off. Each problem becomes one warning ``Notice`` on the bus, at
the first prompt (or whenever found later); ``report_problems()`` emits them on demand.

While the session is idle (a turn ended ``IDLE_AFTER_S`` ago), a background pass gives the
captured entries vectors (``background.EmbeddingPass``); no search waits on that.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from agentkeel.config.settings import MemorySettings
from agentkeel.core.events import Compaction, Event, EventBus, Notice, RunFinished, SessionEnded, UserMessage
from agentkeel.core.extensions import Extension, PromptInfo, PromptVerdict
from agentkeel.core.provider import Provider
from agentkeel.core.tools import Tool
from agentkeel.internal.env import KeelEnv
from agentkeel.memory.health import MemoryDamaged
from agentkeel.memory.model import Entry, Hit, estimate_tokens, new_record_id, now_iso, one_line
from agentkeel.memory.store import MemoryStore

log = logging.getLogger(__name__)


FIRST_PROMPT_WAIT_S = 0.25  # the first prompt waits this long at most for the store check
MAX_CAPTURED = 2000  # as MemoryCapture: the summary reads at most this many records
RECENT_SESSIONS = 3  # the recent sessions listed on the first prompt
OWN_TEXT_CHARS = 2000  # how much of an entry's text the relevance floor reads
RECENT_POOL = 8  # the summaries read to find them (a resumed session writes one per run)


def context_budget(window_tokens: int) -> int:
    """2% of the model's window, between 300 and 2,000 tokens."""
    return max(300, min(2000, window_tokens // 50))


class MemoryPlugin:
    def __init__(
        self,
        config: MemorySettings,
        *,
        cwd: Path,
        keel_home: Path,
        session_id: str,
        window_tokens: int,
        agent_type: str = "main",
        idle_after_s: float | None = None,
    ) -> None:
        from agentkeel.memory.background import IDLE_AFTER_S, EmbeddingPass, StoreCheck
        from agentkeel.memory.project import project_id

        self.config = config
        self.cwd = cwd
        self.keel_home = keel_home
        self.session_id = session_id
        self.project = project_id(cwd, config.project)
        self.budget = context_budget(window_tokens)
        self.agent_type = agent_type
        self.location = config.store or str(keel_home / "memory" / "memory.db")
        self._reader: MemoryStore | None = None
        self._writer: MemoryStore | None = None
        self._full: MemoryStore | None = None
        self._prompts = 0
        self._offers: bool | None = None  # the memory tools are offered this session (decided once)
        self._shown: set[str] = set()  # the entries this session's context holds already (until a compaction)
        self._model_summary: tuple[str, dict[str, Any]] | None = None
        self._emit: Callable[[Event], None] | None = None
        from agentkeel.memory.capture import MemoryCapture, Outbox, outbox_path
        from agentkeel.memory.privacy import Masker

        self.masker = Masker(config.maskPatterns)
        self.outbox = Outbox(outbox_path(keel_home, self.location), self._open_writer)
        self.capture = MemoryCapture(
            self.outbox, self.project, session_id, excluded_tools=config.excludeTools, masker=self.masker
        )
        self._damaged: MemoryDamaged | None = None  # the store: no context, no tools
        self._reported: set[str] = set()
        self._waited = False  # the start check was waited for once (by the runtime or the first prompt)
        from agentkeel.memory.backends import is_file

        sqlite = is_file(self.location)
        path = Path(self.location).expanduser()
        self._check = StoreCheck(path / "memory.db" if path.is_dir() else path) if sqlite and path.exists() else None
        self.embedding: EmbeddingPass | None = None
        if _embeds(config.embedder):
            self.embedding = EmbeddingPass(
                lambda: self._open("none"),
                lambda: self._open(config.embedder),
                IDLE_AFTER_S if idle_after_s is None else idle_after_s,
            )

    # -- stores (opened on first use) --------------------------------------------------------------
    def _open(self, embedder: str | None) -> MemoryStore:
        from agentkeel.memory import open_store

        return open_store(self.location, embedder=embedder, mask_patterns=tuple(self.config.maskPatterns))

    def _open_full(self) -> MemoryStore:
        """The memory tools' store: hybrid search when an embedder is configured."""
        if self._full is None:
            self._full = self._open(self.config.embedder)
        return self._full

    def _open_writer(self) -> MemoryStore:
        """Capture indexes lexically: no turn pays for loading an embedding model. The idle
        embedding pass (or `keel mem embed`) gives the entries their vectors later. Nothing is
        written into a damaged store: the records wait in the outbox for the repair."""
        self.problems()
        if self._damaged is not None:
            raise self._damaged
        if self._writer is None:
            self._writer = self._open("none")
        return self._writer

    def _open_reader(self) -> MemoryStore:
        """Lexical only: the prompt path never waits for an embedding model to load."""
        if self._reader is None:
            self._reader = self._open("none")
        return self._reader

    def _open_tools_store(self) -> MemoryStore:
        self.problems()
        if self._damaged is not None:
            raise self._damaged
        return self._open_full()

    # -- problems ------------------------------------------------------------------------------------
    def _store_damaged(self, exc: MemoryDamaged) -> None:
        if self._damaged is None:
            self._damaged = exc
            if self.embedding is not None:
                self.embedding.stop()

    def problems(self, wait_s: float = 0.0) -> list[str]:
        """What is wrong with this session's memory, one line each (the check may be waited for)."""
        if self._check is not None:
            found = self._check.result(0.0 if self._waited else wait_s)
            self._waited = self._waited or wait_s > 0
            if found is not None:
                self._store_damaged(found)
        if self.embedding is not None and self.embedding.damaged is not None:
            self._store_damaged(self.embedding.damaged)
        out: list[str] = []
        if self._damaged is not None:
            out.append(f"memory is off for this session: {self._damaged}")
        if self.outbox.damaged is not None:
            out.append(f"memory capture is off for this session: {self.outbox.damaged}")
        return out

    def report_problems(self, wait_s: float = 0.0) -> list[str]:
        """Emit each problem not yet reported as a warning ``Notice`` on the bus; returns them."""
        fresh = [p for p in self.problems(wait_s) if p not in self._reported]
        for problem in fresh:
            self._reported.add(problem)
            self._notify("warning", problem)
        return fresh

    # -- wiring ----------------------------------------------------------------------------------------
    def attach(self, bus: EventBus) -> None:
        bus.subscribe(self.capture)
        bus.subscribe(self._on_event)
        self._emit = bus.emit

    def extension(
        self, emit: Callable[[Event], None], provider: Provider, model: str, tools: list[Tool] | None = None
    ) -> Extension:
        """The ``memory`` extension: how memory attaches to a session (see the module's doc).
        ``emit``: the session bus's, for memory's notices; ``tools``: the memory tools to offer
        (stand-ins the caller made), else :meth:`tools`."""
        from agentkeel.memory.capture import CONTEXT_TAG

        self._emit = emit

        async def start() -> None:  # a damaged store or outbox is told before the first request
            self.report_problems()  # what is known now; the first prompt gives the check a moment more

        async def on_prompt(info: PromptInfo) -> PromptVerdict | None:
            if self.embedding is not None:
                self.embedding.busy()
            if not info.text.startswith(CONTEXT_TAG):
                self.record("user_prompt", info.text, {})
            context = self.prompt_context(info.text)
            self.report_problems()  # what the background check found since
            return PromptVerdict(context=(context,)) if context else None

        def capture(event: Event) -> None:
            if not isinstance(event, UserMessage):  # the prompt is recorded at on_prompt, without its context
                self.capture(event)

        async def close() -> None:
            try:
                await self.summarise_with_model(provider, model)
            finally:
                self.close()

        return Extension(
            "memory",
            on_prompt=on_prompt,
            tools=self.tools() if tools is None else tools,
            subscribers=[capture, self._on_event],
            start=start,
            close=close,
        )

    def record(self, kind: str, text: str, metadata: dict[str, Any]) -> None:
        """One record into the outbox (queued, no I/O here), masked by memory's own patterns."""
        if not text.strip():
            return
        record = {
            "id": new_record_id(),
            "type": kind,
            "project": self.capture.project,
            "session": self.capture.session,
            "timestamp": now_iso(),
            "text": self.masker.text(text),
            "metadata": self.masker.obj(metadata),
        }
        self.outbox.put(record)
        if len(self.capture.captured) < MAX_CAPTURED:
            self.capture.captured.append(record)

    def _on_event(self, event: Event) -> None:
        """Turns in and out: the embedding pass runs only between them. A compaction (or a rewind)
        may drop the context that held the memories shown: they may be shown again."""
        if isinstance(event, Compaction):
            self._shown.clear()
        if self.embedding is None:
            return
        if isinstance(event, RunFinished):
            if self._damaged is None:
                self.embedding.idle()
        elif isinstance(event, UserMessage | SessionEnded):
            self.embedding.busy()

    def offers_tools(self) -> bool:
        """Whether the model is offered the memory tools this session: only when memory holds
        entries at session start (of any project: a search of an empty project says when another
        one holds matches, and how to let it read them). Decided once, so
        the tool list (the start of every request, cached) stays the same all session; a session
        whose memory was empty gets them from the next session on. Fails open: a store that cannot
        be read is offered (its tools say what is wrong)."""
        if self._offers is None:
            self._offers = bool(self.config.tools) and self._has_entries()
        return self._offers

    def _has_entries(self) -> bool:
        from agentkeel.memory.backends import is_file

        if is_file(self.location):
            path = Path(self.location).expanduser()
            if not (path / "memory.db" if path.is_dir() else path).exists():
                return False  # no store yet: nothing to search (and nothing is created to find out)
        try:
            check = getattr(self._open_reader(), "has_entries", None)
            return True if check is None else bool(check())
        except Exception as exc:  # fail open: the tools report the problem when used
            log.info("memory: could not tell whether the store has entries: %s", exc)
            return True

    def tools(self) -> list[Tool]:
        if not self.offers_tools():
            return []
        from agentkeel.memory.tools import memory_tools

        def damaged(exc: MemoryDamaged) -> None:
            self._store_damaged(exc)
            self.report_problems()

        return memory_tools(
            self._open_tools_store,
            self.project,
            budget_tokens=self.budget,
            on_damage=damaged,
            cross_project=self.config.crossProject,
        )

    def prompt_context(self, prompt: str) -> str | None:
        """The ``<memory-context>`` block for a new prompt (UserPromptSubmit; SessionStart on the first).

        Before the first, the session start check is given up to ``FIRST_PROMPT_WAIT_S`` to
        finish (unless it was waited for already: ``report_problems(wait_s)`` at session start),
        and any problem is reported."""
        self.report_problems(FIRST_PROMPT_WAIT_S)
        if not self.config.inject or self._damaged is not None:
            self._prompts += 1
            return None
        try:
            return self._prompt_context(prompt)
        except MemoryDamaged as exc:  # fail open, and say so
            self._store_damaged(exc)
            self.report_problems()
            return None
        except Exception as exc:  # fail open
            log.warning("memory context skipped: %s", exc)
            return None

    def _prompt_context(self, prompt: str) -> str | None:
        """MEMORY.md and the recent sessions on the first prompt; then what the prompt's words find,
        by the rules of :mod:`agentkeel.memory.inject` (no search for a prompt memory cannot help,
        nothing that shares no word with it, no line twice)."""
        from agentkeel.memory.consolidate import lessons_for, read_agent_memory
        from agentkeel.memory.inject import can_help, same_text, shares_a_word, stems

        store = self._open_reader()
        first = self._prompts == 0
        self._prompts += 1
        sections: list[tuple[str, list[str]]] = []
        spent = 0
        texts: set[str] = set()  # this block's lines, by their words
        sessions: set[str] = set()  # the sessions listed among the recent ones

        def fresh(entry_id: str, text: str) -> bool:
            key = same_text(text)
            if entry_id in self._shown or key in texts:
                return False
            texts.add(key)
            return True

        def add(title: str, lines: list[tuple[str, str]]) -> None:
            nonlocal spent
            kept: list[str] = []
            for entry_id, line in lines:
                cost = estimate_tokens(line)
                if spent + cost > self.budget:
                    break
                kept.append(line)
                spent += cost
                if entry_id:
                    self._shown.add(entry_id)
            if kept:
                sections.append((title, kept))

        if first:
            notes = read_agent_memory(self.agent_type, self.cwd, self.keel_home, limit_chars=self.budget * 2)
            if notes:
                add(f"MEMORY.md ({self.agent_type})", [("", notes)])
            recent: list[tuple[str, str]] = []
            for e in store.recent(["session_summary"], project=self.project, limit=RECENT_POOL):
                if e.session in sessions or not fresh(e.id, f"{e.type} {e.summary()}"):
                    continue  # a resumed session's second summary, or the same text
                sessions.add(e.session)
                recent.append((e.id, _cite(e)))
            add("Recent sessions", recent[:RECENT_SESSIONS])
        if can_help(prompt):
            hits = [
                h
                for h in store.search(prompt, k=8, project=self.project, recency_half_life_days=30.0)
                if h.session != self.session_id
                and h.type != "lesson"
                and not (h.type == "session_summary" and h.session in sessions)
            ]
            lessons = lessons_for(store, prompt, self.project, k=3, others=self.config.crossProject)
            words = stems(prompt)
            # the floor reads each entry's own text (a lesson's summary is its advice; its task
            # is in its text); what matched only in the session context around it does not count
            own = {e.id: e.text[:OWN_TEXT_CHARS] for e in store.get([h.id for h in hits + lessons])}

            def relevant(h: Hit) -> bool:
                return shares_a_word(own.get(h.id, h.summary), words) and fresh(h.id, f"{h.type} {h.summary}")

            add("Relevant memories", [(h.id, h.line()) for h in hits if relevant(h)][:5])
            add("Lessons from similar tasks", [(h.id, h.line()) for h in lessons if relevant(h)])
        if not sections:
            return None
        body = "\n".join(f"{title}:\n" + "\n".join(f"- {line}" for line in lines) for title, lines in sections)
        return (
            f'<memory-context project="{self.project}">\n'
            "From keel's memory of earlier sessions. Each line cites its memory id;"
            " MemoryGet(ids) reads the full entry.\n"
            f"{body}\n</memory-context>"
        )

    def _captured(self) -> list[Entry]:
        return [_entry(r) for r in self.capture.captured if r["session"] == self.session_id]

    async def summarise_with_model(self, provider: Provider, model: str, timeout_s: float = 30.0) -> None:
        """``memory.summary = "model"``: one budgeted model call writes the session summary.

        The input is what capture recorded (already masked), cut to ``SUMMARY_INPUT_CHARS``; the
        output is capped at ``summaryMaxTokens``. Its token usage is announced on the bus, so the
        cost is never hidden. Any failure leaves the extractive summary in place.
        """
        if self.config.summary != "model":
            return
        captured = self._captured()
        if not captured:
            return
        from agentkeel.core.provider import ModelRequest, ModelResponse
        from agentkeel.core.types import Message, TextBlock

        request = ModelRequest(
            model=model,
            system=SUMMARY_SYSTEM,
            messages=[Message(role="user", content=[TextBlock(text=summary_source(captured))])],
            tools=[],
            max_tokens=self.config.summaryMaxTokens,
        )
        response: ModelResponse | None = None
        try:
            async with asyncio.timeout(timeout_s):
                async for chunk in provider.stream(request):
                    if isinstance(chunk, ModelResponse):
                        response = chunk
        except Exception as exc:  # fail open: the extractive summary stands
            self._notify(
                "warning", f"memory: the model summary failed ({one_line(str(exc), 120)}); kept the extractive one"
            )
            return
        if response is None:
            return
        text = "".join(b.text for b in response.message.content if isinstance(b, TextBlock)).strip()
        if not text:
            return
        usage = response.usage
        self._model_summary = (
            text,
            {"by": "model", "model": model, "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
        )
        self._notify(
            "info",
            f"memory: session summary written by {model}"
            f" ({usage.input_tokens} input, {usage.output_tokens} output tokens)",
        )

    def _notify(self, level: Literal["info", "warning", "error"], message: str) -> None:
        if self._emit is not None:
            self._emit(Notice(level=level, message=message))

    def close(self) -> None:
        """Session end: queue a lesson and the summary, make sure everything is acknowledged."""
        try:
            captured = self._captured()
            if captured:
                from agentkeel.memory.consolidate import extractive_summary, lesson_record, reflect

                lesson = reflect(captured) if self.config.lessons else None
                if lesson is not None:
                    self.outbox.put(lesson_record(lesson, self.project, self.session_id))
                text = extractive_summary(captured)
                meta: dict[str, Any] = {"entries": len(captured), "by": "extractive"}
                if self._model_summary is not None:
                    meta |= {**self._model_summary[1], "extractive": text}
                    text = self._model_summary[0]
                if text:
                    self.outbox.put(
                        {
                            "id": f"summary:{self.session_id}:{len(captured)}",
                            "type": "session_summary",
                            "project": self.project,
                            "session": self.session_id,
                            "timestamp": now_iso(),
                            "text": text,
                            "metadata": {**meta, "summary": one_line(text, 140)},
                        }
                    )
            if self.embedding is not None:
                self.embedding.stop()
            if not self.outbox.flush(5.0):
                log.warning("memory outbox did not acknowledge in time; pending records stay in memory")
            self.outbox.close(timeout=2.0)
            self.report_problems()
            for store in (self._reader, self._full):
                if store is not None:
                    store.close()
        except Exception as exc:
            log.warning("memory close failed: %s", exc)


SUMMARY_SYSTEM = (
    "You write the long-term memory of a coding agent. Summarise the session below for a future "
    "session of the same project: what was asked, what was changed (files), what was run and how "
    "it ended, decisions and their reasons, and anything left undone. Plain sentences, no preamble, "
    "at most 12 lines. Never repeat secrets, tokens or passwords."
)
SUMMARY_INPUT_CHARS = 8000  # about 2,000 tokens: the model summary's input budget


def summary_source(entries: list[Entry], limit: int = SUMMARY_INPUT_CHARS) -> str:
    """What the model summary reads: the extractive summary, then the session in one line per entry."""
    from agentkeel.memory.consolidate import extractive_summary

    head = extractive_summary(entries)
    lines = [f"{e.type}: {one_line(e.text, 240 if e.type != 'tool_observation' else 160)}" for e in entries]
    body = "\n".join(lines)
    room = max(0, limit - len(head) - 40)
    if len(body) > room:  # keep the start (the task) and the end (how it went)
        half = room // 2
        body = body[:half] + "\n…\n" + body[-half:]
    return f"{head}\n\nThe session, one line per entry:\n{body}"


def _embeds(spec: str | None) -> bool:
    """Whether an embedder is configured, decided without loading it (``auto`` may find none)."""
    if spec in (None, "", "auto"):
        spec = KeelEnv.of().memory_embedder
    return spec not in ("none", "off")


def _cite(entry: Entry) -> str:
    return f"[{entry.id}] {entry.timestamp[:10]} {entry.type}: {entry.summary()}"


def _entry(record: dict[str, Any]) -> Entry:
    return Entry(
        id=record["id"],
        type=record["type"],
        project=record["project"],
        session=record["session"],
        timestamp=record["timestamp"],
        text=record["text"],
        metadata=record["metadata"],
    )


__all__ = ["MemoryPlugin", "Notice", "context_budget"]
