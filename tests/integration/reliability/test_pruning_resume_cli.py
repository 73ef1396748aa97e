"""Through the real CLI (#35 review): a `keel -p ... -c` run prunes the conversation it resumes as the
live process did. The live process pruned a duplicate call and then compacted; the next process's
first request carries the same marker, not the old result again (which would rewrite the provider's
cached prefix from there on)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.reliability.pruning import DUPLICATE
from kit import KeelRun, session_files, wire_env

WINDOW = 30_000


def _result_of_first_read(body: dict[str, Any], path: str) -> str:
    uses = [
        b["id"]
        for m in body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use" and b["input"].get("file_path") == path
    ]
    assert uses, f"no Read of {path} in the request"
    for m in body["messages"]:
        for b in m["content"]:
            if isinstance(b, dict) and b.get("type") == "tool_result" and b["tool_use_id"] == uses[0]:
                content = b["content"]
                return content if isinstance(content, str) else json.dumps(content)
    raise AssertionError(f"no result for {uses[0]}")


def test_a_resumed_run_sends_what_the_live_run_pruned(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    home = tmp_path / "keelhome"
    home.mkdir(exist_ok=True)
    # compaction at 90 % only: the early point would clear the pruned call before the run ends
    context = {"window": WINDOW, "strategy": "clear-tool-results", "earlyCompactThreshold": 0}
    # pruning from the start (its threshold is a share of the model's catalog window, not of the
    # small window compaction uses here)
    reliability = {"pruneAtPercent": 1}
    (home / "settings.json").write_text(json.dumps({"maxTokens": 1000, "context": context, "reliability": reliability}))
    data = project / "data"
    data.mkdir()
    for i in range(24):
        (data / f"f{i:02d}.txt").write_text("\n".join(f"row {i}-{n} " + "lorem ipsum " * 6 for n in range(50)))
    first = str(data / "f00.txt")
    paths = [first, str(data / "f01.txt"), first, *(str(data / f"f{i:02d}.txt") for i in range(2, 24))]
    steps: list[Any] = [
        {"text": f"Reading {n}.", "tool_calls": [{"name": "Read", "input": {"file_path": p}}]}
        for n, p in enumerate(paths)
    ]
    live = fake_llm({"steps": [*steps, "All read."], "context_window": WINDOW})
    out = keel(
        "-p", "read the files", "--permission-mode", "bypassPermissions", env=wire_env(live, "anthropic"), timeout=300
    )
    assert out.code == 0, out.stderr
    [log] = session_files(home)
    kinds = [json.loads(line)["type"] for line in log.read_text().splitlines()]
    assert "compaction" in kinds  # the live run compacted
    last_live = live.cursor.requests[-1]["body"]
    assert _result_of_first_read(last_live, first) == DUPLICATE  # pruned by the live process

    resume = fake_llm({"steps": ["resumed fine"], "context_window": WINDOW})
    again = keel("-c", "-p", "go on", "--permission-mode", "bypassPermissions", env=wire_env(resume, "anthropic"))
    assert again.code == 0, again.stderr
    [back] = [r["body"] for r in resume.cursor.requests]
    assert _result_of_first_read(back, first) == DUPLICATE
