"""Benchmark: the 20-step session through `keel -p` and `keel dev fake-llm`'s server.

Reports, per wire format, the median over N runs of: wall time, CPU time (user+sys of the
keel process), peak RSS, and time from process start to the first model request received
by the server. Also `keel --version` wall time and the import cost of each provider SDK.

    python bench/session_bench.py [--runs 5] [--json bench/results/session.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import agentkeel
from agentkeel.fakellm.scenarios import twenty_step_session
from agentkeel.fakellm.script import Script
from agentkeel.fakellm.server import FakeLLMServer

KEEL = str(Path(sys.executable).parent / "keel")


def run_once(wire: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        web = FakeLLMServer(Script.from_data({"steps": []}))
        web.start_background()
        server = FakeLLMServer(Script.from_data(twenty_step_session(project, web.url + "/_keel/health")))
        server.start_background()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        env["KEEL_HOME"] = str(Path(tmp) / "keelhome")
        extra: list[str] = []
        if wire == "anthropic":
            env |= {"ANTHROPIC_API_KEY": "sk-ant-bench-not-a-key", "ANTHROPIC_BASE_URL": server.url}
        elif wire == "openai":
            env |= {"OPENAI_API_KEY": "sk-bench-not-a-key", "OPENAI_BASE_URL": server.url + "/v1"}
        else:  # the in-process scripted model: the harness alone, no SDK, no HTTP
            script = Path(tmp) / "script.json"
            script.write_text(json.dumps(twenty_step_session(project, web.url + "/_keel/health")))
            extra = ["--model", f"scripted:{script}"]
        start = time.time()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [KEEL, "-p", "build calc.py", "--output-format", "json", *extra, "--permission-mode", "bypassPermissions"],
            cwd=project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        result = json.loads(out)
        assert result["subtype"] == "success" and result["num_turns"] == 20, (result, err)
        if wire == "scripted":
            log = next((Path(tmp) / "keelhome" / "projects").glob("*/*.jsonl"))
            stamp = next(json.loads(x)["timestamp"] for x in log.read_text().splitlines() if '"request_start"' in x)
            first = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - start
        else:
            first = server.cursor.requests[0]["received_at"] - start
        for s in (server, web):
            s.shutdown()
            s.server_close()
        return {
            "wall_s": wall,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mib": usage.ru_maxrss / 1024,
            "first_request_ms": first * 1000,
            "session_s_after_first_request": wall - first,
        }


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", default="bench/results/session.json")
    args = ap.parse_args()
    # Bytecode as an install leaves it: with PYTHONDONTWRITEBYTECODE set, a source edited since the
    # last compile would be recompiled on every run and counted as startup.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(agentkeel.__file__).parent)], check=True)
    report: dict[str, object] = {"runs": args.runs, "python": sys.version.split()[0], "cpus": os.cpu_count()}
    for wire in ("anthropic", "openai", "scripted"):
        runs = [run_once(wire) for _ in range(args.runs)]
        report[wire] = {k: round(statistics.median(r[k] for r in runs), 4) for k in runs[0]}
    report["keel_version_s"] = round(statistics.median(timed([KEEL, "--version"]) for _ in range(5)), 4)
    for sdk in ("anthropic", "openai"):
        report[f"import_{sdk}_s"] = round(
            statistics.median(
                timed([sys.executable, "-c", f"import {sdk}"]) - timed([sys.executable, "-c", "pass"]) for _ in range(3)
            ),
            4,
        )
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
