"""Prompt caching: the system prompt and the conversation form a stable prefix, so from turn 3 of a
50-turn session at least 90 % of the input tokens are read from the cache (the scripted server
computes the cached prefix from the requests' bytes and breakpoints, as the real APIs do)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer
from kit import KeelRun, wire_env


def cached_share(requests: list[dict[str, Any]], start: int) -> float:
    rows = requests[start:]
    return sum(r["cache_read_input_tokens"] for r in rows) / sum(r["input_tokens"] for r in rows)


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
def test_fifty_turns_read_the_prefix_from_the_cache(
    wire: str, project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / ".git").mkdir()
    (project / "AGENTS.md").write_text("Run the tests with `make test`.\n")
    for i in range(49):
        (project / f"m{i}.py").write_text("\n".join(f"def f{i}_{n}(x):\n    return x + {n}\n" for n in range(15)))
    steps: list[Any] = [
        {"text": f"Step {i}.", "tool_calls": [{"name": "Read", "input": {"file_path": str(project / f"m{i}.py")}}]}
        for i in range(49)
    ]
    server = fake_llm({"steps": [*steps, "done"]})
    run = keel("-p", "read the modules", "--output-format", "json", env=wire_env(server, wire), timeout=300)
    assert run.code == 0, run.stderr
    requests = server.cursor.requests
    assert len(requests) == 50
    share = cached_share(requests, 2)  # turn 3 on
    print(f"{wire}: cached share of input tokens from turn 3: {share:.1%}")
    assert share >= 0.90, share
    # every turn from the third reads the previous turn's whole prompt from the cache
    assert all(
        r["cache_read_input_tokens"] >= prev["input_tokens"] * 0.9 for prev, r in itertools.pairwise(requests[1:])
    )
