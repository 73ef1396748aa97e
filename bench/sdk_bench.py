"""SDK ``query()``: time from the call to the model's first request, three ways.

- ``agentkeel.ui.sdk`` in-process (the engine in this Python process),
- ``agentkeel.ui.sdk`` with ``transport="subprocess"`` (``keel --input-format stream-json``),
- the official Claude Agent SDK (``claude-agent-sdk``) with ``cli_path`` pointing at keel.

Each run is a fresh session in a fresh project against ``keel dev fake-llm`` (loopback); the
clock stops when the server receives the request (its own receive timestamp). The whole query
(one request, one answer, the result) is timed too.

    python bench/sdk_bench.py [--runs 7] [--out bench/results/sdk.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from agentkeel.models.fake.script import Script  # noqa: E402
from agentkeel.models.fake.server import FakeLLMServer  # noqa: E402

KEEL = str(Path(sys.executable).parent / "keel")


async def _keel_sdk(transport: str, cwd: Path, env: dict[str, str]) -> None:
    from agentkeel.ui.sdk import KeelAgentOptions, query

    opts = KeelAgentOptions(cwd=cwd, env=env, transport=transport, cli_path=KEEL)  # type: ignore[arg-type]
    async for _ in query(prompt="hello", options=opts):
        pass


async def _official(cwd: Path, env: dict[str, str]) -> None:
    from claude_agent_sdk import ClaudeAgentOptions, query

    opts = ClaudeAgentOptions(cli_path=KEEL, cwd=str(cwd), env=env)
    async for _ in query(prompt="hello", options=opts):
        pass


WAYS: dict[str, Callable[[Path, dict[str, str]], Any]] = {
    "keel SDK, in-process": lambda cwd, env: _keel_sdk("in-process", cwd, env),
    "keel SDK, subprocess": lambda cwd, env: _keel_sdk("subprocess", cwd, env),
    "Claude Agent SDK over keel": _official,
}


def one(way: str, base: Path) -> tuple[float, float]:
    project = Path(tempfile.mkdtemp(dir=base))
    server = FakeLLMServer(Script.from_data({"steps": ["hi"]}))
    server.start_background()
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-bench-not-a-real-key",
        "ANTHROPIC_BASE_URL": server.url,
        "KEEL_HOME": str(project / ".keelhome"),
        "CLAUDE_AGENT_SDK_SKIP_VERSION_CHECK": "1",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the in-process engine reads KEEL_HOME from the process environment too
    try:
        started = time.time()
        asyncio.run(WAYS[way](project, env))
        done = time.time()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.shutdown()
        server.server_close()
    first = server.cursor.requests[0]["received_at"]
    return (first - started) * 1000, (done - started) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="keel-sdk-bench-"))
    report: dict[str, Any] = {"runs": args.runs}
    try:
        for way in WAYS:
            cold = one(way, base)  # the first query of the process: imports included (in-process)
            samples = [one(way, base) for _ in range(args.runs)]
            first = sorted(s[0] for s in samples)
            whole = sorted(s[1] for s in samples)
            report[way] = {
                "first_request_ms_cold": round(cold[0], 1),
                "first_request_ms_p50": round(statistics.median(first), 1),
                "first_request_ms_max": round(first[-1], 1),
                "whole_query_ms_p50": round(statistics.median(whole), 1),
            }
            r = report[way]
            print(
                f"{way:28s} first request p50 {r['first_request_ms_p50']:7.1f} ms"
                f" (max {r['first_request_ms_max']:.1f}),"
                f" whole query p50 {r['whole_query_ms_p50']:.1f} ms; first query of the process {cold[0]:.1f} ms"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
