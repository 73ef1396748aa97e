"""The ``<memory-context>`` block earns its tokens (#35 item 6): no search for a prompt memory
cannot help, nothing that shares no word with the prompt, no line twice; and the memory tools
are offered only when memory holds entries at session start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentkeel.config.settings import MemorySettings
from agentkeel.core.events import Compaction
from agentkeel.memory import open_store
from agentkeel.memory.inject import can_help
from agentkeel.memory.plugin import MemoryPlugin

PROJECT = "repo"


def _rec(n: int, kind: str, session: str, text: str, day: int = 10, **meta: Any) -> dict[str, Any]:
    return {
        "id": f"m{n:03d}",
        "type": kind,
        "project": PROJECT,
        "session": session,
        "timestamp": f"2026-11-{day:02d}T10:00:00+00:00",
        "text": text,
        "metadata": meta,
    }


def _plugin(tmp_path: Path, records: list[dict[str, Any]]) -> MemoryPlugin:
    db = tmp_path / "memory.db"
    if records:
        store = open_store(str(db), embedder="none")
        store.add_many(records)
        store.close()
    config = MemorySettings(store=str(db), embedder="none", project=PROJECT, lessons=False)
    return MemoryPlugin(config, cwd=tmp_path, keel_home=tmp_path, session_id="now", window_tokens=200_000)


@pytest.fixture
def closing() -> Any:
    made: list[MemoryPlugin] = []
    yield made
    for p in made:
        p.close()


def _lines(block: str | None) -> list[str]:
    return [x for x in (block or "").splitlines() if x.startswith("- [")]


def test_the_rule_for_prompts_memory_cannot_help() -> None:
    for prompt in ("hi", "Hello!", "continue", "go ahead", "run the tests", "thanks", "ok, fix it", "try again"):
        assert not can_help(prompt), prompt
    for prompt in ("fix the ISO week parser", "why does test_env_override fail", "continue the csv export work"):
        assert can_help(prompt), prompt


def test_no_search_for_a_prompt_memory_cannot_help(tmp_path: Path, closing: list[MemoryPlugin]) -> None:
    records = [
        _rec(1, "user_prompt", "s1", "run the tests for the tests folder before we continue"),
        _rec(2, "tool_observation", "s1", "$ run tests\nthe tests pass; continue with the release", tool="Bash"),
    ]
    p = _plugin(tmp_path, records)
    closing.append(p)
    assert p.prompt_context("what did we decide about the release") is not None  # the first prompt
    for prompt in ("run the tests", "continue", "hi"):
        assert p.prompt_context(prompt) is None, prompt


def test_no_line_twice(tmp_path: Path, closing: list[MemoryPlugin]) -> None:
    summary = "Asked: add a --verbose flag to the cli. Changed src/cli.py; the suite passes."
    records = [
        # a session resumed once wrote its summary twice, the same text
        _rec(1, "session_summary", "s1", summary, 11, summary=summary),
        _rec(2, "session_summary", "s1", summary, 11, summary=summary),
        _rec(3, "session_summary", "s2", "Asked: speed up the csv export. Changed src/export.py.", 12),
        # the same observation from two sessions
        _rec(4, "tool_observation", "s1", "$ pytest -q tests/test_cli.py\n3 passed (verbose flag)", 11, tool="Bash"),
        _rec(5, "tool_observation", "s2", "$ pytest -q tests/test_cli.py\n3 passed (verbose flag)", 12, tool="Bash"),
        _rec(6, "user_prompt", "s1", "add a verbose flag to the cli", 11),
    ]
    p = _plugin(tmp_path, records)
    closing.append(p)
    first = _lines(p.prompt_context("the cli verbose flag prints too much"))
    texts = [line.split(" ", 2)[2] for line in first]  # without the id and the date
    assert len(texts) == len(set(texts)), first
    assert sum("--verbose flag to the cli" in line for line in first) == 1, first  # one summary, listed once
    assert sum("3 passed (verbose flag)" in line for line in first) == 1, first  # identical observations: one
    # a later prompt does not repeat what the context holds already ...
    assert not set(_lines(p.prompt_context("the verbose flag of the cli again"))) & set(first)
    # ... until a compaction drops it
    p._on_event(Compaction(messages=[]))
    again = [line.split(" ", 2)[2] for line in _lines(p.prompt_context("the verbose flag of the cli again"))]
    assert any("3 passed (verbose flag)" in line for line in again) and len(again) == len(set(again)), again


def test_nothing_that_shares_no_word_with_the_prompt(tmp_path: Path, closing: list[MemoryPlugin]) -> None:
    """A word search finds an entry through its neighbours' words (its session context): a line
    that shares no word with the prompt is not injected."""
    records = [
        _rec(1, "tool_observation", "s1", "the deploy script uploads with rsync over ssh", tool="Bash"),
        _rec(2, "tool_observation", "s1", "weather report: sunny and warm all week", tool="Bash"),
        _rec(3, "tool_observation", "s1", "lunch order: two pizzas", tool="Bash"),
    ]
    p = _plugin(tmp_path, records)
    closing.append(p)
    p._prompts = 1  # a later prompt: the search alone
    lines = _lines(p.prompt_context("does the rsync upload still work"))
    assert any("rsync" in line for line in lines), lines
    assert not any("weather" in line or "pizzas" in line for line in lines), lines


def test_memory_tools_only_when_memory_has_entries(tmp_path: Path, closing: list[MemoryPlugin]) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "full").mkdir()
    empty = _plugin(tmp_path / "empty", [])
    full = _plugin(tmp_path / "full", [_rec(1, "user_prompt", "s1", "anything")])
    closing += [empty, full]
    assert empty.tools() == [] and not empty.offers_tools()
    assert not (tmp_path / "empty" / "memory.db").exists()  # nothing created to find out
    assert {t.name for t in full.tools()} == {"MemorySearch", "MemoryTimeline", "MemoryGet"}
    ext = empty.extension(lambda e: None, None, "m")  # type: ignore[arg-type]
    assert ext.tools == []
