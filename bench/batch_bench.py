"""Benchmark: ``keel batch`` throughput (tasks/min) by concurrency and backend, and per-task overhead.

Each task is a three-request scripted session (two Bash calls, then an answer) against ``keel
dev fake-llm`` in its stateless conversations mode, so the time measured is keel's: process
start, the session, the tools, the result line. "Direct" runs the same tasks one after another
as plain ``keel -p`` processes; a backend's per-task overhead is its per-task time at
concurrency 1 minus that. Ray's cluster start-up is reported apart (it is paid once per batch).

    python bench/batch_bench.py [--tasks 24] [--concurrency 1 2 4 8] [--backends local ray]
                                [--json bench/results/batch.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentkeel.models.fake.script import Script
from agentkeel.models.fake.server import FakeLLMServer

KEEL = str(Path(sys.executable).parent / "keel")


def fleet(n: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    convs, tasks = [], []
    for i in range(n):
        tid = f"B{i:04d}"
        bash = [{"tool_calls": [{"name": "Bash", "input": {"command": f"echo {tid}-{k}"}}]} for k in "ab"]
        convs.append({"match": f"<{tid}>", "steps": [*bash, f"finished {tid}"]})
        tasks.append({"id": tid, "prompt": f"run <{tid}>", "allowed_tools": ["Bash"]})
    return {"conversations": convs}, tasks


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd[:4])}...: {proc.stderr.strip()[-500:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=24)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--backends", nargs="+", default=["local", "ray"])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    script, tasks = fleet(args.tasks)
    server = FakeLLMServer(Script.from_data(script))
    server.start_background()
    out: dict[str, Any] = {"tasks": args.tasks, "cpus": os.cpu_count(), "load": os.getloadavg()[0], "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-bench-not-a-key", "ANTHROPIC_BASE_URL": server.url,
               "KEEL_MODEL": "anthropic:fake-model", "KEEL_HOME": str(root / "keelhome"), "HOME": str(root),
               "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
        tasks_file = root / "tasks.jsonl"
        tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
        direct_n = min(8, args.tasks)
        direct = sum(run([KEEL, "-p", t["prompt"], "--allowedTools", "Bash"], project, env) for t in tasks[:direct_n])
        per_direct = direct / direct_n
        out["direct_per_task_s"] = per_direct
        print(f"direct keel -p, one after another: {per_direct:.3f} s per task")
        for backend in args.backends:
            if backend == "ray":
                try:
                    import ray  # noqa: F401
                except ImportError:
                    print("ray: not installed, skipped")
                    continue
                t0 = time.perf_counter()
                run([sys.executable, "-c", "import ray; ray.init(include_dashboard=False, logging_level='ERROR'); "
                     "ray.shutdown()"], project, env)  # fmt: skip
                out["ray_startup_s"] = time.perf_counter() - t0
                print(f"ray: local cluster start and stop {out['ray_startup_s']:.2f} s")
            for c in args.concurrency:
                res = root / f"{backend}-{c}.jsonl"
                took = run([KEEL, "batch", str(tasks_file), "-o", str(res), "--backend", backend,
                            "--concurrency", str(c)], project, env)  # fmt: skip
                per_task = took / args.tasks
                overhead = (per_task - per_direct) if c == 1 else None
                row = {"backend": backend, "concurrency": c, "wall_s": took, "tasks_per_min": 60 / per_task,
                       "per_task_s": per_task, "overhead_per_task_s": overhead}  # fmt: skip
                out["rows"].append(row)
                extra = f"  overhead/task {row['overhead_per_task_s']:+.3f} s" if c == 1 else ""
                print(f"{backend:5} c={c}: {took:6.2f} s  {row['tasks_per_min']:6.1f} tasks/min{extra}")
    server.shutdown()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
