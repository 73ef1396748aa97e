"""Subagent start overhead: from the parent's Task call to the child's first model request.

A real session (``Runtime``: settings, permissions, hooks seam, transcript) against the fake
model over loopback HTTP. Each run: the parent answers with one Task call; the child answers
at once; the parent finishes. The clock starts when the parent's bus announces the Task call
(``ToolStarted``, after the permission checks) and stops when the fake server receives the
child's request: building the child (tools, extensions, services, its transcript and meta
file), SubagentStart, and the request going out. Also the whole Task round trip, and three
Task calls in one response against one (the concurrency ratio).

    python bench/subagent_bench.py [--runs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from agentkeel.app.runtime import Runtime, RuntimeOptions  # noqa: E402
from agentkeel.core.events import Event, ToolFinished, ToolStarted  # noqa: E402
from agentkeel.models.fake.script import Script, ScriptCursor, Step  # noqa: E402
from agentkeel.models.fake.server import FakeLLMServer  # noqa: E402


class TimedCursor(ScriptCursor):
    """The fake model's script position, with the time each request arrived."""

    def __init__(self, script: Script) -> None:
        super().__init__(script)
        self.arrivals: list[float] = []

    def next(self, request: dict[str, Any] | None = None, raw: str = "") -> Step:
        self.arrivals.append(time.perf_counter())
        return super().next(request, raw)


def _task(i: int, n: int = 0) -> dict[str, Any]:
    return {
        "id": f"toolu_{i}_{n}",
        "name": "Task",
        "input": {"description": "bench", "prompt": f"job {i}.{n}", "subagent_type": "general-purpose"},
    }


async def _overhead(root: Path, runs: int) -> tuple[list[float], list[float]]:
    steps: list[Any] = []
    for i in range(runs):
        steps += [{"tool_calls": [_task(i)]}, "child report", "parent done"]
    cursor = TimedCursor(Script.from_data({"steps": steps}))
    server = FakeLLMServer(Script.from_data({"steps": []}))
    server.cursor = cursor
    server.start_background()
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
        "ANTHROPIC_BASE_URL": server.url,
        "KEEL_HOME": str(root / "keelhome"),
    }
    rt = Runtime.create(RuntimeOptions(cwd=root / "project", env=env, home=root / "home"))
    started: list[float] = []
    round_trips: list[float] = []

    def watch(event: Event) -> None:
        if isinstance(event, ToolStarted) and event.name == "Task":
            started.append(time.perf_counter())
        elif isinstance(event, ToolFinished) and event.name == "Task":
            round_trips.append(event.duration_ms)

    rt.bus.subscribe(watch)
    try:
        for _ in range(runs):
            await rt.run("delegate")
    finally:
        await rt.aclose()
        server.shutdown()
        server.server_close()
    child_arrivals = cursor.arrivals[1::3]
    return [(a - s) * 1000 for s, a in zip(started, child_arrivals, strict=True)], round_trips


async def _concurrency(root: Path) -> tuple[float, float]:
    def session(calls: int) -> list[Any]:
        return [{"tool_calls": [_task(0, n) for n in range(calls)]}, *[{"text": "r", "delay_s": 0.3}] * calls, "ok"]

    out = []
    for calls in (1, 3):
        server = FakeLLMServer(Script.from_data({"steps": session(calls)}))
        server.start_background()
        env = {
            **os.environ,
            "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
            "ANTHROPIC_BASE_URL": server.url,
            "KEEL_HOME": str(root / "keelhome"),
        }
        rt = Runtime.create(RuntimeOptions(cwd=root / "project", env=env, home=root / "home"))
        try:
            t0 = time.perf_counter()
            await rt.run("fan out")
            out.append(time.perf_counter() - t0)
        finally:
            await rt.aclose()
            server.shutdown()
            server.server_close()
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ("project", "home", "keelhome"):
            (root / d).mkdir()
        (root / "home" / ".keel").mkdir()
        (root / "home" / ".keel" / "settings.json").write_text('{"memory": {"enabled": false}}')
        overhead, trips = asyncio.run(_overhead(root, args.runs))
        one, three = asyncio.run(_concurrency(root))
    q = statistics.quantiles(overhead, n=20)
    print(f"subagent start (Task call -> child's first request), {len(overhead)} runs:")
    print(f"  p50 {statistics.median(overhead):.1f} ms  p95 {q[18]:.1f} ms  max {max(overhead):.1f} ms")
    print(f"Task round trip (child answers at once): p50 {statistics.median(trips):.0f} ms")
    print(f"1 Task with a 0.3 s child: {one:.2f} s; 3 Tasks in one response: {three:.2f} s (ratio {three / one:.2f})")


if __name__ == "__main__":
    main()
