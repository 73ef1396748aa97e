"""Query embedding latency of the MiniLM runtimes, interleaved, and their cold build time.

    python bench/embed_bench.py [--runtimes numpy,onnx,onnx-int8] [--queries 762] [--rounds 3]
                                [--label embed_bench]

Each runtime is built once in this process (``MiniLMEmbedder(runtime=...)``), then the LoCoMo
questions (category 1-4 and 5, all of ``dev.json``'s 762 by default) are embedded one at a
time, as a search embeds its query, the runtimes alternating question by question so that all
see the same machine load. Reported per runtime: p50 / p95 / mean in ms over all rounds,
their ratio to the first runtime, and the cold build time measured in fresh interpreters
(import + weights + graph build + a first query; median of three). The load average is
printed before and after. Results go to ``bench/results/<label>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = next(
    (p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared") if (p / "data" / "locomo").is_dir()),
    ROOT.parent / "shared",
)
COLD = """
import sys, time
t = time.perf_counter()
from agentkeel.memory.embed import MiniLMEmbedder
e = MiniLMEmbedder(runtime=sys.argv[1])
built = time.perf_counter()
e.embed(["when did she go to the support group?"])
print(built - t, time.perf_counter() - t)
"""


def questions(limit: int) -> list[str]:
    data = json.loads((SHARED / "data" / "locomo" / "dev.json").read_text())
    return [qa["question"] for sample in data for qa in sample["qa"]][:limit]


def cold(runtime: str, src: Path) -> dict[str, float]:
    builds, firsts = [], []
    for _ in range(3):
        env = {**os.environ, "PYTHONPATH": str(src)}
        out = subprocess.run([sys.executable, "-c", COLD, runtime], env=env, capture_output=True, text=True, check=True)
        build, first = (float(v) for v in out.stdout.split())
        builds.append(build * 1000)
        firsts.append(first * 1000)
    return {"build_ms": statistics.median(builds), "build_and_first_query_ms": statistics.median(firsts)}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", default="numpy,onnx,onnx-int8")
    parser.add_argument("--queries", type=int, default=762)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--label", default="embed_bench")
    args = parser.parse_args()
    src = ROOT / "src"
    sys.path.insert(0, str(src))
    from agentkeel.memory.embed import MiniLMEmbedder

    runtimes = args.runtimes.split(",")
    load_before = os.getloadavg()
    embedders = {r: MiniLMEmbedder(runtime=r) for r in runtimes}
    qs = questions(args.queries)
    for e in embedders.values():  # warm up
        e.embed(qs[:20])
    times: dict[str, list[float]] = {r: [] for r in runtimes}
    for _ in range(args.rounds):
        for q in qs:
            for r in runtimes:
                t = time.perf_counter()
                embedders[r].embed([q])
                times[r].append((time.perf_counter() - t) * 1000)
    first = runtimes[0]
    result: dict[str, Any] = {"queries": len(qs), "rounds": args.rounds, "load_before": load_before}
    for r in runtimes:
        result[r] = {
            "p50_ms": round(pct(times[r], 0.5), 2),
            "p95_ms": round(pct(times[r], 0.95), 2),
            "mean_ms": round(statistics.fmean(times[r]), 2),
            "p50_ratio_to_" + first: round(pct(times[r], 0.5) / pct(times[first], 0.5), 3),
            "p95_ratio_to_" + first: round(pct(times[r], 0.95) / pct(times[first], 0.95), 3),
        }
    for r in runtimes:
        result[r].update({k: round(v, 1) for k, v in cold(r, src).items()})
    result["load_after"] = os.getloadavg()
    out = ROOT / "bench" / "results" / f"{args.label}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
