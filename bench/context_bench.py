"""Benchmark: compaction and request building.

1. Compaction of a ~100k-token transcript (150 turns of Read calls with bulky results): for each
   strategy, the median wall time and the tokens before and after (keel's estimator). ``summarize``
   and ``hybrid`` ask a summariser over real HTTP (keel's Anthropic wire client -> ``keel dev
   fake-llm``'s server), so their time includes one loopback model call.
2. Request building per turn at 200 messages: appending a turn to the view, the view, the system
   prompt (memoised), the context check (accounting), and the Anthropic request body as JSON.

    python bench/context_bench.py [--runs 5] [--json bench/results/context.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentkeel.config.settings import ContextSettings
from agentkeel.context.compaction import compact
from agentkeel.context.manager import ContextManager
from agentkeel.core.events import AssistantMessage, ToolResults, UserMessage
from agentkeel.core.provider import ModelRequest
from agentkeel.core.tools import Services
from agentkeel.core.types import Message, TextBlock, ToolResultBlock, ToolUseBlock
from agentkeel.core.view import ViewBuilder
from agentkeel.models._http import encode_json
from agentkeel.models.anthropic_format import request_params
from agentkeel.models.catalog import resolve_model
from agentkeel.models.factory import make_provider
from agentkeel.models.fake.script import Script
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.tools import builtin_tools


def turn(i: int, size: int) -> tuple[Message, Message]:
    use = ToolUseBlock(id=f"toolu_{i:04d}", name="Read", input={"file_path": f"/repo/src/mod{i}.py"})
    body = "\n".join(f"{n:>6}\tdef f_{i}_{n}(x): return x * {n}  # some code" for n in range(size))
    return (
        Message(role="assistant", content=[TextBlock(text=f"Reading module {i}."), use]),
        Message(role="user", content=[ToolResultBlock(tool_use_id=use.id, content=body)]),
    )


def manager(root: Path, server: FakeLLMServer, window: int, strategy: str) -> ContextManager:
    env = {"ANTHROPIC_API_KEY": "sk-ant-bench-not-a-real-key", "ANTHROPIC_BASE_URL": server.url}
    info = resolve_model("anthropic:claude-sonnet-4-5", env)
    (root / ".git").mkdir(exist_ok=True)
    (root / "AGENTS.md").write_text("Use the project's Makefile.\n")
    return ContextManager.create(
        provider=make_provider(info, env),
        model=info.model,
        qualified_model=info.qualified,
        context_window=window,
        max_tokens=8000,
        settings=ContextSettings(strategy=strategy),  # type: ignore[arg-type]
        output_style=None,
        cwd=root,
        home=root / "home",
        keel_home=root / "keel",
        env=env,
        services=Services(),
    )


async def bench_compaction(root: Path, server: FakeLLMServer, runs: int) -> dict[str, Any]:
    messages: list[Message] = [Message.user("Read every module and report.")]
    for i in range(150):
        messages += turn(i, 32)
    tools = [t.spec() for t in builtin_tools()]
    out: dict[str, Any] = {}
    for strategy in ("truncate-oldest", "clear-tool-results", "hybrid", "summarize"):
        mgr = manager(root, server, 200_000, strategy)
        request = ModelRequest("claude-sonnet-4-5", mgr.system_prompt(), messages, tools, 8000)
        before = mgr.tokens(request)
        times, after, stage = [], 0, ""
        for _ in range(runs):
            plan = mgr._plan(request)
            plan.target = 40_000  # compact the 100k transcript to at most 40k tokens
            plan.keep = 20_000
            started = time.perf_counter()
            result = await compact(
                messages,
                plan,
                mgr.estimator,
                strategy=strategy,
                summarise=mgr._summarise,
                extra=mgr.carry(),
            )
            times.append((time.perf_counter() - started) * 1000)
            assert result is not None
            stage = result.stage
            after = mgr.estimator.tokens(
                mgr.estimator.request_chars(ModelRequest("m", request.system, result.messages, tools, 8000))
            )
        out[strategy] = {
            "ms_median": round(statistics.median(times), 2),
            "tokens_before": before,
            "tokens_after": after,
            "stage": stage,
        }
        await mgr.provider.aclose()
    return out


def bench_request_building(root: Path, server: FakeLLMServer, iterations: int) -> dict[str, Any]:
    mgr = manager(root, server, 200_000, "hybrid")
    tools = [t.spec() for t in builtin_tools()]
    events: list[AssistantMessage | ToolResults] = []
    for i in range(99):
        a, r = turn(i, 10)
        events += [AssistantMessage(message=a), ToolResults(message=r)]
    samples = []
    size = 0
    for n in range(iterations):
        view = ViewBuilder()  # a session at 199 messages, its earlier turns already counted once
        view.add_event(UserMessage(message=Message.user("go")))
        for e in events:
            view.add_event(e)
        mgr.tokens(ModelRequest("claude-sonnet-4-5", mgr.system_prompt(), view.messages(), tools, 8000))
        a, r = turn(1000 + n, 10)
        started = time.perf_counter()  # one turn: append the answer and its result, build the next request
        view.add_event(AssistantMessage(message=a))
        view.add_event(ToolResults(message=r))
        request = ModelRequest("claude-sonnet-4-5", mgr.system_prompt(), view.messages(), tools, 8000)
        mgr.tokens(request)
        encode_json(request_params(request))  # the body as keel's wire client sends it
        samples.append((time.perf_counter() - started) * 1000)
        size = len(request.messages)
    samples.sort()
    return {
        "messages": size,
        "ms_median": round(statistics.median(samples), 3),
        "ms_p95": round(samples[int(len(samples) * 0.95)], 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    script = Script.from_data(
        {"steps": [], "match": [{"contains": "<keel-compact-request>", "steps": ["A summary " * 200]}]}
    )
    server = FakeLLMServer(script)
    server.start_background()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            results = {
                "compaction_100k": asyncio.run(bench_compaction(root, server, args.runs)),
                "request_building_200_messages": bench_request_building(root, server, 200),
            }
    finally:
        server.shutdown()
        server.server_close()
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
