"""MCP client costs: start-up of a stdio server, and the overhead of one tool call.

Start-up: the wall time from ``McpPool.start`` to the server's tools being in the session's tool
list (spawn, initialize, tools/resources/prompts listing), for the test suite's MCPServer fixture
and the published ``mcp-server-time``; the first start in the process includes importing the
``mcp`` package, reported apart. Tool calls: ``mcp__fx__add`` through keel's tool (input checked
against the server's JSON Schema, the call, the result converted and size-limited) against the
bare ``ClientSession.call_tool`` on the same connection: p50/p95, and keel's share.

    python bench/mcp_bench.py [--calls 300] [--starts 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from agentkeel.core.events import EventBus  # noqa: E402
from agentkeel.core.tools import Services, ToolContext, ToolRegistry  # noqa: E402
from agentkeel.mcp.config import parse_server  # noqa: E402
from agentkeel.mcp.pool import McpPool  # noqa: E402

FIXTURE = str(ROOT / "tests" / "mcp_fixtures" / "server.py")
TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")


def _pool(name: str, command: str, args: list[str]) -> McpPool:
    config = parse_server(name, {"command": command, "args": args}, "cli", "bench", os.environ)
    return McpPool(
        {name: config},
        env=dict(os.environ),
        cwd=ROOT,
        connect_timeout_s=120,
        tool_timeout_s=60,
        max_output_tokens=25_000,
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _start_ms(name: str, command: str, args: list[str]) -> float:
    pool = _pool(name, command, args)
    registry = ToolRegistry()
    started = time.perf_counter()
    failures = await pool.start(registry)
    elapsed = (time.perf_counter() - started) * 1000
    await pool.aclose()
    if failures or not registry.list():
        raise SystemExit(f"{name} did not start: {failures}")
    return elapsed


async def _calls(n: int) -> dict[str, Any]:
    pool = _pool("fx", sys.executable, [FIXTURE, "stdio"])
    registry = ToolRegistry()
    await pool.start(registry)
    tool = registry.get("mcp__fx__add")
    assert tool is not None
    session = pool.connections["fx"].session
    assert session is not None
    ctx = ToolContext(cwd=ROOT, session_id="bench", services=Services(), emit=EventBus().emit)
    keel_ms: list[float] = []
    bare_ms: list[float] = []
    for i in range(n):
        args = tool.parse({"a": i, "b": 1})
        t0 = time.perf_counter()
        out = await tool.run(args, ctx)
        t1 = time.perf_counter()
        await session.call_tool("add", {"a": i, "b": 1})
        t2 = time.perf_counter()
        assert out.text() == f"sum={i + 1}", out
        keel_ms.append((t1 - t0) * 1000)
        bare_ms.append((t2 - t1) * 1000)
    await pool.aclose()
    warm = slice(min(10, n // 10), None)  # the first calls warm caches (validators, imports)
    k, b = keel_ms[warm], bare_ms[warm]
    return {
        "calls": len(k),
        "keel_p50_ms": round(statistics.median(k), 3),
        "keel_p95_ms": round(_pct(k, 0.95), 3),
        "bare_p50_ms": round(statistics.median(b), 3),
        "bare_p95_ms": round(_pct(b, 0.95), 3),
        "overhead_p50_ms": round(statistics.median(k) - statistics.median(b), 3),
    }


async def main(calls: int, starts: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    import mcp.client.session
    import mcp.client.stdio  # noqa: F401

    import_ms = (time.perf_counter() - t0) * 1000
    fixture = [await _start_ms("fx", sys.executable, [FIXTURE, "stdio"]) for _ in range(starts)]
    published = [await _start_ms("time", TIME_SERVER, ["--local-timezone", "UTC"]) for _ in range(starts)]
    return {
        "mcp_import_ms": round(import_ms, 1),
        "start_fixture_ms": {"p50": round(statistics.median(fixture), 1), "max": round(max(fixture), 1)},
        "start_mcp_server_time_ms": {"p50": round(statistics.median(published), 1), "max": round(max(published), 1)},
        "tool_call_stdio": await _calls(calls),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "mcp.json"))
    a = parser.parse_args()
    result = asyncio.run(main(a.calls, a.starts))
    text = json.dumps(result, indent=2)
    print(text)
    Path(a.out).write_text(text + "\n", encoding="utf-8")
