"""The two backends' lexical candidate lists side by side, on the same LoCoMo records.

    python bench/lexical_parity.py [--data PATH] [--out FILE]

Both stores get the records of ``bench/locomo_bench.py`` (no embedder: the lexical list only);
each category 1-4 question's lexical list (``_lexical``, the 100 candidates a search fuses) is
read from SQLite and from PostgreSQL. Reported: the mean overlap of the two lists' top 100 and
top 10, how many questions have the same top 10 in the same order and the same whole list,
and each list's own recall_any@5/@10 (the evidence among its first 5/10).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from agentkeel.memory.postgres import PostgresStore  # noqa: E402
from agentkeel.memory.retrieval import CANDIDATES, query_terms  # noqa: E402
from agentkeel.memory.sql import Filters  # noqa: E402
from agentkeel.memory.sqlite import SQLiteStore  # noqa: E402
from locomo_bench import DATA, load  # noqa: E402


def lists(store: Any, questions: list[tuple[str, str, set[str]]]) -> list[list[str]]:
    ids = {int(r[0]): str(r[1]) for r in store._fetch(f"SELECT rid, id FROM {store.dialect.table}", ())}
    out = []
    for project, question, _ in questions:
        terms = query_terms(question)
        ranked = store._lexical(terms, Filters.build(project=project), CANDIDATES) if terms else []
        out.append([ids[r] for r in ranked])
    return out


def recall(ranked: list[list[str]], questions: list[tuple[str, str, set[str]]], k: int) -> float:
    return round(statistics.fmean(bool(e & set(r[:k])) for r, (_, _, e) in zip(ranked, questions, strict=True)), 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "lexical_parity.json"))
    args = parser.parse_args()
    records, questions = load(Path(args.data))
    with tempfile.TemporaryDirectory() as tmp:
        import pgserver  # type: ignore[import-untyped]

        server = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
        sqlite, postgres = SQLiteStore(Path(tmp) / "l.db"), PostgresStore(server.get_uri())
        for store in (sqlite, postgres):
            for i in range(0, len(records), 256):
                store.add_many(records[i : i + 256])
        a, b = lists(sqlite, questions), lists(postgres, questions)
        sqlite.close()
        postgres.close()
        server.cleanup()

    def overlap(k: int) -> float:
        shared = [len(set(x[:k]) & set(y[:k])) / max(1, min(k, len(x), len(y))) for x, y in zip(a, b, strict=True)]
        return round(statistics.fmean(shared), 3)

    result = {
        "questions": len(questions),
        "overlap@100": overlap(100),
        "overlap@10": overlap(10),
        "same_top10_order": sum(x[:10] == y[:10] for x, y in zip(a, b, strict=True)),
        "same_list": sum(x == y for x, y in zip(a, b, strict=True)),
        "sqlite_lexical_recall@5/@10": [recall(a, questions, 5), recall(a, questions, 10)],
        "postgres_lexical_recall@5/@10": [recall(b, questions, 5), recall(b, questions, 10)],
    }
    print(json.dumps(result, indent=2))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
