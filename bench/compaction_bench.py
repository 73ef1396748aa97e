"""Benchmark: a long session that compacts, through `keel -p` against the scripted model server
(Anthropic wire, its prompt cache simulated: a byte-identical prefix up to a cache_control
breakpoint is read at 0.1x the input price, written at 1.25x).

The session: the user asks for a parser fix; an early `cat ci.log` shows the failing test's name
(the only place it appears); then N steps each Read a ~6 kB file, in a 40k window. The scripted
summariser answers every summary request with a note that names the failing test, as a model
following keel's instruction would.

Reported: steps, ``compactions`` (events in the session log) and their stages,
``summary_requests``, ``steps_per_compaction``, ``post_compaction_share`` (the median size after a
compaction, keel's estimate of the next request, over the window; target <= 0.6),
``summary_cache_read_share`` (the share of a summary request's input read from the cache),
``fact_in_every_summary_request`` / ``fact_in_last_request`` (the early fact's fate) and
``cost_units`` (cache-weighted input, summary requests included, in units of one uncached input
token; ``cost_per_step`` too; output is left out: the scripted replies are the same either way).

    python bench/compaction_bench.py [--steps 400] [--json bench/results/compaction.json]
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
from typing import Any

from agentkeel.models.fake.script import Script
from agentkeel.models.fake.server import FakeLLMServer

KEEL = str(Path(sys.executable).parent / "keel")
WINDOW = 40_000
FAILING = "tests/test_parser.py::test_quoted_comma_kiwi"
COMPACT = "<keel-compact-request>"


def run(steps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        (project / "data").mkdir(parents=True)
        (project / ".git").mkdir()
        (project / "ci.log").write_text(f"collected 12 items\n\nFAILED {FAILING} - AssertionError\n1 failed\n")
        for i in range(40):
            rows = "\n".join(f"row {i}-{n} " + "lorem ipsum " * 8 for n in range(55))
            (project / "data" / f"f{i:02d}.txt").write_text(rows)
        script: list[Any] = [
            {"text": "CI first.", "tool_calls": [{"name": "Bash", "input": {"command": "cat ci.log"}}]}
        ]
        for i in range(steps - 1):
            path = str(project / "data" / f"f{i % 40:02d}.txt")
            script.append({"text": f"Reading {i}.", "tool_calls": [{"name": "Read", "input": {"file_path": path}}]})
        script.append("All done.")
        note = f"Summary: fixing the parser; failing test {FAILING}; the data files are being read in turn."
        server = FakeLLMServer(
            Script.from_data(
                {"steps": script, "context_window": WINDOW, "match": [{"contains": COMPACT, "steps": [note]}]}
            )
        )
        server.start_background()
        home = Path(tmp) / "keelhome"
        home.mkdir()
        (home / "settings.json").write_text(json.dumps({"maxTokens": 2000, "context": {"window": WINDOW}}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "KEEL_"))}
        env.update(KEEL_HOME=str(home), ANTHROPIC_API_KEY="sk-ant-bench-not-a-key", ANTHROPIC_BASE_URL=server.url)
        try:
            argv = [KEEL, "-p", "fix the parser; read every data file first", "--output-format", "json"]
            argv += ["--permission-mode", "bypassPermissions", "--max-turns", str(steps + 10)]
            out = subprocess.run(
                argv,
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
        finally:
            server.shutdown()
            server.server_close()
        result = json.loads(out.stdout)
        assert result["subtype"] == "success", (result, out.stderr[-2000:])
        requests = server.cursor.requests
        log = next((home / "projects").glob("*/*.jsonl"))
        events = [e for line in log.read_text().splitlines() if (e := json.loads(line))["type"] == "compaction"]
    asked = [i for i, r in enumerate(requests) if "matched" in r]
    main = [r for r in requests if "matched" not in r]
    after = [e["tokens_after"] for e in events]

    def cost(r: dict[str, Any]) -> float:
        fresh = r["input_tokens"] - r["cache_read_input_tokens"] - r["cache_creation_input_tokens"]
        return float(fresh + 0.1 * r["cache_read_input_tokens"] + 1.25 * r["cache_creation_input_tokens"])

    summary_reads = [requests[i]["cache_read_input_tokens"] / max(1, requests[i]["input_tokens"]) for i in asked]
    units = sum(cost(r) for r in requests)
    return {
        "steps": len(main),
        "compactions": len(events),
        "stages": sorted({e["stage"] for e in events}),
        "summary_requests": len(asked),
        "steps_per_compaction": round(len(main) / max(1, len(events)), 1),
        "post_compaction_share": round(statistics.median(after) / WINDOW, 3) if after else 0.0,
        "summary_cache_read_share": round(statistics.median(summary_reads), 3) if summary_reads else 0.0,
        "fact_in_every_summary_request": bool(asked) and all(FAILING in json.dumps(requests[i]["body"]) for i in asked),
        "fact_in_last_request": FAILING in json.dumps(main[-1]["body"]),
        "cost_units": round(units),
        "cost_per_step": round(units / max(1, len(main)), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--json", default="bench/results/compaction.json")
    args = ap.parse_args()
    report = {"window": WINDOW, **run(args.steps)}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
