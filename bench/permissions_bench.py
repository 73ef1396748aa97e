"""Benchmark: permission decision latency over the bypass corpus (tests/corpus/permissions.json).

Each case is decided through ``PermissionEngine.decide`` (the code path the loop and
``keel permissions check`` use) with a fresh engine per case, as the loop sees a fresh call;
the first pass warms caches (parser, compiled patterns) and is not counted.

    python bench/permissions_bench.py [--rounds 20] [--json bench/results/permissions.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from permission_corpus import decide, engine_for, load_cases, make_project


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    cases = load_cases()
    with tempfile.TemporaryDirectory() as tmp:
        project, home = make_project(Path(tmp))
        engines = [engine_for(c, project, home) for c in cases]
        for case, engine in zip(cases, engines, strict=True):  # warm-up
            decide(case, engine)
        samples: list[float] = []
        by_tool: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for case in cases:
                engine = engine_for(case, project, home)
                t = time.perf_counter()
                decide(case, engine)
                ms = (time.perf_counter() - t) * 1000
                samples.append(ms)
                by_tool.setdefault("Bash" if case.tool == "Bash" else "other", []).append(ms)
    q = statistics.quantiles(samples, n=100)
    result = {
        "when": datetime.now().isoformat(timespec="seconds"),
        "cases": len(cases),
        "decisions": len(samples),
        "p50_ms": round(q[49], 4),
        "p95_ms": round(q[94], 4),
        "p99_ms": round(q[98], 4),
        "max_ms": round(max(samples), 4),
        "bash_p95_ms": round(statistics.quantiles(by_tool["Bash"], n=100)[94], 4),
        "other_p95_ms": round(statistics.quantiles(by_tool["other"], n=100)[94], 4),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
