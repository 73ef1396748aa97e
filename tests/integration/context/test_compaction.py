"""Compaction through a real session: the three fallback stages, the prompt-too-long retry, /compact,
PreCompact/PostCompact through the lifecycle point, and the context commands."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.app.runtime import Runtime
from agentkeel.context import commands
from agentkeel.context.manager import ContextManager
from agentkeel.core.extensions import LifecyclePoint, LifecycleResult
from agentkeel.core.view import Compaction
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.session.load import load_session
from integration.context.compacting import COMPACT, reads
from kit import run_session, session


def runtime(project: Path, server: FakeLLMServer, tmp_path: Path, **context: Any) -> Runtime:
    home = tmp_path / "keelhome"  # the user's settings layer (KEEL_HOME is tmp_path/keelhome in every test)
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"maxTokens": 1000, "context": context}))
    return session(project, server=server, permission_mode="bypassPermissions")


def events(rt: Runtime) -> list[Compaction]:
    return [e for e in load_session(rt.session_path).events if isinstance(e, Compaction)]


@pytest.mark.parametrize(
    ("summaries", "stage"),
    [
        (["SUMMARY-ONE: the files were read"], "summary"),
        ([{"error": {"status": 400, "message": "summariser broke"}}, "SUMMARY-CHUNK: part"], "chunked"),
        ([{"text": "late", "delay_s": 30}, "SUMMARY-CHUNK: after a timeout"], "chunked"),
        (["X" * 60_000, "SUMMARY-CHUNK: shorter"], "chunked"),
        ([{"error": {"status": 400, "message": "always broken"}}], "clear-tool-results"),
        ([{"text": "late", "delay_s": 30}], "clear-tool-results"),
        (["Y" * 60_000], "clear-tool-results"),
    ],
    ids=["summary", "fails->chunked", "times-out->chunked", "too-much->chunked", "fails", "times-out", "too-much"],
)
async def test_each_fallback_stage(
    summaries: list[Any], stage: str, project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm(
        {
            "steps": [*reads(project, 6), "read them", "after compaction"],
            "match": [{"contains": COMPACT, "steps": summaries}],
        }
    )
    rt = runtime(
        project,
        server,
        tmp_path,
        window=30_000,
        autoCompact=False,
        summaryTimeoutS=3,  # an answer in time on a loaded machine; the late one comes after 30 s
        keepRecent=0.05,
        strategy="summarize",
    )
    try:
        assert (await rt.run("read the files")).subtype == "success"
        shown = await commands.compact(rt, "")
        assert f"Compacted ({stage})" in shown
        [event] = events(rt)
        assert event.stage == stage and event.trigger == "manual" and event.tokens_after < event.tokens_before
        assert (await rt.run("next")).subtype == "success"
    finally:
        await rt.aclose()
    last = server.cursor.requests[-1]
    first_text = json.dumps(last["body"]["messages"][0])
    assert "<keel-context-carryover" in first_text
    if stage == "summary":
        assert "SUMMARY-ONE" in first_text
    elif stage == "chunked":
        assert "SUMMARY-CHUNK" in first_text and "X" * 1000 not in first_text
    else:
        assert "no summary was written" in first_text and "Y" * 1000 not in first_text
    # the recent turn survives verbatim, its tool_use and tool_result together
    body = json.dumps(last["body"])
    assert "Reading 5." in body and "line 5.0" in body


async def test_prompt_too_long_compacts_and_retries_once(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    # keel believes the window is large; the server's is small: the refusal is what tells keel
    server = fake_llm(
        {
            "steps": [*reads(project, 8), "done"],
            "context_window": 9_000,
            "match": [{"contains": COMPACT, "steps": ["SUMMARY: reads so far"]}],
        }
    )
    rt = runtime(project, server, tmp_path, autoCompact=False)
    try:
        result = await rt.run("read the files")
    finally:
        await rt.aclose()
    assert result.subtype == "success", result.error
    refused = [r for r in server.cursor.requests if r["over_window"]]
    assert refused, "the scenario never overflowed"
    found = events(rt)
    # the refusal compacts first; once keel knows the real window it may compact before overflowing
    assert found and found[0].trigger == "overflow" and all(e.trigger in ("overflow", "auto") for e in found)
    # each refusal was followed by one compaction and a retry that fitted
    after = server.cursor.requests[server.cursor.requests.index(refused[0]) + 1 :]
    assert any(not r["over_window"] and "matched" not in r for r in after)


async def test_precompact_hook_can_refuse_and_postcompact_is_told(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    fired: list[tuple[str, dict[str, Any]]] = []

    class Point(LifecyclePoint):
        refuse = True

        def listens(self, event: str) -> bool:
            return True

        async def fire(self, event: str, fields: dict[str, Any], *, match: str | None = None) -> LifecycleResult:
            fired.append((event, fields))
            if event == "PreCompact" and self.refuse:
                return LifecycleResult(blocked=True, reason="not now")
            if event == "PreCompact":
                return LifecycleResult(context=("HOOK-CONTEXT-kept",))
            return LifecycleResult()

    (project / "AGENTS.md").write_text("planted")
    server = fake_llm({"steps": [*reads(project, 4), "ok", "ok"], "match": [{"contains": COMPACT, "steps": ["S"]}]})
    rt = runtime(project, server, tmp_path, autoCompact=False, keepRecent=0.05, window=30_000, strategy="summarize")
    point = Point()
    rt.agent.services.put(LifecyclePoint, point)
    try:
        await rt.run("go")
        assert "Nothing was compacted" in await commands.compact(rt, "keep the paths")
        point.refuse = False
        assert "Compacted" in await commands.compact(rt, "keep the paths")
        await rt.run("more")
    finally:
        await rt.aclose()
    loaded = [f for n, f in fired if n == "InstructionsLoaded"]
    assert [(Path(f["file_path"]).name, f["load_reason"], f["memory_type"]) for f in loaded] == [
        ("AGENTS.md", "session_start", "Project")
    ]
    names = [n for n, _ in fired if n in ("PreCompact", "PostCompact")]
    assert names == ["PreCompact", "PreCompact", "PostCompact"]
    assert fired[[n for n, _ in fired].index("PreCompact")][1]["custom_instructions"] == "keep the paths"
    assert "HOOK-CONTEXT-kept" in json.dumps(server.cursor.requests[-1]["body"]["messages"][0])
    assert "keep the paths" in json.dumps([r["body"] for r in server.cursor.requests if "matched" in r])


async def test_context_cost_and_memory_commands(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    (project / "AGENTS.md").write_text("Use tabs.\n@missing/file.md\n")
    server = fake_llm({"steps": [*reads(project, 2), "ok"]})
    rt = runtime(project, server, tmp_path)
    try:
        await rt.run("go")
        shown = await commands.context(rt, "")
        cost = await commands.cost(rt, "")
        mem = await commands.memory(rt, "")
    finally:
        await rt.aclose()
    assert "usable tokens" in shown and "tool results" in shown and "tools" in shown and "safe" in shown
    assert "Requests:       3" in cost and "read from cache" in cost
    assert "[project]" in mem and "AGENTS.md" in mem and "missing/file.md not found" in mem
    mgr = rt.agent.services.find(ContextManager)
    assert mgr is not None and mgr.accounting.usage.cache_read_tokens > 0
    assert mgr.memory_context is not None  # the runtime wired the memory layer's context in


async def test_memory_context_rides_with_the_carry_over(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": [*reads(project, 4), "ok", "ok"]})
    rt = runtime(project, server, tmp_path, autoCompact=False, keepRecent=0.05, window=30_000, strategy="summarize")
    mgr = rt.agent.services.find(ContextManager)
    assert mgr is not None
    asked: list[str] = []

    def memory_context(text: str) -> str:
        asked.append(text)
        return "<memory-context>MEM-FACT-otter</memory-context>"

    mgr.memory_context = memory_context  # the seam the runtime fills with the memory layer's prompt_context
    try:
        await rt.run("read the data files")
        assert "Compacted" in await commands.compact(rt, "")
        await rt.run("more")
    finally:
        await rt.aclose()
    assert asked == ["read the data files"]
    assert "MEM-FACT-otter" in json.dumps(server.cursor.requests[-1]["body"]["messages"][0])


async def test_touching_a_file_brings_its_instructions_and_editing_one_rebuilds_the_prompt(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    (project / ".git").mkdir()
    (project / "AGENTS.md").write_text("ROOT-V1")
    (project / "lib").mkdir()
    (project / "lib" / "CLAUDE.md").write_text("NESTED-FACT-lib")
    (project / "lib" / "x.py").write_text("x = 1\n")
    (project / ".keel" / "rules").mkdir(parents=True)
    (project / ".keel" / "rules" / "py.md").write_text("---\npaths: lib/*.py\n---\nRULE-FACT-py")
    agents = str(project / "AGENTS.md")
    server = fake_llm(
        {
            "steps": [
                {"text": "r", "tool_calls": [{"name": "Read", "input": {"file_path": str(project / "lib" / "x.py")}}]},
                {"text": "r", "tool_calls": [{"name": "Read", "input": {"file_path": agents}}]},
                {
                    "text": "e",
                    "tool_calls": [
                        {"name": "Edit", "input": {"file_path": agents, "old_string": "V1", "new_string": "V2"}}
                    ],
                },
                "done",
            ]
        }
    )
    rt = runtime(project, server, tmp_path)
    try:
        assert (await rt.run("go")).subtype == "success"
    finally:
        await rt.aclose()
    bodies = [json.dumps(r["body"]) for r in server.cursor.requests]
    assert "NESTED-FACT-lib" not in bodies[0] and "RULE-FACT-py" not in bodies[0]
    assert "NESTED-FACT-lib" in bodies[1] and "RULE-FACT-py" in bodies[1]  # on the Read's result
    assert bodies[1].count("NESTED-FACT-lib") == 1  # once, not on every later read
    systems = [json.dumps(r["body"]["system"]) for r in server.cursor.requests]
    assert "ROOT-V1" in systems[2] and "ROOT-V2" in systems[3]  # the session's edit rebuilt the prompt at once


async def test_a_crashing_fit_context_fails_open(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    from agentkeel.core.events import Notice
    from agentkeel.core.extensions import Extension

    async def boom(request: object, error: object) -> None:
        raise RuntimeError("fit broke")

    server = fake_llm({"steps": ["answered anyway"]})
    rt = session(project, server=server, retries=None, extensions=[Extension("boom", fit_context=boom)])
    notices: list[str] = []
    rt.bus.subscribe(lambda e: notices.append(e.message) if isinstance(e, Notice) else None)
    result = await run_session(rt, "hi")
    assert result.subtype == "success" and result.result == "answered anyway"
    assert any("boom failed" in n and "fit broke" in n for n in notices)


async def test_an_active_skill_is_reinjected_after_compaction(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    """A skill the model loaded (Skill tool) is in the first request after a compaction, which would
    otherwise have summarised it away."""
    skill = project / ".claude" / "skills" / "release"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: release\ndescription: Cut a release\n---\nRELEASE-RULE-7: tag with $ARGUMENTS, never force-push.\n"
    )
    server = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "Skill", "input": {"skill": "release", "args": "v2.0"}}]},
                *reads(project, 3),
                "released",
                "next answer",
            ],
            "match": [{"contains": COMPACT, "steps": ["SUMMARY: a release was started"]}],
        }
    )
    rt = runtime(project, server, tmp_path)
    try:
        first = await rt.run("cut the release")
        assert first.subtype == "success", first.error
        assert "RELEASE-RULE-7: tag with v2.0" in json.dumps(server.cursor.requests[1]["body"])
        await commands.compact(rt, "")
        assert events(rt), "no compaction happened"
        await rt.run("and then?")
    finally:
        await rt.aclose()
    after = json.dumps(server.cursor.requests[-1]["body"]["messages"])
    assert "RELEASE-RULE-7: tag with v2.0" in after and "Skills in use" in after
