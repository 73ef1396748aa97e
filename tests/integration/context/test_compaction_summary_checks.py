"""The summary request, checked through a real session against the scripted model server (#35 review):

- an answer that calls a tool, or that stopped at the output limit, is not a summary: the fallback
  (chunked summaries of the transcript) writes one instead;
- the summary request after the conversation ends with one user message (the instruction is a text
  block at the end of the last one: strict chat templates refuse two user messages in a row), and
  the size it states is its output limit;
- with extended thinking, no summary request asks for max_tokens <= the thinking budget;
- ``/compact [focus]`` summarises whatever the strategy, even when the conversation already fits,
  and the focus reaches the summary request.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.app.runtime import Runtime
from agentkeel.context import commands
from agentkeel.core.view import Compaction
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.session.load import load_session
from integration.context.compacting import COMPACT, reads
from kit import session

GOOD = "SUMMARY-GOOD: six files read; USER-INSTRUCTION-42 says never touch f3"


def runtime(
    project: Path,
    server: FakeLLMServer,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    wire: str = "anthropic",
    **context: Any,
) -> Runtime:
    home = tmp_path / "keelhome"
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"maxTokens": 1000, "context": context}))
    return session(project, server=server, env=env, wire=wire, permission_mode="bypassPermissions")


def compactions(rt: Runtime) -> list[Compaction]:
    return [e for e in load_session(rt.session_path).events if isinstance(e, Compaction)]


def summary_requests(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r["body"] for r in server.cursor.requests if COMPACT in json.dumps(r["body"]["messages"])]


@pytest.mark.parametrize(
    "bad",
    [
        {"text": "I'll check the transcript first.", "tool_calls": [{"name": "Read", "input": {"file_path": "/x"}}]},
        {"text": "1. User messages: USER-INSTRUCTION-42: never touch", "stop_reason": "max_tokens"},
    ],
    ids=["calls-a-tool", "cut-off"],
)
async def test_an_answer_that_is_not_a_summary_is_refused(
    bad: dict[str, Any], project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm(
        {"steps": [*reads(project, 6), "read them", "after"], "match": [{"contains": COMPACT, "steps": [bad, GOOD]}]}
    )
    rt = runtime(project, server, tmp_path, window=30_000, autoCompact=False, keepRecent=0.05, strategy="summarize")
    try:
        await rt.run("USER-INSTRUCTION-42: never touch f3")
        shown = await commands.compact(rt, "")
        assert (await rt.run("next")).subtype == "success"
    finally:
        await rt.aclose()
    [event] = compactions(rt)
    assert shown.startswith("Compacted (chunked)") and event.stage == "chunked", shown
    assert event.summary == GOOD
    carried = json.dumps(server.cursor.requests[-1]["body"]["messages"][0])
    assert GOOD in carried and bad["text"] not in carried
    # the first summary request was the one after the conversation (the cheap one), refused
    first = summary_requests(server)[0]
    assert "hand-over note" in json.dumps(first["messages"][-1])


async def test_the_summary_request_is_one_user_message_and_states_its_limit(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm(
        {"steps": [*reads(project, 6), "read them", "after"], "match": [{"contains": COMPACT, "steps": [GOOD]}]}
    )
    rt = runtime(project, server, tmp_path, window=30_000, autoCompact=False, keepRecent=0.05, strategy="summarize")
    try:
        await rt.run("read the files")
        await commands.compact(rt, "")
    finally:
        await rt.aclose()
    [event] = compactions(rt)
    assert event.stage == "summary"
    [body] = summary_requests(server)
    roles = [m["role"] for m in body["messages"]]
    assert all(not (a == b == "user") for a, b in itertools.pairwise(roles)), roles
    # the conversation as it was (its tools too: the cached prefix), the instruction last
    assert body["tools"] and "Reading 5." in json.dumps(body["messages"])
    last_block = body["messages"][-1]["content"][-1]
    assert last_block["type"] == "text" and last_block["text"].startswith(COMPACT)
    # one figure: the size the instruction states is the request's output limit
    stated = re.search(r"under (\d+) tokens", last_block["text"])
    assert stated is not None and int(stated[1]) == body["max_tokens"]


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
async def test_an_automatic_compaction_after_tool_results_sends_one_user_message(
    wire: str, project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": [*reads(project, 10), "read them"], "match": [{"contains": COMPACT, "steps": [GOOD]}]})
    rt = runtime(project, server, tmp_path, wire=wire, window=20_000, autoCompactThreshold=0.6, strategy="summarize")
    try:
        assert (await rt.run("read the files")).subtype == "success"
    finally:
        await rt.aclose()
    assert compactions(rt) and compactions(rt)[0].trigger == "auto"
    body = summary_requests(server)[0]
    roles = [m["role"] for m in body["messages"]]
    assert all(not (a == b == "user") for a, b in itertools.pairwise(roles)), roles
    # the compaction came after a tool result: the instruction rides at the end of that message
    last = body["messages"][-1]
    assert last["role"] == "user" and COMPACT in json.dumps(last)
    if wire == "anthropic":
        assert [b["type"] for b in last["content"]][-2:] == ["tool_result", "text"]
    else:
        assert roles[-2] == "tool"


@pytest.mark.parametrize(
    ("window", "keep"),
    [(30_000, 0.05), (200_000, 0.01)],
    ids=["no-room-beside-the-budget", "room-but-the-session-output-limit"],
)
async def test_thinking_budget_never_swallows_the_summary_limit(
    window: int, keep: float, project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm(
        {"steps": [*reads(project, 6), "read them", "after"], "match": [{"contains": COMPACT, "steps": [GOOD]}]}
    )
    rt = runtime(
        project,
        server,
        tmp_path,
        env={"MAX_THINKING_TOKENS": "20000"},
        window=window,
        autoCompact=False,
        keepRecent=keep,
        strategy="summarize",
    )
    try:
        await rt.run("read the files")
        shown = await commands.compact(rt, "")
    finally:
        await rt.aclose()
    assert shown.startswith("Compacted (summary)"), shown
    bodies = summary_requests(server)
    session_limit = server.cursor.requests[0]["body"]["max_tokens"]  # within the model's output cap
    assert bodies
    for body in bodies:
        budget = (body.get("thinking") or {}).get("budget_tokens", 0)
        assert session_limit >= body["max_tokens"] > budget, (session_limit, body["max_tokens"], budget)
        assert "under" in json.dumps(body["messages"][-1])


@pytest.mark.parametrize("strategy", ["hybrid", "clear-tool-results", "truncate-oldest"])
async def test_manual_compact_summarises_whatever_the_strategy(
    strategy: str, project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm(
        {"steps": [*reads(project, 3), "read them", "after"], "match": [{"contains": COMPACT, "steps": [GOOD]}]}
    )
    # a large window: the conversation fits as it is, with room to spare
    rt = runtime(project, server, tmp_path, window=200_000, autoCompact=False, keepRecent=0.01, strategy=strategy)
    try:
        await rt.run("read the files")
        shown = await commands.compact(rt, "FOCUS-ON-THE-PARSER")
        assert (await rt.run("next")).subtype == "success"
    finally:
        await rt.aclose()
    assert shown.startswith("Compacted (summary)"), shown
    [event] = compactions(rt)
    assert event.summary == GOOD and event.trigger == "manual"
    assert "Focus the summary on: FOCUS-ON-THE-PARSER" in json.dumps(summary_requests(server)[0]["messages"])
    assert GOOD in json.dumps(server.cursor.requests[-1]["body"]["messages"][0])
