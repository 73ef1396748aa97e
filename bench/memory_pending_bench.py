"""Search latency with entries still waiting for a vector, the first-prompt injection, and the
first search of a process.

    python bench/memory_pending_bench.py [--pending 0,1000,10000] [--queries 200] [--rounds 3]
                                         [--src DIR [--src DIR2]] [--label NAME] [--base FILE]

A base store holds the 2,760 LoCoMo dialog turns with MiniLM vectors. For each pending count,
a copy of it gets that many more entries indexed lexically only (what a session captures:
LoCoMo turns recombined into 1-3-turn texts, a third of them tool observations), then 200
LoCoMo questions are searched with MiniLM (hybrid). Reported: search p50 / p95 (query
embedding included), and how many texts the embedder was given besides the queries (a
search that waits on the backlog embeds pending entries first).

The first search of a fresh process is measured apart, five times in new interpreters: open
(which loads MiniLM's weights), first search (loads the vector cache, embeds the query),
second search. ``--src`` runs the same against another checkout (e.g. before a change);
given twice, the two checkouts are measured interleaved (each pending count for one, then
for the other, each in its own process), so that both see the same machine load. ``--base``
keeps the embedded base store in a file, so that runs share it (it takes minutes).

The first-prompt injection is ``MemoryPlugin.prompt_context`` on a new plugin (a new session)
for each of the first 100 queries, after its start check has finished: MEMORY.md, the recent
session summaries, the lexical search and the lessons, as a session's first prompt gets them.

On a shared machine wall time measures the other processes too. Every row therefore also
gives CPU time (for a search the process's, ``time.process_time``, since a search embeds its
query on a second thread while it reads the word index; for the injection the measuring
thread's, ``time.thread_time``, as the session's background threads would otherwise count):
what the search itself computed, which a busy neighbour barely changes; the load average
before and after, and
each figure as the median over ``--rounds`` passes with the best pass beside it; a quiet
re-run should confirm the CPU figures and bring the wall figures down to them.
"""

from __future__ import annotations

import argparse
import json
import os
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

    def embed_query(self, text: str) -> list[float]:
        """A search query, by the embedder's own query path (int8 on onnxruntime), counted as one text."""
        self.texts += 1
        result: list[float] = self.inner.embed_query(text)
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


def percentiles(rounds: list[list[tuple[float, float]]]) -> dict[str, float]:
    """p50 / p95 of wall and CPU milliseconds: the median over the rounds, and the best round."""
    out: dict[str, float] = {}
    for which, name in ((0, "wall"), (1, "cpu")):
        for label, q in (("p50", 0.5), ("p95", 0.95)):
            per_round = []
            for samples in rounds:
                values = sorted(s[which] for s in samples)
                per_round.append(values[int(q * (len(values) - 1))])
            out[f"{name}_ms_{label}"] = round(statistics.median(per_round), 2)
            out[f"{name}_ms_{label}_best_round"] = round(min(per_round), 2)
    return out


def timed(call: Any, clock: Any = time.thread_time) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), clock()
    call()
    return (time.perf_counter() - wall) * 1000, (clock() - cpu) * 1000


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def injection(work: Path, tmp: Path, queries: list[str], rounds: int) -> dict[str, Any]:
    """The first prompt's ``<memory-context>`` of a new session (plugin), start check done."""
    from agentkeel.config.settings import MemorySettings
    from agentkeel.memory.plugin import MemoryPlugin

    settings = MemorySettings(store=str(work), embedder="minilm", project="bench")
    (tmp / "cwd").mkdir(exist_ok=True)
    samples: list[list[tuple[float, float]]] = []
    injected = 0
    for r in range(rounds):
        samples.append([])
        for i, query in enumerate(queries):
            plugin = MemoryPlugin(
                settings,
                cwd=tmp / "cwd",
                keel_home=tmp / "home",
                session_id=f"bench-{r}-{i}",
                window_tokens=200_000,
                idle_after_s=3600.0,
            )
            plugin.report_problems(wait_s=10.0)  # the session start check, done before the user types
            block: list[str | None] = []
            samples[-1].append(timed(lambda p=plugin, b=block, q=query: b.append(p.prompt_context(q))))
            injected += bool(block[0])
            plugin.close()
    return {"prompts": len(queries), "with_context": injected // rounds, **percentiles(samples)}


def measure(base: Path, work: Path, pending: list[dict[str, Any]], queries: list[str], rounds: int) -> dict[str, Any]:
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
    store = SQLiteStore(work, embedder=embedder)
    t0 = time.perf_counter()
    store.search("warm up the vector cache", k=10, project="bench")
    warm = (time.perf_counter() - t0) * 1000
    embedder.texts = 0
    load_before = load_average()
    rounds_ms = [
        [timed(lambda q=query: store.search(q, k=10, project="bench"), time.process_time) for query in queries]
        for _ in range(rounds)
    ]
    store.close()
    texts = embedder.texts - rounds * len(queries)
    inject = injection(work, work.parent, queries[:100], rounds)
    return {
        "pending": len(pending),
        "queries": len(queries),
        "rounds": rounds,
        "first_search_ms (vector cache load)": round(warm, 1),
        "search": percentiles(rounds_ms),
        "search_wall_ms_max": round(max(s[0] for r in rounds_ms for s in r), 2),
        "texts_embedded_besides_queries": texts,
        "first_prompt_injection": inject,
        "load_average": [load_before, load_average()],
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


def child(args: argparse.Namespace) -> None:
    """One (checkout, pending count) measurement, in this process, printed as one JSON line."""
    sys.path.insert(0, str(Path(args.src[0]).resolve()))
    records, questions = locomo()
    queries = random.Random(1).sample(questions, args.queries)
    turns = [str(r["text"]).split(": ", 1)[-1] for r in records]
    n = int(args.pending)
    row = measure(Path(args.base), Path(args.work), pending_records(turns, n), queries, args.rounds)
    print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pending", default="0,1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="passes over the queries (median and best reported)")
    parser.add_argument("--src", action="append", help="the agentkeel source tree to measure (twice: two, interleaved)")
    parser.add_argument("--label", default="memory_pending")
    parser.add_argument("--base", default=None, help="reuse (or create) the embedded base store here")
    parser.add_argument("--work", default=None, help=argparse.SUPPRESS)  # a child's working copy
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.src = args.src or [str(ROOT / "src")]
    if args.child:
        child(args)
        return
    srcs = [Path(s).resolve() for s in args.src]
    sys.path.insert(0, str(srcs[0]))
    records, _ = locomo()
    results: dict[str, Any] = {
        "src": [str(s) for s in srcs],
        "cpus": os.cpu_count(),
        "searches": [],
        "fresh_process": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.base) if args.base else Path(tmp) / "base.db"
        ingest = build_base(base, records) if not base.exists() else None
        results["base"] = {"entries": len(records), "embedded_ingest_s": ingest and round(ingest, 1)}
        print(json.dumps(results["base"]), flush=True)
        for n in args.pending.split(","):
            for src in srcs:
                command = [sys.executable, __file__, "--child", "--src", str(src), "--pending", n, "--base", str(base)]
                work = [
                    "--work",
                    str(Path(tmp) / "work.db"),
                    "--queries",
                    str(args.queries),
                    "--rounds",
                    str(args.rounds),
                ]
                out = subprocess.run(
                    [*command, *work],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                row = {"src": str(src), **json.loads(out.stdout.strip().splitlines()[-1])}
                print(json.dumps(row), flush=True)
                results["searches"].append(row)
        for src in srcs:
            for embedder in ("minilm", "none"):
                row = {"src": str(src), **fresh_process(src, Path(tmp) / "work.db", embedder)}
                print(json.dumps(row), flush=True)
                results["fresh_process"].append(row)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.label}.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
