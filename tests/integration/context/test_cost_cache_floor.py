"""``/cost`` says whether the stable prefix (tools, system prompt) reaches the model's minimum
cacheable length (catalog data): on Claude Haiku 4.5 (4,096 tokens) keel's prefix is below it, which
the provider reports nowhere (both cache figures stay at zero), so keel says it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.context.commands import cost
from agentkeel.models.fake.server import FakeLLMServer
from kit import session


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-haiku-4-5", "is below claude-haiku-4-5's minimum cacheable length of 4,096"),
        ("claude-sonnet-4-5", "cached: claude-sonnet-4-5 caches from 1,024"),
    ],
)
async def test_cost_reports_a_prefix_below_the_minimum(
    model: str, expected: str, project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": ["hi"]})
    rt = session(project, server=server, model=f"anthropic:{model}")
    try:
        await rt.run("hello")
        text = await cost(rt, "")
    finally:
        await rt.aclose()
    [line] = [x for x in text.splitlines() if x.startswith("Prompt cache:")]
    assert expected in line, text
