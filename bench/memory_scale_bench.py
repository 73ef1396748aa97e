"""Memory store at scale: batched ingest throughput and search latency at 10k and 100k records.

    python bench/memory_scale_bench.py [--sizes 10000,100000] [--backends sqlite,postgres]

Records are built from real conversational English: each is one to three LoCoMo dialog turns
picked with a fixed seed (so word frequencies are natural, not a toy vocabulary), a third of
them tool observations with file paths; 200 sessions in 5 projects. Queries are 200 LoCoMo
questions, half filtered to one project. Lexical index only (no embedder): embedding cost is
a property of the embedder and is measured in locomo_bench.py.

Besides wall-time percentiles, each row gives the CPU milliseconds per search of this process
and (PostgreSQL) of the server backend that served it, read from /proc: on a loaded machine
the wall time measures the neighbours, the CPU time what a search costs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from agentkeel.memory import open_store  # noqa: E402

DATA = (
    next(
        (p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared") if (p / "data" / "locomo").is_dir()),
        ROOT.parent / "shared",
    )
    / "data"
    / "locomo"
    / "dev.json"
)

WORDS = (
    "parser token lexer session cache index query schema migration config settings permission hook "
    "retry timeout socket stream buffer thread lock queue worker scheduler logger metric trace span "
    "request response handler router middleware client server database table column vector embedding "
    "memory store outbox batch commit rollback snapshot checkpoint compaction summary lesson fact test "
    "fixture benchmark latency throughput error exception traceback warning deprecation refactor rename "
    "module package import export build release deploy docker kubernetes terraform ansible nginx redis"
).split()
FILES = [f"src/{a}/{b}.py" for a in WORDS[:20] for b in WORDS[20:40]]


def _locomo() -> tuple[list[str], list[str]]:
    data = json.loads(DATA.read_text())
    turns = [
        t["text"]
        for sample in data
        for key, value in sample["conversation"].items()
        if key.startswith("session_") and isinstance(value, list)
        for t in value
    ]
    questions = [qa["question"] for sample in data for qa in sample["qa"]]
    return turns, questions


TURNS, QUESTIONS = _locomo()


def records(n: int, seed: int = 7) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for i in range(n):
        project = f"proj{i % 5}"
        session = f"s{(i // 50) % 200}"
        kind = rng.choice(["user_prompt", "tool_observation", "tool_observation", "assistant_response"])
        words = " ".join(rng.choice(TURNS) for _ in range(rng.randint(1, 3)))
        meta: dict[str, object] = {}
        if kind == "tool_observation":
            path = rng.choice(FILES)
            meta = {"tool": "Edit", "file_path": path}
            words = f"Edit {path}: {words}"
        out.append(
            {
                "id": f"r{i}",
                "type": kind,
                "project": project,
                "session": session,
                "timestamp": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T10:00:00Z",
                "text": words,
                "metadata": meta,
            }
        )
    return out


def run(
    backend: str, size: int, tmp: Path, n_queries: int = 200, analyze: bool = False, keep: Path | None = None
) -> dict[str, object]:
    """One backend at one size; with ``keep`` (PostgreSQL), the server's data directory there is
    kept, and a store already holding ``size`` entries is searched without being built again."""
    server = None
    if backend == "postgres":
        import pgserver  # type: ignore[import-untyped]

        (keep or tmp).mkdir(parents=True, exist_ok=True)
        server = pgserver.get_server((keep or tmp) / f"pg{size}", cleanup_mode="stop")
        target = server.get_uri()
    else:
        target = str(tmp / f"scale{size}.db")
    store = open_store(target, embedder="none")
    ingest: float | None = None
    if store.stats()["entries"] != size:
        data = records(size)
        started = time.perf_counter()
        for i in range(0, size, 500):
            store.add_many(data[i : i + 500])
        ingest = time.perf_counter() - started
    if analyze and backend == "postgres":  # what autovacuum does on a live server, done now
        store._db.execute("ANALYZE")  # type: ignore[attr-defined]
        store._db.commit()  # type: ignore[attr-defined]
    rng = random.Random(1)
    queries = rng.sample(QUESTIONS, n_queries)
    latencies = []
    server_cpu_ms = _server_cpu(store)
    cpu0, server0 = time.process_time(), server_cpu_ms()
    for i, query in enumerate(queries):
        filters = {"project": f"proj{i % 5}"} if i % 2 else {}
        t0 = time.perf_counter()
        store.search(query, k=10, **filters)
        latencies.append((time.perf_counter() - t0) * 1000)
    client_cpu, server_cpu = (time.process_time() - cpu0) * 1000 / n_queries, (server_cpu_ms() - server0) / n_queries
    store.close()
    if server is not None:
        server.cleanup()
    latencies.sort()
    return {
        "backend": backend,
        "records": size,
        "ingest_records_per_s": round(size / ingest) if ingest else "(store reused)",
        "search_ms_p50": round(statistics.median(latencies), 2),
        "search_ms_p95": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
        "cpu_ms_per_search": {"client": round(client_cpu, 2), "server": round(server_cpu, 2)},
        "load_average": round(os.getloadavg()[0], 2),
    }


def _server_cpu(store: object) -> Callable[[], float]:
    """The CPU milliseconds the PostgreSQL backend serving ``store`` has used (0 for SQLite):
    with the wall time, what a search costs whatever else the machine runs."""
    db = getattr(store, "_db", None)
    if db is None or not hasattr(db, "pgconn"):
        return lambda: 0.0
    pid = int(db.execute("SELECT pg_backend_pid()").fetchone()[0])
    db.rollback()
    tick = os.sysconf("SC_CLK_TCK")

    def used() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / tick

    return used


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--analyze", action="store_true", help="PostgreSQL: ANALYZE after the ingest")
    parser.add_argument("--keep", help="PostgreSQL: keep the server's data under this directory and reuse it")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "memory_scale.json"))
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            for size in (int(s) for s in args.sizes.split(",")):
                result = run(
                    backend, size, Path(tmp), args.queries, args.analyze, Path(args.keep) if args.keep else None
                )
                print(json.dumps(result))
                results.append(result)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
