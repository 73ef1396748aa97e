"""The word search's FTS5 query on the standard library's SQLite and on pysqlite3's bundled one.

    python bench/sqlite_lib_bench.py --store FILE [--queries 100] [--pairs 5] [--out FILE]

``FILE`` is a memory store (e.g. the 10,000-pending store `memory_pending_bench.py` builds:
12,760 LoCoMo turns). Each of the LoCoMo questions' first word queries (as `SQLiteStore._matches`
builds them) is ranked as the search ranks it (`ORDER BY bm25(...), rowid LIMIT 256`, FTS5
alone), by one library and then the other, each in its own process, ``--pairs`` times
alternately, so both see the same machine. Reports each pass's mean / p50 / p95 milliseconds per
query and the median ratio of bundled to standard library.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, time
if sys.argv[1] == "bundled":
    from pysqlite3 import dbapi2 as sqlite3
else:
    import sqlite3
SQL = "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts, 1, 0.4, 2), rowid LIMIT 256"
matches = json.loads(sys.stdin.read())
db = sqlite3.connect(sys.argv[2])
out = []
for match in matches:
    t = time.perf_counter()
    db.execute(SQL, [match]).fetchall()
    out.append((time.perf_counter() - t) * 1000)
print(json.dumps({"version": sqlite3.sqlite_version, "ms": out}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "round7_sqlite_lib.json"))
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT / "src"), str(ROOT / "bench")]
    os.environ["KEEL_MEMORY_SQLITE"] = "stdlib"  # the queries are built alike by either
    import memory_pending_bench as mp
    from agentkeel.memory import open_store
    from agentkeel.memory.retrieval import query_terms

    _, questions = mp.locomo()
    store = open_store(Path(args.store), embedder="none")
    matches = [store._matches(query_terms(q))[0] for q in random.Random(1).sample(questions, args.queries)]
    store.close()
    passes: list[dict[str, object]] = []
    for _ in range(args.pairs):
        for library in ("stdlib", "bundled"):
            done = subprocess.run(
                [sys.executable, "-c", CHILD, library, args.store],
                input=json.dumps(matches),
                capture_output=True,
                text=True,
                check=True,
            )
            got = json.loads(done.stdout)
            ms = sorted(got["ms"])
            row = {
                "library": library,
                "sqlite": got["version"],
                "mean_ms": round(statistics.mean(ms), 2),
                "p50_ms": round(ms[len(ms) // 2], 2),
                "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2),
                "load_average": round(os.getloadavg()[0], 2),
            }
            passes.append(row)
            print(json.dumps(row), flush=True)
    ratios = {
        key: round(
            statistics.median(
                float(b[key]) / float(a[key])  # type: ignore[arg-type]
                for a, b in zip(passes[::2], passes[1::2], strict=True)
            ),
            3,
        )
        for key in ("mean_ms", "p50_ms", "p95_ms")
    }
    result = {"store": args.store, "queries": args.queries, "passes": passes, "bundled_to_stdlib": ratios}
    print(json.dumps({"bundled_to_stdlib": ratios}))
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
