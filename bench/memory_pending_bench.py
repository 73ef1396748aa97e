"""Search latency with entries still waiting for a vector, and the first search of a process.

    python bench/memory_pending_bench.py [--pending 0,1000,10000] [--queries 200] [--src DIR] [--label NAME]
                                         [--base FILE]

A base store holds the 2,760 LoCoMo dialog turns with MiniLM vectors. For each pending count,
a copy of it gets that many more entries indexed lexically only (what a session captures:
LoCoMo turns recombined into 1-3-turn texts, a third of them tool observations), then 200
LoCoMo questions are searched with MiniLM (hybrid). Reported: search p50 / p95 (query
embedding included), and how many texts the embedder was given besides the queries (a
search that waits on the backlog embeds pending entries first).

The first search of a fresh process is measured apart, five times in new interpreters: open
(which loads MiniLM's weights), first search (loads the vector cache, embeds the query),
second search. ``--src`` runs the same against another checkout (e.g. before a change);
``--base`` keeps the embedded base store in a file, so that runs share it (it takes minutes).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = next(
    (p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared") if (p / "data" / "locomo").is_dir()),
    ROOT.parent / "shared",
)


class Counting:
    """The real embedder, counting the texts it is given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        result: list[list[float]] = self.inner.embed(texts)
        return result


def locomo() -> tuple[list[dict[str, Any]], list[str]]:
    data = json.loads((SHARED / "data" / "locomo" / "dev.json").read_text())
    records: list[dict[str, Any]] = []
    questions: list[str] = []
    for sample in data:
        conv = sample["conversation"]
        for key, turns in conv.items():
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    records.append(
                        {
                            "id": f"{sample['sample_id']}:{turn['dia_id']}",
                            "type": "fact",
                            "project": "bench",
                            "session": f"{sample['sample_id']}-{key}",
                            "timestamp": "2026-01-01T10:00:00Z",
                            "text": f"{turn['speaker']}: {turn['text']}",
                        }
                    )
        questions += [qa["question"] for qa in sample["qa"]]
    return records, questions


def pending_records(turns: list[str], n: int, seed: int = 11) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = rng.choice(["user_prompt", "tool_observation", "tool_observation", "assistant_response"])
        text = " ".join(rng.choice(turns) for _ in range(rng.randint(1, 3)))
        out.append(
            {
                "id": f"p{i}",
                "type": kind,
                "project": "bench",
                "session": f"live{i // 50}",
                "timestamp": "2026-02-01T10:00:00Z",
                "text": f"Edit src/app/module{i % 40}.py: {text}" if kind == "tool_observation" else text,
            }
        )
    return out


def build_base(path: Path, records: list[dict[str, Any]]) -> float:
    from agentkeel.memory import open_store

    store = open_store(path, embedder="minilm")
    started = time.perf_counter()
    for i in range(0, len(records), 256):
        store.add_many(records[i : i + 256])
    store.close()
    return time.perf_counter() - started


def measure(base: Path, work: Path, pending: list[dict[str, Any]], queries: list[str]) -> dict[str, Any]:
    from agentkeel.memory import open_store
    from agentkeel.memory.embed import get_embedder
    from agentkeel.memory.sqlite import SQLiteStore

    for suffix in ("", "-wal", "-shm"):
        Path(str(work) + suffix).unlink(missing_ok=True)
    shutil.copyfile(base, work)
    lexical = open_store(work, embedder="none")
    for i in range(0, len(pending), 500):
        lexical.add_many(pending[i : i + 500])
    lexical.close()
    embedder = Counting(get_embedder("minilm"))
    store = SQLiteStore(work, embedder=embedder)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    store.search("warm up the vector cache", k=10, project="bench")
    warm = (time.perf_counter() - t0) * 1000
    embedder.texts = 0
    latencies = []
    for query in queries:
        t0 = time.perf_counter()
        store.search(query, k=10, project="bench")
        latencies.append((time.perf_counter() - t0) * 1000)
    store.close()
    latencies.sort()
    return {
        "pending": len(pending),
        "queries": len(queries),
        "first_search_ms (vector cache load)": round(warm, 1),
        "search_ms_p50": round(statistics.median(latencies), 2),
        "search_ms_p95": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
        "search_ms_max": round(latencies[-1], 2),
        "texts_embedded_besides_queries": embedder.texts - len(queries),
    }


FRESH = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
t0 = time.perf_counter()
from agentkeel.memory import open_store
store = open_store(sys.argv[2], embedder=sys.argv[3])
t1 = time.perf_counter()
store.search("what did Caroline paint last summer", k=10, project="bench")
t2 = time.perf_counter()
store.search("when did Melanie go camping", k=10, project="bench")
t3 = time.perf_counter()
ms = {"open_ms": t1 - t0, "first_search_ms": t2 - t1, "second_search_ms": t3 - t2}
print(json.dumps({k: v * 1000 for k, v in ms.items()}))
"""


def fresh_process(src: Path, path: Path, embedder: str, runs: int = 5) -> dict[str, Any]:
    rows = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", FRESH, str(src), str(path), embedder], capture_output=True, text=True, check=True
        )
        rows.append(json.loads(out.stdout))
    return {
        "embedder": embedder,
        "runs": runs,
        **{key: round(statistics.median(r[key] for r in rows), 1) for key in rows[0]},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pending", default="0,1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--src", default=str(ROOT / "src"), help="the agentkeel source tree to measure")
    parser.add_argument("--label", default="memory_pending")
    parser.add_argument("--base", default=None, help="reuse (or create) the embedded base store here")
    args = parser.parse_args()
    src = Path(args.src).resolve()
    sys.path.insert(0, str(src))
    records, questions = locomo()
    queries = random.Random(1).sample(questions, args.queries)
    turns = [str(r["text"]).split(": ", 1)[-1] for r in records]
    results: dict[str, Any] = {"src": str(src), "searches": [], "fresh_process": []}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.base) if args.base else Path(tmp) / "base.db"
        ingest = build_base(base, records) if not base.exists() else None
        results["base"] = {"entries": len(records), "embedded_ingest_s": ingest and round(ingest, 1)}
        print(json.dumps(results["base"]), flush=True)
        for n in (int(x) for x in args.pending.split(",")):
            row = measure(base, Path(tmp) / "work.db", pending_records(turns, n), queries)
            print(json.dumps(row), flush=True)
            results["searches"].append(row)
        for embedder in ("minilm", "none"):
            row = fresh_process(src, Path(tmp) / "work.db", embedder)
            print(json.dumps(row), flush=True)
            results["fresh_process"].append(row)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.label}.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
