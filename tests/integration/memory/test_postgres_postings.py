"""PostgreSQL's impact-ordered postings: a search reads each term's best postings only, ranks
like a search over every posting, falls back to every posting when a filter leaves too few,
and a store made with the previous postings is brought up to date when it is opened."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from agentkeel.memory.postgres import POSTINGS_VERSION, PostgresStore
from agentkeel.memory.retrieval import TUNING
from memory_fixtures import postgres_dsn

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


def records(n: int) -> list[dict[str, Any]]:
    """Entries of 3-12 words drawn with a fixed seed: common words with many postings each,
    repeated so that their impacts differ, in two projects and several types."""
    rng = random.Random(5)
    out = []
    for i in range(n):
        words = [rng.choice(WORDS[: 3 + i % 9]) for _ in range(rng.randint(3, 12))]
        out.append(
            {
                "id": f"r{i}",
                "type": "lesson" if i == 137 else "fact",
                "project": "a" if i % 3 else "b",
                "session": f"s{i % 17}",
                "timestamp": "2024-05-08T10:00:00Z",
                "text": " ".join(words) + f" note{i}",
            }
        )
    return out


@pytest.fixture
def dsn(pg_root: Path) -> Iterator[str]:
    target = postgres_dsn(pg_root)
    store = PostgresStore(target)
    store.add_many(records(400))
    store.close()
    yield target


QUERIES = ["alpha bravo", "charlie golf hotel", "india juliet kilo lima", "delta", "echo foxtrot alpha"]


def ranked(store: PostgresStore, query: str, **filters: Any) -> list[str]:
    return [h.id for h in store.search(query, k=10, **filters)]


def test_reading_each_terms_best_postings_ranks_like_reading_them_all(dsn: str) -> None:
    """Every query word is a common one here (the hard case: in real text the lists cut short
    are those of the weakest words): with half of each list read, the top 3 are the same and
    at least 7 of the top 10."""
    cut = PostgresStore(dsn)
    cut.impact_depth, cut.rescore = 200, 150
    every = PostgresStore(dsn)
    every.impact_depth = every.rescore = 10**9
    cut.tuning = every.tuning = replace(TUNING, rerank=0)  # the lexical ranking itself, not the reranker's
    held = [int(r[0]) for r in cut._fetch("SELECT df FROM keel_df", ())]
    assert sum(df > cut.impact_depth for df in held) >= 5  # the lists of the common words are cut short
    for query in QUERIES:
        for filters in ({}, {"project": "a"}, {"project": "b"}):
            fast, exact = ranked(cut, query, **filters), ranked(every, query, **filters)
            assert set(fast[:3]) == set(exact[:3]) and len(set(fast) & set(exact)) >= 7, (query, filters)
            if filters:
                assert all((int(i[1:]) % 3 == 0) == (filters["project"] == "b") for i in fast)
    cut.close()
    every.close()


def test_a_narrow_filter_still_finds_its_entries(dsn: str) -> None:
    """The one lesson holds common words only: it is in no term's best postings, so the
    filtered candidates are too few and every posting is read."""
    cut = PostgresStore(dsn)
    cut.impact_depth, cut.rescore = 5, 10
    assert ranked(cut, "alpha bravo charlie", type="lesson") == ["r137"]
    assert len(ranked(cut, "alpha", session="s3")) == 10
    cut.close()


def test_a_store_with_the_previous_postings_is_brought_up_to_date(dsn: str) -> None:
    before = PostgresStore(dsn)
    before.impact_depth = before.rescore = 10**9
    before.tuning = replace(TUNING, rerank=0)  # the lexical ranking itself, not the reranker's
    expected = {q: ranked(before, q, project="a") for q in QUERIES}
    before._db.execute(
        "DROP INDEX keel_terms_impact; DROP INDEX keel_terms_project_impact;"
        " ALTER TABLE keel_terms DROP COLUMN project, DROP COLUMN imp;"
        " UPDATE keel_meta SET value = '1' WHERE key = 'postings'"
    )
    before._db.commit()
    before.close()
    after = PostgresStore(dsn)
    after.tuning = before.tuning
    assert after._fetch("SELECT value FROM keel_meta WHERE key = 'postings'", ()) == [(POSTINGS_VERSION,)]
    assert after._fetch("SELECT COUNT(*) FROM keel_terms WHERE imp <= 0 OR project = ''", ()) == [(0,)]
    after.impact_depth, after.rescore = 200, 150  # the impact order, read through the new indexes
    assert all(set(ranked(after, q, project="a")[:3]) == set(expected[q][:3]) for q in QUERIES)
    after.impact_depth = after.rescore = 10**9
    assert {q: ranked(after, q, project="a") for q in QUERIES} == expected
    after.close()
