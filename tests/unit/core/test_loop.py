"""The turn engine through its public API, with the in-process scripted model and real tools."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentkeel.core.events import (
    AssistantMessage,
    Event,
    EventBus,
    Interrupted,
    RequestStarted,
    StreamRetry,
    ToolFinished,
    ToolStarted,
)
from agentkeel.core.extensions import Extension, Extensions, StopInfo, ToolCall, Verdict
from agentkeel.core.loop import Agent
from agentkeel.core.retry import RetryPolicy
from agentkeel.core.run import LoopConfig
from agentkeel.core.tools import Services, Tool, ToolContext, ToolOutput, ToolRegistry
from agentkeel.core.types import ToolResultBlock, to_data
from agentkeel.core.view import INTERRUPTED_RESULT, repair_messages
from agentkeel.models.fake.script import Script
from agentkeel.models.scripted import ScriptedProvider
from agentkeel.tools import builtin_tools
from kit import wait_until_async

FAST = RetryPolicy(max_retries=3, base_delay_s=0.001, max_delay_s=0.01)


def make_agent(
    steps: list[Any], cwd: Path, *, tools: list[Tool] | None = None, ext: Extensions | None = None, **config: Any
) -> tuple[Agent, list[Event]]:
    bus = EventBus()
    events: list[Event] = []
    bus.subscribe(events.append)
    ctx = ToolContext(cwd=cwd, session_id="test", services=Services(), emit=bus.emit)
    agent = Agent(
        ScriptedProvider(Script.from_data({"steps": steps})),
        ToolRegistry(tools or builtin_tools()),
        LoopConfig(model="scripted", retry=FAST, **config),
        bus=bus,
        extensions=ext,
        context=ctx,
    )
    return agent, events


def ls(path: str) -> dict[str, Any]:
    return {"name": "LS", "input": {"path": path}}


async def test_end_turn_success(tmp_path: Path) -> None:
    agent, _ = make_agent(["hello"], tmp_path)
    result = await agent.run("hi")
    assert (result.subtype, result.result, result.num_turns) == ("success", "hello", 1)
    assert [m.role for m in agent.messages] == ["user", "assistant"]


async def test_scripted_model_counts_the_whole_request_each_turn(tmp_path: Path) -> None:
    """Its input tokens are the request's JSON length / 4, though it serialises only new messages."""
    agent, events = make_agent([{"tool_calls": [ls(str(tmp_path))]}] * 3 + ["done"], tmp_path)
    provider = agent.provider
    assert isinstance(provider, ScriptedProvider)
    await agent.run("go")
    # request i carried the prompt and i (assistant, tool results) pairs
    expected = [len(json.dumps([to_data(m) for m in agent.messages[: 1 + 2 * i]])) // 4 for i in range(4)]
    assert [e.usage.input_tokens for e in events if isinstance(e, AssistantMessage)] == expected
    assert expected == sorted(expected) and len(set(expected)) == 4


async def test_max_turns(tmp_path: Path) -> None:
    agent, _ = make_agent([{"tool_calls": [ls(str(tmp_path))]}] * 5, tmp_path, max_turns=2)
    result = await agent.run("go")
    assert result.subtype == "error_max_turns" and result.num_turns == 2
    assert repair_messages(agent.messages).repairs == []  # the transcript stays valid


async def test_max_budget(tmp_path: Path) -> None:
    step = {"tool_calls": [ls(str(tmp_path))], "usage": {"input_tokens": 1000, "output_tokens": 0}}
    agent, _ = make_agent([step] * 5, tmp_path, max_budget_usd=0.0025, cost=lambda u: u.input_tokens / 1e6)
    result = await agent.run("go")
    assert result.subtype == "error_max_budget_usd"
    assert result.num_turns == 3 and result.total_cost_usd == pytest.approx(0.003)


async def test_retries_rate_limit_and_broken_stream(tmp_path: Path) -> None:
    steps = [
        {"error": {"status": 429, "retry_after": 0.01}},
        {"text": "partial then broken", "break_after": 2},
        "finally",
    ]
    agent, events = make_agent(steps, tmp_path)
    result = await agent.run("hi")
    assert result.result == "finally"
    retries = [e for e in events if isinstance(e, StreamRetry)]
    assert [r.attempt for r in retries] == [1, 2]
    assert retries[0].delay_s == 0.01  # retry-after honoured
    # the broken attempt's partial text was never applied
    assert [m.text() for m in agent.messages if m.role == "assistant"] == ["finally"]


async def test_non_retryable_error_is_reported(tmp_path: Path) -> None:
    agent, _ = make_agent([{"error": {"status": 400, "message": "prompt is too long"}}], tmp_path)
    result = await agent.run("hi")
    assert result.subtype == "error_during_execution" and "prompt is too long" in result.error


async def test_retries_exhausted(tmp_path: Path) -> None:
    agent, events = make_agent([{"error": {"status": 529}}] * 10, tmp_path)
    result = await agent.run("hi")
    assert result.subtype == "error_during_execution"
    assert sum(isinstance(e, StreamRetry) for e in events) == FAST.max_retries


class _SlowInput(BaseModel):
    label: str


def concurrency_probe(read_only: bool, log: list[tuple[str, str]]) -> Tool:
    async def run(args: _SlowInput, ctx: ToolContext) -> ToolOutput:
        log.append(("start", args.label))
        await asyncio.sleep(0.05)
        log.append(("end", args.label))
        return ToolOutput(args.label)

    return Tool("Probe" if read_only else "Writer", "test tool", _SlowInput, run, read_only=read_only)


async def test_read_only_tools_run_concurrently_writers_serially(tmp_path: Path) -> None:
    log: list[tuple[str, str]] = []
    tools = [concurrency_probe(True, log), concurrency_probe(False, log)]
    calls = [
        {"name": "Probe", "input": {"label": "r1"}},
        {"name": "Probe", "input": {"label": "r2"}},
        {"name": "Writer", "input": {"label": "w1"}},
        {"name": "Writer", "input": {"label": "w2"}},
        {"name": "Probe", "input": {"label": "r3"}},
    ]
    agent, _ = make_agent([{"tool_calls": calls}, "done"], tmp_path, tools=tools)
    await agent.run("go")
    # both reads started before either ended; writers never overlap anything
    assert log[:2] == [("start", "r1"), ("start", "r2")]
    assert log[4:] == [("start", "w1"), ("end", "w1"), ("start", "w2"), ("end", "w2"), ("start", "r3"), ("end", "r3")]
    results = agent.messages[2].tool_results()
    assert [r.text() for r in results] == ["r1", "r2", "w1", "w2", "r3"]  # order kept


async def test_interrupt_during_tools_leaves_valid_transcript(tmp_path: Path) -> None:
    calls = [{"name": "Bash", "input": {"command": "sleep 30"}}, ls(str(tmp_path))]
    agent, events = make_agent([{"tool_calls": calls}, "never"], tmp_path)
    task = asyncio.create_task(agent.run("go"))
    await wait_until_async(lambda: any(isinstance(e, ToolStarted) for e in events), 60, "the tool to start", 0.01)
    agent.interrupt()
    result = await asyncio.wait_for(task, 30)
    assert result.subtype == "interrupted"
    assert any(isinstance(e, Interrupted) and e.during == "tools" for e in events)
    results = agent.messages[-1].tool_results()
    assert [r.tool_use_id for r in results] == [u.id for u in agent.messages[-2].tool_uses()]
    assert all(r.content == INTERRUPTED_RESULT for r in results)
    assert repair_messages(agent.messages).repairs == []


async def test_an_interrupt_waits_for_every_parallel_tool_to_stop(tmp_path: Path) -> None:
    """The run ends once each call of the interrupted batch has stopped, not at the first one to stop
    (a subagent still stopping was cut off by the shutdown that followed, its transcript left open)."""
    stopped: list[str] = []

    async def run(args: _SlowInput, ctx: ToolContext) -> ToolOutput:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            if args.label == "slow":
                await asyncio.shield(asyncio.sleep(0.3))  # its cleanup takes a while
            stopped.append(args.label)
            raise
        return ToolOutput("never")

    tool = Tool("Stopper", "test tool", _SlowInput, run, read_only=True)
    calls = [{"name": "Stopper", "input": {"label": "quick"}}, {"name": "Stopper", "input": {"label": "slow"}}]
    agent, events = make_agent([{"tool_calls": calls}, "never"], tmp_path, tools=[tool])
    task = asyncio.create_task(agent.run("go"))
    await wait_until_async(lambda: sum(isinstance(e, ToolStarted) for e in events) >= 2, 60, "both tools", 0.01)
    agent.interrupt()
    result = await asyncio.wait_for(task, 30)
    assert result.subtype == "interrupted"
    assert sorted(stopped) == ["quick", "slow"]  # both had stopped when the run ended
    results = agent.messages[-1].tool_results()
    assert [r.content for r in results] == [INTERRUPTED_RESULT, INTERRUPTED_RESULT]


async def test_interrupt_during_request(tmp_path: Path) -> None:
    agent, events = make_agent([{"text": "slow", "delay_s": 30}], tmp_path)
    task = asyncio.create_task(agent.run("go"))
    while not any(isinstance(e, RequestStarted) for e in events):  # the slow request is in flight
        await asyncio.sleep(0.01)
    agent.interrupt()
    result = await asyncio.wait_for(task, 30)
    assert result.subtype == "interrupted"
    assert [m.role for m in agent.messages] == ["user"]
    assert any(isinstance(e, Interrupted) and e.during == "request" for e in events)


async def test_unknown_tool_and_bad_input_go_back_to_the_model(tmp_path: Path) -> None:
    calls = [{"name": "NoSuchTool", "input": {}}, {"name": "Read", "input": {"file_path": 42, "bogus": 1}}]
    agent, _ = make_agent([{"tool_calls": calls}, "ok"], tmp_path)
    await agent.run("go")
    unknown, bad = agent.messages[2].tool_results()
    assert unknown.is_error and "No such tool: NoSuchTool" in unknown.text()
    assert bad.is_error and "Invalid input for Read" in bad.text() and "bogus" in bad.text()


async def test_before_tool_crash_fails_closed_after_tool_crash_withholds(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"

    async def crash(call: ToolCall) -> Verdict | None:
        raise RuntimeError("policy bug")

    ext = Extensions([Extension("crash", before_tool=crash)])
    agent, _ = make_agent(
        [{"tool_calls": [{"name": "Write", "input": {"file_path": str(target), "content": "x"}}]}, "ok"],
        tmp_path,
        ext=ext,
    )
    await agent.run("go")
    assert not target.exists()
    assert "Permission check failed" in agent.messages[2].tool_results()[0].text()

    async def broken_guard(call: ToolCall, out: ToolOutput) -> ToolOutput:
        raise ValueError("guard bug")

    agent, _ = make_agent(
        [{"tool_calls": [ls(str(tmp_path))]}, "ok"],
        tmp_path,
        ext=Extensions([Extension("guard", after_tool=broken_guard)]),
    )
    await agent.run("go")
    assert agent.messages[2].tool_results()[0].text() == "[result withheld: post-processing failed]"


async def test_before_tool_can_rewrite_input_and_deny(tmp_path: Path) -> None:
    async def rewrite(call: ToolCall) -> Verdict | None:
        if call.name == "LS":
            return Verdict("allow", updated_input={"path": str(tmp_path / "sub")})
        return Verdict("deny", "no writes today")

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "inner.txt").write_text("x")
    calls = [ls("/"), {"name": "Write", "input": {"file_path": str(tmp_path / "w"), "content": "x"}}]
    agent, _ = make_agent(
        [{"tool_calls": calls}, "ok"], tmp_path, ext=Extensions([Extension("rewrite", before_tool=rewrite)])
    )
    await agent.run("go")
    listing, denied = agent.messages[2].tool_results()
    assert "inner.txt" in listing.text()
    assert denied.is_error and denied.text() == "no writes today"


async def test_on_stop_can_continue_once(tmp_path: Path) -> None:
    seen: list[StopInfo] = []

    async def stop_hook(info: StopInfo) -> str | None:
        seen.append(info)
        return None if info.continued else "Also check the tests."

    agent, _ = make_agent(["first", "second"], tmp_path, ext=Extensions([Extension("stop", on_stop=stop_hook)]))
    result = await agent.run("go")
    assert result.result == "second" and result.num_turns == 2
    assert [s.continued for s in seen] == [False, True]
    assert agent.messages[2].text() == "Also check the tests."


async def test_tool_timeout(tmp_path: Path) -> None:
    async def hang(args: _SlowInput, ctx: ToolContext) -> ToolOutput:
        await asyncio.sleep(30)
        return ToolOutput("never")

    tool = Tool("Hang", "hangs", _SlowInput, hang, read_only=True, timeout_s=0.05)
    agent, events = make_agent(
        [{"tool_calls": [{"name": "Hang", "input": {"label": "x"}}]}, "ok"], tmp_path, tools=[tool]
    )
    await agent.run("go")
    [res] = agent.messages[2].tool_results()
    assert isinstance(res, ToolResultBlock) and res.is_error and "timed out after 0.05s" in res.text()
    assert any(isinstance(e, ToolFinished) and e.is_error for e in events)


async def test_hidden_tools_are_not_offered(tmp_path: Path) -> None:
    ext = Extensions([Extension("hide", hide_tool=lambda t: t.name == "Bash")])
    agent, _ = make_agent(["ok"], tmp_path, ext=ext)
    await agent.run("hi")
    provider = agent.provider
    assert isinstance(provider, ScriptedProvider)
    offered = {t.name for t in provider.requests[0].tools}
    assert "Bash" not in offered and "Read" in offered
