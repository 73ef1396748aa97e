"""The learned reranking stage (memory/rerank.py) on real stores: SQLite and a real PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace

from agentkeel.memory import open_store
from agentkeel.memory.rerank import _STEMS, FEATURES, _words, features, rerank, stem
from agentkeel.memory.retrieval import TUNING
from agentkeel.memory.store import MemoryStore
from memory_fixtures import postgres_dsn

FILLER = [
    "the build passed on the second try",
    "we renamed the config loader",
    "lunch was late today",
    "the cache keeps the last ten pages",
    "reviewed the pull request for the parser",
    "the deploy script needs a flag",
]
QUESTION = "Which database did we pick for the billing service?"


def session(name: str, texts: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{name}-{i}",
            "type": "fact",
            "project": "p",
            "session": name,
            "timestamp": f"2024-05-0{1 + len(name)}T10:{i:02d}:00Z",
            "text": text,
        }
        for i, text in enumerate(texts)
    ]


def records() -> list[dict[str, Any]]:
    """The answer (s1-4) shares no word with the question; the turn before it asked it. Two
    decoys hold the question's words without answering it."""
    return [
        *session(
            "s1",
            [
                *FILLER[:3],
                "Which database did you pick for the billing service?",
                "Postgres, because the team already runs it.",
                FILLER[3],
            ],
        ),
        *session(
            "s2",
            [
                *FILLER[3:],
                "The billing service database migration is a chore; billing service tests are slow.",
                FILLER[0],
            ],
        ),
        *session("s3", ["billing service database billing notes", FILLER[1], FILLER[2]]),
    ]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> MemoryStore:
    target = str(tmp_path / "m.db")
    if request.param == "postgres":
        target = postgres_dsn(request.getfixturevalue("pg_root"))
    opened = open_store(target, embedder="none")
    opened.add_many(records())
    return opened


def test_the_answer_after_the_matching_question_outranks_lexical_decoys(store: Any) -> None:
    reranked = [h.id for h in store.search(QUESTION, k=10, project="p")]
    assert reranked[:2] == ["s1-3", "s1-4"], reranked  # the question, then its answer
    assert reranked.index("s1-4") < min(reranked.index("s2-3"), reranked.index("s3-0")), reranked
    store.tuning = replace(TUNING, rerank=0)
    fused = [h.id for h in store.search(QUESTION, k=10, project="p")]
    assert fused[1] != "s1-4", fused  # without the stage, a decoy or a neighbour comes second
    store.close()


def test_scores_stay_positive_and_ordered_with_recency_and_a_long_list(store: Any) -> None:
    store.add_many(session("s4", [f"billing service note number {i}" for i in range(40)]))
    hits = store.search(QUESTION, k=60, project="p")
    assert len(hits) > 30  # more than the reranked pool: the rest follow it in fused order
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    recent = store.search(QUESTION, k=5, project="p", recency_half_life_days=1.0)
    assert len(recent) == 5 and all(h.score > 0 for h in recent)
    store.close()


def test_each_feature_row_has_one_value_per_trained_weight() -> None:
    texts = {1: "Which database?", 2: "Postgres, since May 2023.", 3: "billing service"}
    sessions = {1: ("p", "s"), 2: ("p", "s"), 3: ("p", "t")}
    lists = {"lexical": [3, 1, 2], "vector": [2, 1]}
    rows = features(
        "When did we pick the database in 2023?", lists, {1: 0.3, 2: 0.2, 3: 0.25}, [1, 3, 2], texts, sessions
    )
    assert [len(r) for r in rows] == [len(FEATURES)] * 3
    answer = dict(zip(FEATURES, rows[2], strict=True))
    assert answer["previous_question_coverage"] > 0 and answer["numbers"] == 1.0 and answer["when_time"] == 1.0


def test_a_recency_search_reads_only_the_pool_and_ranks_as_the_whole_list_does(store: Any) -> None:
    """With recency decay, entries past the reranked pool cannot rise into the first k (they
    score below half the pool's lowest), so the search reads only the pool's rows; the order
    must be the one the whole list gives (k past the pool takes that path)."""
    notes = [f"billing service note {i}: the database migration step {i}" for i in range(60)]
    store.add_many(
        {**r, "timestamp": f"2024-0{1 + i % 9}-{1 + i % 27:02d}T10:00:00Z"} for i, r in enumerate(session("s4", notes))
    )
    for half_life in (0.5, 3.0, 40.0):
        whole = [h.id for h in store.search(QUESTION, k=80, project="p", recency_half_life_days=half_life)]
        assert len(whole) > 30
        for k in (2, 5, 10, 30):
            pool = [h.id for h in store.search(QUESTION, k=k, project="p", recency_half_life_days=half_life)]
            assert pool == whole[:k], (half_life, k)
    store.close()


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_a_neighbours_stems_are_its_words_cut_to_five_letters(text: str) -> None:
    """Neighbours are parsed for their stems alone, in one pass: the same set as the words' stems."""
    assert set(_STEMS.findall(text.lower())) == {stem(w) for w in _words(text)}


def test_a_weight_list_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="weights"):
        rerank("q", {"lexical": [1, 2]}, {1: 1.0, 2: 0.5}, [1, 2], {1: "a", 2: "b"}, {}, weights=[1.0])
