"""What keeps memory search fast with a large backlog, and what it must not change: common words
in the session context, narrow filters, lessons from one search, the query embedded beside the
word-index read."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentkeel.memory import open_store
from agentkeel.memory.consolidate import lessons_for
from agentkeel.memory.embed import EmbedderError
from agentkeel.memory.sqlite import SQLiteStore
from agentkeel.memory.sqlite_lib import sqlite3  # the store's own library: two copies of SQLite must not share a file
from agentkeel.memory.store import MemoryStore


def rec(rid: str, text: str, session: str, **kw: Any) -> dict[str, Any]:
    return {
        "id": rid,
        "type": "fact",
        "project": "p",
        "session": session,
        "timestamp": "2024-05-08T10:00:00Z",
        "text": text,
        **kw,
    }


def test_a_common_word_counts_in_an_entrys_own_text_not_in_its_neighbours(store: MemoryStore) -> None:
    """A word held by more than ``Tuning.common`` of the entries (here 6 of 16) ranks an entry that
    says it above one whose neighbours say it many times (before: the neighbours' repetitions won),
    on both backends (before round 5, PostgreSQL did not apply the rule)."""
    store.add_many(
        [rec(f"n{i}", "zeta zeta zeta zeta", "s") for i in (1, 2)]
        + [rec("x", "plain words", "s")]
        + [rec(f"n{i}", "zeta zeta zeta zeta", "s") for i in (3, 4)]
        + [rec("y", "a long note " + " ".join(f"word{i}" for i in range(60)) + " zeta", "t")]
        + [rec(f"f{i}", f"filler {i}", f"u{i}") for i in range(10)]
    )
    ids = [h.id for h in store.search("zeta", k=10)]
    assert "y" in ids
    assert "x" not in ids or ids.index("y") < ids.index("x")
    # a rare word still counts in the session context: the entry after it is found by it
    store.add_many([rec("r1", "the quasar was bright", "v"), rec("r2", "yes indeed", "v")])
    assert "r2" in [h.id for h in store.search("quasar", k=5)]


def test_lessons_come_from_this_project_first_then_anyone(store: MemoryStore) -> None:
    lesson = {"type": "lesson", "timestamp": "2024-05-08T10:00:00Z"}
    store.add_many(
        [
            rec("a1", "flaky pytest fixture: wait for the port", "la", project="a", **lesson),
            rec("b1", "flaky pytest fixture port wait retry pytest", "lb", project="b", **lesson),
            rec("b2", "pytest fixture teardown order", "lc", project="b", **lesson),
            rec("f", "pytest fixture port flaky", "ld", project="a"),  # not a lesson
        ]
    )
    ids = [h.id for h in lessons_for(store, "flaky pytest fixture port", "a", k=3, others=True)]
    assert ids[0] == "a1" and set(ids[1:]) == {"b1", "b2"}
    assert [h.id for h in lessons_for(store, "flaky pytest fixture port", "a", k=1, others=True)] == ["a1"]
    assert [h.id for h in lessons_for(store, "flaky pytest fixture port", "a", k=3)] == ["a1"]  # its own only
    assert lessons_for(store, "unrelated kubernetes", "a") == []


def test_a_filter_no_entry_passes_reads_no_word_index(tmp_path: Path) -> None:
    """A lesson search in a store without lessons (every first prompt of a new user) costs one
    indexed lookup, not a scan of every entry holding the prompt's words."""
    store = open_store(tmp_path / "mem.db", embedder="none")
    assert isinstance(store, SQLiteStore)
    store.add_many([rec(f"e{i}", f"pytest run {i} failed on the parser", f"s{i}") for i in range(50)])
    statements: list[str] = []
    connection: sqlite3.Connection = store._db
    connection.set_trace_callback(statements.append)
    assert store.search("pytest parser", type="lesson") == []
    assert store.search("pytest parser", session="nobody") == []
    assert not [s for s in statements if "MATCH" in s]
    assert len(store.search("pytest parser", type="fact")) == 10
    assert [s for s in statements if "MATCH" in s]
    connection.set_trace_callback(None)
    store.close()


class _Recording:
    """An embedder that notes the thread each call runs on, and can fail."""

    name = "test-recording"
    dim = 4

    def __init__(self, error: BaseException | None = None) -> None:
        self.threads: list[str] = []
        self.error = error

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.append(threading.current_thread().name)
        if self.error is not None and texts == ["parser failure"]:
            raise self.error
        return [[1.0, 0.0, 0.0, 0.0] for _ in texts]


def test_a_search_embeds_its_query_beside_the_word_index_read(tmp_path: Path) -> None:
    embedder = _Recording()
    store = SQLiteStore(tmp_path / "mem.db", embedder=embedder)
    store.add_many([rec("a", "parser failure in the lexer", "s"), rec("b", "the weather", "s")])
    embedder.threads.clear()
    hits = store.search("parser failure", k=2)
    assert hits and hits[0].id == "a"
    assert embedder.threads and embedder.threads[0] != threading.current_thread().name
    store.close()


def test_an_embedder_failure_during_a_search_answers_by_words_or_is_raised(tmp_path: Path) -> None:
    down = _Recording(EmbedderError("endpoint down"))
    store = SQLiteStore(tmp_path / "mem.db", embedder=down)
    store.add_many([rec("a", "parser failure in the lexer", "s"), rec("b", "the weather", "s")])
    assert [h.id for h in store.search("parser failure", k=1)] == ["a"]  # lexical still answers
    store.embedder = _Recording(ValueError("a bug, not an outage"))
    with pytest.raises(ValueError, match="a bug"):
        store.search("parser failure", k=1)
    store.close()


class _QueryRecording(_Recording):
    """An embedder with a separate path for search queries (as MiniLM's int8 one)."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return [0.0, 1.0, 0.0, 0.0]


def test_a_search_embeds_its_query_by_the_embedders_query_path_and_entries_by_embed(tmp_path: Path) -> None:
    embedder = _QueryRecording()
    store = SQLiteStore(tmp_path / "mem.db", embedder=embedder)
    store.add_many([rec("a", "parser failure in the lexer", "s"), rec("b", "the weather", "s")])
    entries = len(embedder.threads)
    assert entries >= 1 and not embedder.queries  # the entries' vectors came from embed
    assert store.search("parser failure", k=2)[0].id == "a"
    assert embedder.queries == ["parser failure"] and len(embedder.threads) == entries
    store.close()


def test_sqlites_vector_lists_read_the_database_before_the_word_search_and_compare_beside_it(tmp_path: Path) -> None:
    """The vector cache is brought up to date before the MATCH, so the comparison needs no
    connection and runs on the query's thread while the word index is read: nothing of the
    vector side touches the database after the word search."""
    embedder = _QueryRecording()
    store = SQLiteStore(tmp_path / "mem.db", embedder=embedder)
    store.add_many([rec(f"e{i}", f"parser failure number {i}", "s") for i in range(5)] + [rec("w", "the weather", "s")])
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    hits = store.search("parser failure", k=3)
    store._db.set_trace_callback(None)
    assert len(hits) == 3 and embedder.queries == ["parser failure"]
    match = next(i for i, s in enumerate(statements) if "MATCH" in s)
    vectors = [i for i, s in enumerate(statements) if "FROM meta WHERE key IN ('ver', 'epoch')" in s]
    assert vectors and max(vectors) < match
    store.close()
