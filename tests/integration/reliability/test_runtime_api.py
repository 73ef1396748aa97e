"""The reliability layer through the public Runtime API (SPEC 5): what needs a hand on the running
session (an extension that breaks the request, input during a countdown, a second prompt)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel import replace
from agentkeel.app.runtime import Runtime
from agentkeel.core.events import Event, Notice
from agentkeel.core.extensions import Extension
from agentkeel.core.provider import ModelRequest
from agentkeel.core.types import Message, ToolResultBlock
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.reliability.pruning import DUPLICATE, OLD_ERROR
from agentkeel.reliability.state import ReliabilityState
from kit import session, session_files

Fake = Callable[[Any], FakeLLMServer]


def _call(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "input": tool_input}]}


def _runtime(
    project: Path, server: FakeLLMServer, settings: dict[str, Any] | None = None, extensions: tuple[Extension, ...] = ()
) -> Runtime:
    return session(
        project, server=server, settings=settings, allowed_tools=["Bash", "Read", "Write"], extensions=list(extensions)
    )


def _notices(rt: Runtime) -> list[str]:
    seen: list[str] = []

    def on(event: Event) -> None:
        if isinstance(event, Notice):
            seen.append(event.message)

    rt.bus.subscribe(on)
    return seen


def _bodies(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r["body"] for r in server.cursor.requests]


async def _drop_results(request: ModelRequest) -> ModelRequest:
    """A buggy request transform (a compactor, an SDK extension): it loses the tool results."""
    messages = [
        Message(role=m.role, content=[b for b in m.content if not isinstance(b, ToolResultBlock)] or m.content[:0])
        for m in request.messages
    ]
    return replace(request, messages=[m for m in messages if m.content])


async def test_pairing_validator_repairs_a_request_an_sdk_extension_broke(project: Path, fake_llm: Fake) -> None:
    for keep in (True, False):
        server = fake_llm({"steps": [_call("Bash", command="echo hi"), "done"]})
        rt = _runtime(project, server, extensions=(Extension("breaks-pairing", before_request=_drop_results),))
        if not keep:
            rt.agent.ext.remove("tool-pairing-validator")
        notices = _notices(rt)
        try:
            result = await rt.run("go")
        finally:
            await rt.aclose()
        assert result.subtype == "success"
        sent = json.dumps(_bodies(server)[1]["messages"])
        assert ('"tool_result"' in sent) is keep  # the dangling tool_use is answered, or reaches the API bare
        assert any("[tool-pairing-validator] request repaired" in n for n in notices) is keep


async def test_input_during_the_countdown_cancels_the_continuation(project: Path, fake_llm: Fake) -> None:
    todos = [{"content": "the rest", "status": "pending"}]
    server = fake_llm({"steps": [_call("TodoWrite", todos=todos), "pausing", "never"]})
    rt = _runtime(project, server, {"reliability": {"todoCountdownSeconds": 30}})
    state = rt.agent.services.get(ReliabilityState)

    def on(event: Event) -> None:  # the host sees the countdown and the user types something
        if isinstance(event, Notice) and "continuing in" in event.message:
            asyncio.get_running_loop().call_later(0.05, state.cancel_countdown)

    rt.bus.subscribe(on)
    notices = _notices(rt)
    try:
        result = await asyncio.wait_for(rt.run("go"), 20)
    finally:
        await rt.aclose()
    assert result.subtype == "success" and result.result == "pausing"
    assert len(_bodies(server)) == 2 and any("continuation cancelled" in n for n in notices)


async def test_an_interrupt_during_the_countdown_ends_the_run(project: Path, fake_llm: Fake) -> None:
    todos = [{"content": "the rest", "status": "pending"}]
    server = fake_llm({"steps": [_call("TodoWrite", todos=todos), "pausing", "never"]})
    rt = _runtime(project, server, {"reliability": {"todoCountdownSeconds": 30}})

    def on(event: Event) -> None:
        if isinstance(event, Notice) and "continuing in" in event.message:
            asyncio.get_running_loop().call_later(0.05, rt.agent.interrupt)

    rt.bus.subscribe(on)
    try:
        result = await asyncio.wait_for(rt.run("go"), 20)
    finally:
        await rt.aclose()
    assert result.subtype == "interrupted" and len(_bodies(server)) == 2


async def test_without_auto_resume_the_next_prompt_goes_out_repaired(project: Path, fake_llm: Fake) -> None:
    big = "python3 -c \"print('q' * 3000)\""
    too_long = {"error": {"status": 400, "message": "prompt is too long: 201000 tokens > 200000 maximum"}}
    steps = [_call("Bash", command=big), _call("Bash", command="echo 2"), too_long, "answered"]
    server = fake_llm({"steps": steps})
    rt = _runtime(project, server, {"reliability": {"autoResume": False}, "context": {"compactOnOverflow": False}})
    notices = _notices(rt)
    try:
        first = await rt.run("go")
        second = await rt.run("go on")
    finally:
        await rt.aclose()
    assert first.is_error and "prompt is too long" in first.error
    assert any("send a prompt to resume" in n for n in notices)
    assert second.subtype == "success" and second.result == "answered"
    last = json.dumps(_bodies(server)[3]["messages"])
    assert "q" * 3000 not in last and "pruned to fit the context window" in last


async def test_dynamic_pruning_dedupes_supersedes_and_purges_but_protects_recent_turns(
    project: Path, fake_llm: Fake
) -> None:
    target = project / "a.txt"
    target.write_text("A" * 600)
    fail = "python3 -c \"import sys; sys.stderr.write('E' * 500); sys.exit(3)\""
    steps = [
        _call("Read", file_path=str(target)),
        _call("Read", file_path=str(target)),
        _call("Write", file_path=str(target), content="B" * 400),
        _call("Bash", command=fail),
        _call("TodoWrite", todos=[{"content": "x", "status": "completed"}]),
        _call("TodoWrite", todos=[{"content": "x", "status": "completed"}]),
        _call("Bash", command="echo recent"),
        _call("Bash", command="echo recent"),
        "done",
    ]
    server = fake_llm({"steps": steps})
    rt = _runtime(project, server, {"reliability": {"pruneProtectTurns": 2, "pruneAtPercent": 0}})
    notices = _notices(rt)
    try:
        result = await rt.run("go")
    finally:
        await rt.aclose()
    assert result.subtype == "success"
    final = _bodies(server)[-1]["messages"]
    results = [b for m in final for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    texts = [b["content"] if isinstance(b["content"], str) else json.dumps(b["content"]) for b in results]
    assert texts[0] == DUPLICATE  # the same Read again later
    assert "was changed after this read" in texts[1]  # then the file was written
    assert texts[3].endswith(OLD_ERROR) and "E" * 500 not in texts[3]  # an old error, cut
    assert texts[4] != DUPLICATE  # TodoWrite is protected
    assert "recent" in texts[6] and "recent" in texts[7]  # identical, but within the protected turns
    assert any("[dynamic-context-pruning]" in n for n in notices)
    log = session_files(Path(os.environ["KEEL_HOME"]))[0].read_text()
    assert "A" * 600 in log and "E" * 500 in log  # the transcript keeps everything
