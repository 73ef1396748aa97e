"""A long task compacts again and again; the memory context its carry-over re-injects is searched
once per task, not at every compaction (it is about earlier sessions), and again for a new task."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.context.manager import ContextManager
from agentkeel.models.fake.server import FakeLLMServer
from tests.integration.context.test_compaction import events, reads, runtime


async def test_the_carry_over_searches_memory_once_per_task(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": [*reads(project, 14, size=160), "ok", *reads(project, 8, size=160), "ok"]})
    rt = runtime(project, server, tmp_path, keepRecent=0.05, window=30_000)
    mgr = rt.agent.services.find(ContextManager)
    assert mgr is not None
    asked: list[str] = []

    def memory_context(text: str) -> str:
        asked.append(text)
        return f"<memory-context>MEM-FACT-{len(asked)}</memory-context>"

    mgr.memory_context = memory_context  # the seam the runtime fills with the memory layer's prompt_context
    try:
        await rt.run("read the data files")
        first = len(events(rt))
        await rt.run("now the second batch")
    finally:
        await rt.aclose()
    assert first >= 2, f"the first task compacted {first} times; the test needs several"
    assert len(events(rt)) > first, "the second task compacted too"
    assert asked == ["read the data files", "now the second batch"]
    sent = [str(r["body"]["messages"][0]) for r in server.cursor.requests]
    assert any("MEM-FACT-1" in s for s in sent) and "MEM-FACT-2" in sent[-1]
