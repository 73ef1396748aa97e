"""After a compaction the system prompt is built anew (the environment block, the instruction
files): CLAUDE.md edited on disk outside the session reaches the first request after a compaction,
without waiting for the one-second source check."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.context import commands
from agentkeel.context.manager import ContextManager
from agentkeel.models.fake.server import FakeLLMServer
from tests.integration.context.test_compaction import COMPACT, reads, runtime


async def test_a_compaction_rebuilds_the_system_prompt(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    (project / "CLAUDE.md").write_text("RULE-V1")
    server = fake_llm(
        {"steps": [*reads(project, 4), "ok", "after"], "match": [{"contains": COMPACT, "steps": ["SUMMARY-R"]}]}
    )
    rt = runtime(project, server, tmp_path, autoCompact=False, keepRecent=0.05, window=30_000)
    mgr = rt.agent.services.find(ContextManager)
    assert mgr is not None
    mgr.builder.check_interval_s = 3600.0  # only an invalidation rebuilds it during the test
    try:
        await rt.run("go")
        builds = mgr.builder.builds
        (project / "CLAUDE.md").write_text("RULE-V2-after-compaction")
        assert "Compacted (summary)" in await commands.compact(rt, "")
        await rt.run("next")
    finally:
        await rt.aclose()
    assert mgr.builder.builds > builds
    last = server.cursor.requests[-1]["body"]
    assert "RULE-V2-after-compaction" in json.dumps(last["system"]) and "SUMMARY-R" in json.dumps(last["messages"])
