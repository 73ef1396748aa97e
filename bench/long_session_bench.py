"""Benchmark: what one turn costs the harness as a session grows.

Runs `keel -p` with the in-process scripted model (no SDK, no HTTP: the harness alone) for
sessions of N turns, each turn reading a different 9 kB source file, and reports the run's
duration per turn. Everything keel does per turn is in it: the request view, the permission
check, the tool, secret redaction of the result (twice: the result guard and the transcript),
the session log, memory capture. If a per-turn cost grew with the session's length, the
per-turn figure of the long run would be a multiple of the short one's.

    python bench/long_session_bench.py [--turns 50 200 1000] [--runs 3] [--json bench/results/long_session.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
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
        proc = subprocess.run(
            [KEEL, "-p", "go", "--output-format", "json", *flags],
            cwd=project,
            env=env,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        result = json.loads(proc.stdout)
        assert result["subtype"] == "success" and result["num_turns"] == turns + 1, (result, proc.stderr)
        return {"duration_s": result["duration_ms"] / 1000, "ms_per_turn": result["duration_ms"] / (turns + 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, nargs="+", default=[50, 200, 1000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", default="bench/results/long_session.json")
    args = ap.parse_args()
    report: dict[str, object] = {"runs": args.runs, "python": sys.version.split()[0], "cpus": os.cpu_count()}
    for turns in args.turns:
        runs = [run_once(turns) for _ in range(args.runs)]
        report[f"turns_{turns}"] = {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
