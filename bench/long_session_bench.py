"""Benchmark: what one turn costs the harness as a session grows.

Runs `keel -p` with the in-process scripted model (no SDK, no HTTP: the harness alone) for
sessions of N turns, each turn reading a different 9 kB source file, and reports the run's
duration per turn. Everything keel does per turn is in it: the request view, the permission
check, the tool, secret redaction of the result (twice: the result guard and the transcript),
the session log, memory capture. If a per-turn cost grew with the session's length, the
per-turn figure of the long run would be a multiple of the short one's.

Per length: ``ms_per_turn`` (the run's duration over its turns, startup and the first tool
call's imports included), ``median_turn_ms`` (the median gap between two requests, from the
session log's timestamps: a turn in steady state) and ``cpu_ms_per_turn`` (CPU of the keel
process over its turns). Medians over the runs, with min-max, and the 1-minute load average seen
before and after each length (``load_average``). The steady turn's CPU, startup taken out:
(cpu_1000 x 1001 - cpu_200 x 201) / 800.

Compaction (from the session log's compaction events and ``--output-format json``'s context):
``compactions``, ``compactions_per_100_turns``, ``turns_per_compaction`` and
``post_compaction_share`` (the median size of the context right after a compaction, keel's
estimate of the next request, as a share of the window; the target is <= 0.6). The in-process
scripted model has the catalog's fallback window (32,768 tokens) and each turn reads 9 kB.

    python bench/long_session_bench.py [--turns 50 200 1000] [--runs 3] [--json bench/results/long_session.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

KEEL = str(Path(sys.executable).parent / "keel")


def source_file(i: int) -> str:
    return "".join(f"def f{j}(x):\n    return x + {j}  # file {i}\n\n" for j in range(300))


def run_once(turns: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        steps: list[object] = []
        for i in range(turns):
            path = project / f"m{i}.py"
            path.write_text(source_file(i))
            steps.append({"text": f"step {i}", "tool_calls": [{"name": "Read", "input": {"file_path": str(path)}}]})
        steps.append("done")
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps({"steps": steps}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        env["KEEL_HOME"] = str(Path(tmp) / "keelhome")
        flags = [
            "--model",
            f"scripted:{script}",
            "--permission-mode",
            "bypassPermissions",
            "--max-turns",
            str(turns + 5),
        ]
        proc = subprocess.Popen(
            [KEEL, "-p", "go", "--output-format", "json", *flags],
            cwd=project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        out = proc.stdout.read()  # type: ignore[union-attr]
        _, _, usage = os.wait4(proc.pid, 0)
        result = json.loads(out)
        assert result["subtype"] == "success" and result["num_turns"] == turns + 1, result
        log = next((Path(tmp) / "keelhome" / "projects").glob("*/*.jsonl"))
        stamps = [
            datetime.fromisoformat(json.loads(x)["timestamp"].replace("Z", "+00:00")).timestamp()
            for x in log.read_text().splitlines()
            if '"request_start"' in x
        ]
        gaps = [b - a for a, b in itertools.pairwise(stamps)]
        events = [json.loads(x) for x in log.read_text().splitlines() if '"compaction"' in x]
        after = [e["tokens_after"] for e in events if e.get("type") == "compaction"]
        window = result.get("context", {}).get("window") or 32_768
        return {
            "duration_s": result["duration_ms"] / 1000,
            "ms_per_turn": result["duration_ms"] / (turns + 1),
            "median_turn_ms": statistics.median(gaps) * 1000,
            "cpu_ms_per_turn": (usage.ru_utime + usage.ru_stime) * 1000 / (turns + 1),
            "compactions": len(after),
            "compactions_per_100_turns": len(after) * 100 / (turns + 1),
            "turns_per_compaction": (turns + 1) / len(after) if after else float(turns + 1),
            "post_compaction_share": statistics.median(after) / window if after else 0.0,
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, nargs="+", default=[50, 200, 1000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", default="bench/results/long_session.json")
    args = ap.parse_args()
    report: dict[str, object] = {"runs": args.runs, "python": sys.version.split()[0], "cpus": os.cpu_count()}
    load = [os.getloadavg()[0]]  # other processes' load: the wall columns measure it as much as keel
    for turns in args.turns:
        runs = [run_once(turns) for _ in range(args.runs)]
        report[f"turns_{turns}"] = {
            k: {"median": round(statistics.median(v), 2), "min": round(min(v), 2), "max": round(max(v), 2)}
            for k in runs[0]
            if (v := [r[k] for r in runs])
        }
        load.append(os.getloadavg()[0])
    report["load_average"] = {"min": round(min(load), 1), "max": round(max(load), 1)}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
