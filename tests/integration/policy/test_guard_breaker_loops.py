"""Execution safety: the result guard, the circuit breaker and loop detection, through their
public API and end to end through ``keel -p`` against the scripted model server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel import replace
from agentkeel.core.events import Event, Notice
from agentkeel.core.extensions import ToolCall
from agentkeel.core.tools import ToolOutput
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.policy.safety import NO_RESULT, CircuitBreaker, LoopDetector, ResultGuard
from agentkeel.tools import builtin_tools
from kit import KeelRun, session_files, wire_env

TOOLS = {t.name: t for t in builtin_tools()}
FAKE_KEY = "sk-ant-api03-" + "x" * 40  # obviously fake, shaped like a key


def _guard(name: str, content: Any, external: bool = False) -> str:
    tool = replace(TOOLS["Read"], name=name, is_external=external)
    out = asyncio.run(ResultGuard()(ToolCall("t", name, {}, tool), ToolOutput(content)))
    return out.text()


def test_result_guard_cleans_every_kind_of_output() -> None:
    assert _guard("Read", None) == NO_RESULT
    assert _guard("Read", "   ") == NO_RESULT
    assert json.loads(_guard("mcp__x__y", {"a": 1})) == {"a": 1}  # non-string -> JSON
    assert _guard("Read", "a\x1b[31mred\x1b[0m\x07b\tc\r\n\u202edrow") == "aredb\tc\r\ndrow"
    assert FAKE_KEY not in _guard("Read", f"key={FAKE_KEY}")
    assert "[REDACTED" in _guard("Bash", "Authorization: Bearer abcdefghijklmnop1234")
    html = "<html><body>" + "<p>hello</p>" * 30 + "<script>evil()</script></body></html>"
    stripped = _guard("mcp__web__get", html, external=True)
    assert "<p>" not in stripped and "evil()" not in stripped and "hello" in stripped
    assert "<p>" in _guard("Read", html)  # reading an HTML file keeps its source
    tb = 'Traceback (most recent call last):\n  File "/srv/app.py", line 3, in f\nValueError: x'
    assert "/srv/app.py" not in _guard("mcp__x__y", tb, external=True)


def test_circuit_breaker_opens_half_opens_and_closes() -> None:
    now = [0.0]
    events: list[Event] = []
    breaker = CircuitBreaker(events.append, threshold=2, cooldown_s=10, clock=lambda: now[0])
    call = ToolCall("t", "WebFetch", {"url": "https://example.com"}, TOOLS["WebFetch"])

    async def go() -> list[str]:
        states = []
        for ok in (False, False):
            assert await breaker.before(call) is None
            await breaker.after(call, ToolOutput("boom", is_error=not ok))
        refused = await breaker.before(call)
        states.append(refused.decision if refused else "none")
        now[0] = 11
        states.append("none" if await breaker.before(call) is None else "deny")  # half-open trial
        await breaker.after(call, ToolOutput("fine"))
        states.append("none" if await breaker.before(call) is None else "deny")
        return states

    assert asyncio.run(go()) == ["deny", "none", "none"]
    assert [e.message.rsplit(" ", 1)[1] for e in events if isinstance(e, Notice)] == ["open", "half-open", "closed"]
    local = ToolCall("t", "Read", {}, TOOLS["Read"])  # only external tools have circuits
    assert asyncio.run(breaker.before(local)) is None


def test_loop_detector_asks_then_stops() -> None:
    answers = [True, False]

    async def ask(call: ToolCall, count: int) -> bool:
        return answers.pop(0)

    detector = LoopDetector(ask, limit=3, window=10)
    call = ToolCall("t", "Bash", {"command": "npm test"}, TOOLS["Bash"])

    async def go() -> list[str]:
        return [(v.decision if (v := await detector(call)) else "ok") for _ in range(6)]

    assert asyncio.run(go()) == ["ok", "ok", "ok", "ok", "ok", "deny"]
    headless = LoopDetector(None, limit=2)
    verdicts = asyncio.run(_twice(headless, call))
    assert verdicts[-1] is not None and "different approach" in verdicts[-1].reason


async def _twice(d: LoopDetector, call: ToolCall) -> list[Any]:
    return [await d(call), await d(call)]


def test_headless_run_redacts_results_and_stops_doom_loops(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun], tmp_path: Path
) -> None:
    (project / "config.txt").write_text(f"api_key = {FAKE_KEY}\n")
    read = {"name": "Read", "input": {"file_path": str(project / "config.txt")}}
    server = fake_llm({"steps": [{"tool_calls": [read]}, {"tool_calls": [read]}, {"tool_calls": [read]}, "done"]})
    run = keel("-p", "read it", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    sent = json.dumps([r["body"] for r in server.cursor.requests])
    assert FAKE_KEY not in sent  # the model never saw the key
    assert "same input 3 times" in sent  # the third identical call was stopped with advice
    transcript = "".join(p.read_text() for p in session_files(tmp_path / "keelhome"))
    assert FAKE_KEY not in transcript


def test_directory_searches_skip_read_denied_files(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    (project / ".env").write_text("API_TOKEN_MARKER=obviously-fake\n")
    (project / "app.py").write_text("API_TOKEN_MARKER = None\n")
    grep = {"name": "Grep", "input": {"pattern": "API_TOKEN_MARKER", "path": ".", "output_mode": "content"}}
    glob = {"name": "Glob", "input": {"pattern": "**/.env*"}}
    server = fake_llm({"steps": [{"tool_calls": [grep, glob]}, "done"]})
    run = keel("-p", "search", "--disallowedTools", "Read(./.env)", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    sent = json.dumps(server.cursor.requests[-1]["body"]["messages"])
    assert "app.py" in sent and "obviously-fake" not in sent and ".env" not in sent.replace("**/.env*", "")
