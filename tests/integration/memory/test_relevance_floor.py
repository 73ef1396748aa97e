"""A search whose words match nothing returns nothing unrelated, once vectors exist (issue #31
item 9): vector neighbours always exist, so with no lexical hit only those whose cosine reaches
``RELEVANCE_FLOOR`` (calibrated on MiniLM: bench/memory_relevance_floor.py) are kept. The same on
SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentkeel.memory import open_store


def rec(rid: str, text: str, session: str) -> dict[str, Any]:
    return {"id": rid, "type": "fact", "project": "p", "session": session, "text": text}


ENTRIES = [
    rec("pet", "Nate: I adopted a small dog from the shelter last month.", "a"),
    rec("job", "Nate: My new role at the bank starts on Monday.", "b"),
    rec("food", "Nate: I have been experimenting with coconut milk ice cream.", "c"),
    rec("trip", "Joanna: We hiked up to the lake and camped two nights.", "d"),
]


def test_a_search_that_matches_nothing_returns_nothing(backend: str) -> None:
    store = open_store(backend, embedder="minilm")
    try:
        store.add_many(ENTRIES)
        assert store.stats()["vectors"] == len(ENTRIES)
        for query in ("zebra", "kubernetes ingress certificate renewal", "segfault in the C extension"):
            assert store.search(query, k=5, project="p") == [], query
        # what the vectors are for still works: no shared word, the same meaning
        assert [h.id for h in store.search("puppy", k=1, project="p")] == ["pet"]
        # and a word that matches still answers first
        assert store.search("coconut", k=1, project="p")[0].id == "food"
    finally:
        store.close()


def test_keel_mem_search_with_no_match_says_so(tmp_path: Path, keel: Any) -> None:
    import os

    store = open_store(Path(os.environ["KEEL_HOME"]) / "memory" / "memory.db", embedder="minilm")
    store.add_many(ENTRIES)
    store.close()
    out = keel("mem", "--embedder", "minilm", "--project", "p", "search", "zebra")
    assert out.code == 0, out.stderr
    assert out.stdout.strip() == "no memories match"
