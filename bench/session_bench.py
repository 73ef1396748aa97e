"""Benchmark: the 20-step session through `keel -p` and `keel dev fake-llm`'s server.

Reports, per path, the median over N runs of: wall time, CPU time (user+sys of the keel
process), peak RSS, and time from process start to the first model request received by the
server. Paths: each wire format through keel's own client (``anthropic``, ``openai``: the
default, on httpx), through the official SDK (``anthropic-sdk``, ``openai-sdk``: provider.transport
"sdk"), and the in-process scripted model (``scripted``: no HTTP at all). Medians, with the
min-max spread. Runs alternate between the paths so that machine drift hits them alike. Also
`keel --version` wall time, the import cost of httpx and of each SDK, and the top import costs up
to the first request on the default path (``python -X importtime``).

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
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import agentkeel
from agentkeel.models.fake.script import Script
from agentkeel.models.fake.server import FakeLLMServer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from scenarios import twenty_step_session

KEEL = str(Path(sys.executable).parent / "keel")


PATHS = ("anthropic", "anthropic-sdk", "openai", "openai-sdk", "scripted")


def run_once(path: str, importtime: bool = False) -> dict[str, float]:
    wire, _, transport = path.partition("-")
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        web = FakeLLMServer(Script.from_data({"steps": []}))
        web.start_background()
        server = FakeLLMServer(Script.from_data(twenty_step_session(project, web.url + "/_keel/health")))
        server.start_background()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "KEEL_"))}
        env["KEEL_HOME"] = str(Path(tmp) / "keelhome")
        env["KEEL_PROVIDER_TRANSPORT"] = "sdk" if transport == "sdk" else "wire"
        if importtime:
            env["PYTHONPROFILEIMPORTTIME"] = "1"
        extra: list[str] = []
        if wire == "anthropic":
            env |= {"ANTHROPIC_API_KEY": "sk-ant-bench-not-a-key", "ANTHROPIC_BASE_URL": server.url}
        elif wire == "openai":
            env |= {"OPENAI_API_KEY": "sk-bench-not-a-key", "OPENAI_BASE_URL": server.url + "/v1"}
        else:  # the in-process scripted model: the harness alone, no SDK, no HTTP
            script = Path(tmp) / "script.json"
            script.write_text(json.dumps(twenty_step_session(project, web.url + "/_keel/health")))
            extra = ["--model", f"scripted:{script}"]
        stamped: list[tuple[float, str]] = []  # stderr lines with the time they arrived
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
        reader = threading.Thread(target=_stamp_lines, args=(proc.stderr, stamped))
        reader.start()
        out = proc.stdout.read()  # type: ignore[union-attr]
        reader.join()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        result = json.loads(out)
        assert result["subtype"] == "success" and result["num_turns"] == 20, (result, stamped[-5:])
        if wire == "scripted":
            log = next((Path(tmp) / "keelhome" / "projects").glob("*/*.jsonl"))
            stamp = next(json.loads(x)["timestamp"] for x in log.read_text().splitlines() if '"request_start"' in x)
            first = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - start
        else:
            first = server.cursor.requests[0]["received_at"] - start
            if importtime:  # the imports done before the first request reached the server
                IMPORTS[:] = [line for t, line in stamped if t < server.cursor.requests[0]["received_at"]]
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


IMPORTS: list[str] = []
SPREAD: dict[str, Any] = {"median": statistics.median, "min": min, "max": max}


def _stamp_lines(stream: IO[bytes], into: list[tuple[float, str]]) -> None:
    for raw in stream:
        into.append((time.time(), raw.decode("utf-8", "replace").rstrip("\n")))


def top_imports(lines: list[str], n: int = 12) -> dict[str, Any]:
    """The modules that cost most (ms): by their own time, and top-level ones with what they import."""
    rows: list[tuple[str, int, int, int]] = []  # name, depth, self us, cumulative us
    for line in lines:
        if line.startswith("import time:") and line.count("|") == 2 and "self [us]" not in line:
            self_us, cumulative_us, raw = line.removeprefix("import time:").split("|")
            name = raw.strip()
            rows.append((name, len(raw) - len(raw.lstrip()) - 1, int(self_us), int(cumulative_us)))
    by_self = sorted(rows, key=lambda r: -r[2])[:n]
    by_cumulative = sorted((r for r in rows if r[1] == 0), key=lambda r: -r[3])[:n]
    return {
        "modules": len(rows),
        "total_ms": round(sum(r[2] for r in rows) / 1000, 1),
        "self_ms": {r[0]: round(r[2] / 1000, 1) for r in by_self},
        "top_level_cumulative_ms": {r[0]: round(r[3] / 1000, 1) for r in by_cumulative},
    }


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def cpu_of(cmd: list[str]) -> float:
    """CPU time (user+sys) of one run of cmd: the figure a loaded machine moves least."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", default="bench/results/session.json")
    args = ap.parse_args()
    # Bytecode as an install leaves it: with PYTHONDONTWRITEBYTECODE set, a source edited since the
    # last compile would be recompiled on every run and counted as startup.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(agentkeel.__file__).parent)], check=True)
    report: dict[str, object] = {"runs": args.runs, "python": sys.version.split()[0], "cpus": os.cpu_count()}
    for path in PATHS:  # warm the page cache and bytecode for every path before measuring
        run_once(path)
    runs: dict[str, list[dict[str, float]]] = {path: [] for path in PATHS}
    for _ in range(args.runs):
        for path in PATHS:
            runs[path].append(run_once(path))
    for path in PATHS:
        report[path] = {
            k: {f: round(f_(r[k] for r in runs[path]), 4) for f, f_ in SPREAD.items()} for k in runs[path][0]
        }
    report["keel_version_s"] = round(statistics.median(timed([KEEL, "--version"]) for _ in range(5)), 4)
    report["keel_version_cpu_s"] = round(statistics.median(cpu_of([KEEL, "--version"]) for _ in range(5)), 4)
    report["python_pass_cpu_s"] = round(statistics.median(cpu_of([sys.executable, "-c", "pass"]) for _ in range(5)), 4)
    run_once("anthropic", importtime=True)
    report["imports_to_first_request_anthropic_wire"] = top_imports(IMPORTS)
    keel_httpx = "from agentkeel.models import _http; _http.standalone(); _http.import_httpx(); import httpcore"
    for name, code in (
        ("httpx", "import httpx, httpcore"),
        ("httpx_as_keel", keel_httpx),  # without httpx's CLI and trio (providers/_http.py)
        ("anthropic", "import anthropic"),
        ("openai", "import openai"),
    ):
        report[f"import_{name}_s"] = round(
            statistics.median(
                timed([sys.executable, "-c", code]) - timed([sys.executable, "-c", "pass"]) for _ in range(3)
            ),
            4,
        )
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
