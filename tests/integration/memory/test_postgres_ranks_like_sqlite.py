"""PostgreSQL (and every other registered backend) ranks words as SQLite does: the same words
(FTS5's tokenizer), the common-word rule (a word held by many entries counts in an entry's own
text, not its session context), and the same lexical list for the same records; the term counts
stay true through edits and forgets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkeel.memory.backends import FILE, open_location
from agentkeel.memory.postgres import PostgresStore
from agentkeel.memory.privacy import DEFAULT_MASKER
from agentkeel.memory.retrieval import query_terms
from agentkeel.memory.sql import Filters, where_clause
from agentkeel.memory.sqlite import SQLITE, SQLiteStore
from agentkeel.memory.store import StoreBase
from memory_fixtures import location, postgres_dsn, registered


def rec(rid: str, text: str, session: str, day: str = "2024-05-08", **kw: Any) -> dict[str, Any]:
    return {
        "id": rid,
        "type": "fact",
        "project": "p",
        "session": session,
        "timestamp": f"{day}T10:00:00Z",
        "text": text,
        **kw,
    }


# The records of the SQLite test of the common-word rule (test_memory_latency): "zeta" is held by
# 6 of 16 entries; x's neighbours say it sixteen times, y says it once in a long note.
COMMON = (
    [rec(f"n{i}", "zeta zeta zeta zeta", "s") for i in (1, 2)]
    + [rec("x", "plain words", "s")]
    + [rec(f"n{i}", "zeta zeta zeta zeta", "s") for i in (3, 4)]
    + [rec("y", "a long note " + " ".join(f"word{i}" for i in range(60)) + " zeta", "t")]
    + [rec(f"f{i}", f"filler {i}", f"u{i}") for i in range(10)]
)

# Words the two backends' own full-text configurations cut differently: stopwords PostgreSQL's
# `english` drops ("more", "being", "through") count in FTS5; a month in the text and in the
# date words is one term; "running" and "runs" share a stem; a repeated stem counts twice.
TEXTS = [
    "Caroline: I went to the support group again, more than once, through January",
    "Melanie: running is being more fun than painting these days",
    "Caroline: the adoption agency called about the interviews in January",
    "Melanie: we went camping with the kids and roasted marshmallows by the lake",
    "Caroline: I keep running every morning before work, it clears my head",
    "Melanie: my pottery class is on Mondays and it runs through the summer",
    "Caroline: the parade in June was the best day, so many people and so much colour",
    "Melanie: I painted a lake sunrise last year and still love it",
    "Caroline: transgender support group meeting tonight, nervous but excited",
    "Melanie: the kids loved the museum trip, dinosaurs were the highlight",
]
QUERIES = [
    "When did Caroline go to the support group?",
    "What is Melanie running through?",
    "What happened in January?",
    "more than once, being through",
    "running runs",
    "Mondays lake sunrise",
    "What did Melanie paint?",
    "May 2024 Wednesday",
    "foo_bar support",
]


def corpus() -> list[dict[str, Any]]:
    out = []
    for i in range(60):  # every text six times, in sessions of five, on different days
        text = TEXTS[i % len(TEXTS)] + f" note {i}" * (i % 4)
        out.append(rec(f"r{i}", text, f"s{i // 5}", day=f"2024-{1 + i % 12:02d}-{1 + i % 27:02d}"))
    return out


@pytest.fixture(params=[name for name in registered() if name != FILE])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[SQLiteStore, StoreBase]]:
    """SQLite and another registered backend (PostgreSQL, the in-memory fake)."""
    sqlite = SQLiteStore(tmp_path / "mem.db")
    other = open_location(location(request.param, request, tmp_path / "other"), None, DEFAULT_MASKER)
    assert isinstance(other, StoreBase)
    yield sqlite, other
    sqlite.close()
    other.close()


def lexical(store: StoreBase, query: str, limit: int = 100, **filters: Any) -> list[str]:
    found = store._lexical(query_terms(query), Filters.build(**filters), limit)
    rows = store._rows_by_rid(found)
    return [rows[r].id for r in found]


def test_the_same_records_give_the_same_lexical_list_on_every_backend(
    pair: tuple[SQLiteStore, StoreBase],
) -> None:
    sqlite, other = pair
    for store in pair:
        store.add_many(COMMON)
        store.add_many(corpus())
    assert lexical(other, "zeta") == lexical(sqlite, "zeta")
    for query in QUERIES:
        for filters in ({}, {"session": "s3"}, {"type": "lesson"}, {"project": "p"}):
            assert lexical(other, query, **filters) == lexical(sqlite, query, **filters), (query, filters)
    # an edited context and a forgotten entry change both alike
    for store in pair:
        store.forget(["r7", "r12", "n2"])
        store.add_many([rec("late", "Melanie: the lake again, running in January", "s3", day="2024-03-09")])
    for query in QUERIES:
        assert lexical(other, query) == lexical(sqlite, query), query


def test_term_counts_stay_true_through_edits_and_forgets(pg_root: Path) -> None:
    store = PostgresStore(postgres_dsn(pg_root))
    store.add_many(corpus())
    store.add_many([rec("x1", "Caroline: another support group note", "s2"), rec("x2", "and a lake one", "s9")])
    store.forget(["r3", "r4", "x1"])
    wrong = store._fetch(
        "SELECT count(*) FROM keel_df d FULL JOIN (SELECT term, count(*) AS n,"
        " count(*) FILTER (WHERE own + whn > 0) AS o FROM keel_terms GROUP BY term) t ON t.term = d.term"
        " WHERE coalesce(d.df, 0) <> coalesce(t.n, 0) OR coalesce(d.dfo, 0) <> coalesce(t.o, 0)",
        (),
    )
    assert wrong == [(0,)]
    totals = store._fetch(
        "SELECT (SELECT value FROM keel_meta WHERE key = 'tokens')::bigint, (SELECT sum(len) FROM keel_search),"
        " (SELECT value FROM keel_meta WHERE key = 'docs')::bigint, (SELECT count(*) FROM keel_search)",
        (),
    )
    assert totals[0][0] == totals[0][1] and totals[0][2] == totals[0][3] == 59
    store.close()


def joined(store: SQLiteStore, query: str, limit: int, **filters: Any) -> list[str]:
    """Every match of the first word query joined with the filters, by BM25 then entry."""
    where, params = where_clause(Filters.build(**filters), SQLITE)
    weights = ", ".join(f"{w:g}" for w in store.tuning.fields)
    rows = store._fetch(
        f"SELECT e.id FROM fts JOIN events e ON e.rid = fts.rowid WHERE fts MATCH ? AND {where}"
        f" ORDER BY bm25(fts, {weights}), e.rid LIMIT ?",
        [store._matches(query_terms(query))[0], *params, limit],
    )
    assert len(rows) == limit, "the first word query finds enough"
    return [str(r[0]) for r in rows]


ALONE = "SELECT t.rowid FROM (SELECT rowid"  # FTS5 ranks first, its first results then filtered
JOINED = "ON e.rid = fts.rowid"  # every match joined with the filters, then ranked


def mixed() -> list[dict[str, Any]]:
    """Two thirds of the entries in "big", the newest third in "small"; "zebra" is said in ten
    of small's entries and in two of big's."""
    big = [dict(r, id=f"b{i}", project="big") for i, r in enumerate(corpus() + corpus())]
    small = [
        rec(f"m{i}", f"{TEXTS[i % len(TEXTS)]}{' zebra stripes' if i < 10 else ''}", f"z{i // 5}", project="small")
        for i in range(60)
    ]
    big[3]["text"] += " a zebra"
    big[40]["text"] += " zebra again"
    return big + small


def test_a_project_with_most_or_few_of_the_entries_gets_the_same_list_on_every_backend(
    pair: tuple[SQLiteStore, StoreBase],
) -> None:
    """SQLite lets FTS5 rank alone when the filters pass most entries and looks up only its first
    results, else (or when those hold too few that pass) joins every match with the filters; the
    list is the joined ranking's either way, and PostgreSQL's."""
    sqlite, other = pair
    for store in pair:
        store.add_many(mixed())
        store.supersede("b7", rec("b7new", "Caroline: the support group, moved to Tuesdays", "s1", project="big"))
        store.forget(["b12", "m4"])
    statements: list[str] = []
    sqlite._db.set_trace_callback(statements.append)

    def ranked(query: str, limit: int, **filters: Any) -> list[str]:
        """The list, checked against the joined ranking; ``statements`` keeps what the search ran."""
        statements.clear()
        got = lexical(sqlite, query, limit, **filters)
        ran = list(statements)
        assert got == joined(sqlite, query, limit, **filters), (query, limit, filters)
        statements[:] = ran
        return got

    for query in ["Caroline support group", "Melanie running painting", "lake kids Mondays"]:
        for limit in (1, 5, 20):
            ranked(query, limit, project="big")
            assert any(s.startswith(ALONE) for s in statements) and not any(JOINED in s for s in statements)
            ranked(query, min(limit, 5), project="small")  # a third of the entries: joined at once
            assert not any(s.startswith(ALONE) for s in statements), query
            ranked(query, limit)
    sqlite._db.set_trace_callback(None)
    for query in QUERIES:  # the whole lists (search asks for 100), as PostgreSQL ranks them
        for project in ("big", "small"):
            assert lexical(other, query, project=project) == lexical(sqlite, query, project=project), query


def test_when_fts5s_first_results_hold_too_few_that_pass_the_joined_query_answers(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "mem.db")
    filler = " ".join(f"word{i}" for i in range(40))
    big = [rec(f"b{i}", f"filler {filler} {i}", f"s{i // 5}", project="big") for i in range(300)]
    big[2]["text"] += " zebra"
    big[13]["text"] += " zebra"
    small = [rec(f"m{i}", f"zebra stripes {i}", f"z{i // 5}", project="small") for i in range(200)]
    store.add_many(big + small)  # big: three fifths of the entries, but none of FTS5's first zebras
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    got = lexical(store, "zebra", 2, project="big")
    store._db.set_trace_callback(None)
    assert got == joined(store, "zebra", 2, project="big") and sorted(got) == ["b13", "b2"]
    assert any(s.startswith(ALONE) for s in statements) and any(JOINED in s for s in statements)
    statements.clear()
    store._db.set_trace_callback(statements.append)
    assert lexical(store, "zebra", 2, project="big") == got  # asked joined at once, on this connection
    assert not any(s.startswith(ALONE) for s in statements)
    store._db.set_trace_callback(None)
    store.close()


def test_a_project_holding_every_entry_is_known_by_two_index_seeks_without_a_count(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "mem.db")
    store.add_many([rec(f"a{i}", f"zebra stripes {i}", f"s{i // 5}", project="only") for i in range(40)])
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    got = lexical(store, "zebra", 5, project="only")
    store._db.set_trace_callback(None)
    assert got == joined(store, "zebra", 5, project="only")
    assert any(s.startswith(ALONE) for s in statements) and not any("COUNT(*)" in s for s in statements)
    store.add_many([rec("b1", "zebra elsewhere", "t1", project="other")])  # now counted: 40 of 41 entries
    statements.clear()
    store._db.set_trace_callback(statements.append)
    assert lexical(store, "zebra", 5, project="only") == got
    store._db.set_trace_callback(None)
    assert any(s.startswith(ALONE) for s in statements) and any("COUNT(*)" in s for s in statements)
    assert lexical(store, "zebra", 5, project="nowhere") == []
    store.close()
