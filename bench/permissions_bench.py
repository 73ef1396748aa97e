"""Benchmark: permission decision latency over the bypass corpus (tests/corpus/permissions.json).

Each case is decided through ``PermissionEngine.decide`` (the code path the loop and
``keel permissions check`` use) with a fresh engine per case, as the loop sees a fresh call;
the first pass warms caches (parser, compiled patterns) and is not counted. A case that is a
sequence of calls counts as one decision (all its calls). Wall-clock quantiles include time
spent waiting for a core on a busy machine; the ``cpu_`` ones (this thread's CPU time) do
not, and the run records the load average beside them.

The second part times the decisions that walk a tree on disk (recursive readers such as
``grep -r`` under a Read deny rule, ``grep -R`` looking for symlinks out) over generated trees
of 1,000 and 10,000 files: a Read rule with a literal prefix (``./.env``) opens only the
directories it can reach; one without (``.env``, any depth) or a reader that follows links
looks at every entry, up to the walk's limit (then the command asks).

    python bench/permissions_bench.py [--rounds 20] [--json bench/results/permissions.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from agentkeel.policy.permissions import PermissionEngine
from agentkeel.policy.permissions.trees import WALK_LIMIT
from permission_corpus import decide, engine_for, load_cases, make_project

WALK_CASES = [
    ("grep -r foo .", ["Read(./.env)", "Read(./secrets/**)"]),
    ("grep -r foo .", ["Read(.env)"]),
    ("grep -R foo .", []),
]


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
        cpu: list[float] = []  # this thread's CPU time: what the decision costs, without waiting for a core
        by_tool: dict[str, list[float]] = {}
        load = os.getloadavg()[0]
        for _ in range(args.rounds):
            for case in cases:
                engine = engine_for(case, project, home)
                t, c = time.perf_counter(), time.thread_time()
                decide(case, engine)
                cpu.append((time.thread_time() - c) * 1000)
                ms = (time.perf_counter() - t) * 1000
                samples.append(ms)
                by_tool.setdefault("Bash" if case.tool == "Bash" else "other", []).append(ms)
        load = max(load, os.getloadavg()[0])
    q = statistics.quantiles(samples, n=100)
    qc = statistics.quantiles(cpu, n=100)
    kinds = {k: sum(1 for c in cases if c.kind == k) for k in ("attack", "benign")}
    result = {
        "when": datetime.now().isoformat(timespec="seconds"),
        "cases": len(cases),
        "attacks": kinds["attack"],
        "attack_groups": len({c.group for c in cases if c.kind == "attack"}),
        "benign": kinds["benign"],
        "decisions": len(samples),
        "p50_ms": round(q[49], 4),
        "p95_ms": round(q[94], 4),
        "p99_ms": round(q[98], 4),
        "max_ms": round(max(samples), 4),
        "cpu_p50_ms": round(qc[49], 4),
        "cpu_p95_ms": round(qc[94], 4),
        "cpu_p99_ms": round(qc[98], 4),
        "load_average": round(load, 2),  # the machine's 1-minute load during the run (cores: os.cpu_count())
        "cores": os.cpu_count(),
        "bash_p95_ms": round(statistics.quantiles(by_tool["Bash"], n=100)[94], 4),
        "other_p95_ms": round(statistics.quantiles(by_tool["other"], n=100)[94], 4),
        "walk": walks(max(3, args.rounds // 4)),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


def walks(rounds: int) -> dict[str, dict[str, float | int | str]]:
    """Median decision time of recursive reads over generated trees (10 files per directory)."""
    out: dict[str, dict[str, float | int | str]] = {}
    for files in (1_000, 10_000):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "tree"
            for i in range(files):
                d = root / f"d{i // 100}" / f"e{i // 10 % 10}"
                d.mkdir(parents=True, exist_ok=True)
                (d / f"f{i}.py").write_text("")
            for command, deny in WALK_CASES:
                engine = PermissionEngine(cwd=str(root), home=tmp)
                engine.add(deny, "deny", "bench")
                engine.decide("Bash", {"command": command}, None)  # warm-up
                times: list[float] = []
                decision = ""
                for _ in range(rounds):
                    t = time.perf_counter()
                    decision = engine.decide("Bash", {"command": command}, None).decision
                    times.append((time.perf_counter() - t) * 1000)
                key = f"{files} files: {command} / deny {', '.join(deny) or 'none'}"
                out[key] = {"median_ms": round(statistics.median(times), 3), "decision": decision, "limit": WALK_LIMIT}
    return out


if __name__ == "__main__":
    main()
