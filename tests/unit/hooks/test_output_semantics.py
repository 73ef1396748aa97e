"""Output semantics through the public API (SPEC 4): deny > ask > allow across hooks, a hook's
allow never beats a deny rule or an always-ask, updatedInput is checked again, failClosed,
Stop continuation and its cap, ``continue: false``, and each event's own place in the loop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agentkeel.core.extensions import Extension, ToolCall
from agentkeel.core.provider import ModelRequest
from agentkeel.core.run import RunResult
from agentkeel.core.types import to_data
from agentkeel.hooks.extension import MAX_STOP_CONTINUES
from kit import session, write_script


def _group(handler: Any, matcher: str = "*", **fields: Any) -> dict[str, Any]:
    h = {"type": "python", "callable": handler, **fields} if callable(handler) else handler
    return {"matcher": matcher, "hooks": [h]}


class Session:
    """One runtime over a scripted model, with the requests it sent."""

    def __init__(self, project: Path, steps: list[Any], hooks: dict[str, Any], **opts: Any) -> None:
        script = write_script(project.parent, steps, loop=opts.pop("loop", False))
        self.requests: list[ModelRequest] = []

        async def record(request: ModelRequest) -> ModelRequest:
            self.requests.append(request)
            return request

        self.project = project
        self.opts: dict[str, Any] = {
            "model": f"scripted:{script}",
            "hooks": hooks,
            "extensions": [Extension("recorder", before_request=record)],
            **opts,
        }

    async def run(self, *prompts: str) -> list[RunResult]:
        rt = session(self.project, **self.opts)
        self.session_path = rt.session_path
        try:
            return [await rt.run(p) for p in prompts]
        finally:
            await rt.aclose()

    def tool_results(self, index: int = -1) -> str:
        return json.dumps([to_data(b) for b in self.requests[index].messages[-1].content])


def bash(*commands: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "Bash", "input": {"command": c}} for c in commands]}


async def test_a_hook_allow_never_beats_a_deny_rule_and_updated_input_is_checked_again(project: Path) -> None:
    (project / "build").mkdir()

    def pre(payload: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"hookEventName": "PreToolUse", "permissionDecision": "allow"}
        if payload["tool_input"]["command"] == "echo safe":
            out["updatedInput"] = {"command": "rm -rf build"}
        return {"hookSpecificOutput": out}

    s = Session(
        project,
        [bash("rm -rf build"), bash("echo safe"), "done"],
        {"PreToolUse": [_group(pre, "Bash")]},
        disallowed_tools=["Bash(rm *)"],
    )
    [result] = await s.run("clean")
    assert result.subtype == "success"
    assert "denied by rule Bash(rm *)" in s.tool_results(1)
    assert "denied by rule Bash(rm *)" in s.tool_results(2)
    assert (project / "build").is_dir()


async def test_a_hook_allow_skips_a_plain_ask_but_never_a_protected_path(project: Path) -> None:
    (project / ".git").mkdir()

    def allow(payload: dict[str, Any]) -> dict[str, Any]:
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}

    write = lambda path: {"tool_calls": [{"name": "Write", "input": {"file_path": path, "content": "x"}}]}  # noqa: E731
    s = Session(project, [write("notes.md"), write(".git/config"), "done"], {"PreToolUse": [_group(allow, "Write")]})
    await s.run("write")
    assert (project / "notes.md").read_text() == "x"  # headless default mode would have denied it
    assert not (project / ".git" / "config").exists()
    assert "protected" in s.tool_results(2)


async def test_permission_decisions_compose_deny_over_ask_over_allow(project: Path) -> None:
    def decide(kind: str) -> Any:
        def handler(payload: dict[str, Any]) -> dict[str, Any]:
            if kind == "deny" and "second" not in payload["tool_input"]["command"]:
                return {}
            out = {"permissionDecision": kind, "permissionDecisionReason": f"{kind} says so"}
            return {"hookSpecificOutput": {"hookEventName": "PreToolUse", **out}}

        return handler

    asked: list[str] = []

    async def ask(call: ToolCall, decision: Any) -> str:
        asked.append(call.input["command"])
        return "allow"

    hooks = {"PreToolUse": [_group(decide("allow")), _group(decide("ask")), _group(decide("deny"))]}
    s = Session(project, [bash("echo first"), bash("echo second"), "done"], hooks, ask=ask)
    await s.run("go")
    assert asked == ["echo first"]  # allow + ask: the ask wins and the host is asked
    assert "first" in s.tool_results(1) and "deny says so" in s.tool_results(2)


async def test_matching_handlers_run_concurrently_and_identical_ones_once(project: Path) -> None:
    a_in, b_in = asyncio.Event(), asyncio.Event()
    calls: list[str] = []

    async def a(payload: dict[str, Any]) -> None:
        a_in.set()
        await asyncio.wait_for(b_in.wait(), 10)  # only returns if b runs at the same time

    async def b(payload: dict[str, Any]) -> None:
        b_in.set()
        await asyncio.wait_for(a_in.wait(), 10)

    def counted(payload: dict[str, Any]) -> None:
        calls.append(payload["tool_use_id"])

    hooks = {"PreToolUse": [_group(a), _group(b), _group(counted), _group(counted, "Bash")]}
    s = Session(project, [bash("echo hi"), "done"], hooks)
    await s.run("go")
    assert a_in.is_set() and b_in.is_set()
    assert len(calls) == 1
    assert "hi" in s.tool_results(1) and "timed out" not in s.tool_results(1)


async def test_fail_closed_pre_tool_hooks_deny_when_they_fail(project: Path) -> None:
    broken = {"type": "command", "command": "exit 1"}
    s = Session(project, [bash("echo one"), "done"], {"PreToolUse": [_group({**broken, "failClosed": True})]})
    await s.run("go")
    assert "denied because the hook is marked failClosed" in s.tool_results(1)
    s = Session(project, [bash("echo one"), "done"], {"PreToolUse": [_group(broken)]})
    await s.run("go")
    assert "one" in s.tool_results(1) and "failClosed" not in s.tool_results(1)


async def test_a_stop_hook_that_always_blocks_is_capped(project: Path) -> None:
    seen: list[bool] = []

    def stop(payload: dict[str, Any]) -> dict[str, Any]:
        seen.append(payload["stop_hook_active"])
        return {"decision": "block", "reason": "keep going"}

    s = Session(project, ["again"], {"Stop": [_group(stop)]}, loop=True)
    [result] = await s.run("go")
    assert result.subtype == "success"
    assert len(s.requests) == MAX_STOP_CONTINUES + 1
    assert seen == [False] + [True] * MAX_STOP_CONTINUES


async def test_continue_false_ends_the_run_with_its_reason(project: Path) -> None:
    def post(payload: dict[str, Any]) -> dict[str, Any]:
        return {"continue": False, "stopReason": "halt: the build is red"}

    s = Session(project, [bash("echo hi"), "never sent"], {"PostToolUse": [_group(post)]})
    [result] = await s.run("go")
    assert result.is_error and "halt: the build is red" in result.error
    assert len(s.requests) == 1


async def test_a_user_prompt_hook_exit_2_blocks_the_prompt(project: Path) -> None:
    guard = {"type": "command", "command": "grep -q password && { echo 'no secrets in prompts' >&2; exit 2; }; true"}
    s = Session(project, ["answered"], {"UserPromptSubmit": [_group(guard)]})
    blocked, fine = await s.run("my password is hunter2", "what is 2+2")
    assert blocked.is_error and "no secrets in prompts" in blocked.error
    assert fine.result == "answered" and len(s.requests) == 1


async def test_if_condition_uses_the_permission_rule_grammar(project: Path) -> None:
    seen: list[str] = []

    def guard(payload: dict[str, Any]) -> None:
        seen.append(payload["tool_input"]["command"])

    hooks = {"PreToolUse": [_group(guard, "Bash", **{"if": "Bash(rm *)"})]}
    s = Session(project, [bash("ls", "cd . && rm -f nothing", "rm -f other"), "done"], hooks)
    await s.run("go")
    assert seen == ["cd . && rm -f nothing", "rm -f other"]


async def test_post_tool_batch_sees_every_call_of_one_message(project: Path) -> None:
    (project / "a.txt").write_text("alpha\n")
    (project / "b.txt").write_text("beta\n")
    batches: list[dict[str, Any]] = []

    def batch(payload: dict[str, Any]) -> dict[str, Any]:
        batches.append(payload)
        return {"hookSpecificOutput": {"hookEventName": "PostToolBatch", "additionalContext": "BATCH-NOTE"}}

    reads = {"tool_calls": [{"name": "Read", "input": {"file_path": f}} for f in ("a.txt", "b.txt")]}
    s = Session(project, [reads, "done"], {"PostToolBatch": [_group(batch)]})
    await s.run("read both")
    assert len(batches) == 1
    calls = batches[0]["tool_calls"]
    # paths as Claude Code sends them: absolute, resolved against the session's working directory
    assert [c["tool_input"]["file_path"] for c in calls] == [str(project.resolve() / f) for f in ("a.txt", "b.txt")]
    assert "alpha" in calls[0]["tool_response"] and set(calls[0]) == {
        "tool_name",
        "tool_input",
        "tool_use_id",
        "tool_response",
    }
    assert "BATCH-NOTE" in s.tool_results(1)


async def test_permission_request_denied_and_stop_failure_events(project: Path) -> None:
    events: list[tuple[str, dict[str, Any]]] = []

    def record(name: str, answer: dict[str, Any] | None = None) -> Any:
        def handler(payload: dict[str, Any]) -> dict[str, Any] | None:
            events.append((name, payload))
            return answer

        return handler

    allow = {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}
    hooks = {
        "PermissionRequest": [_group(record("request", allow), "Bash")],
        "PermissionDenied": [_group(record("denied"))],
        "StopFailure": [_group(record("failure"), "invalid_request")],
    }
    steps = [bash("touch made-here"), bash("rm -rf nothing"), {"error": {"status": 400, "message": "bad on purpose"}}]
    s = Session(project, steps, hooks, disallowed_tools=["Bash(rm *)"])
    [result] = await s.run("go")
    assert result.is_error
    assert (project / "made-here").exists()  # the PermissionRequest hook answered the ask
    kinds = [k for k, _ in events]
    assert kinds == ["request", "denied", "failure"], kinds
    request, denied, failure = (p for _, p in events)
    assert request["tool_input"] == {"command": "touch made-here"} and request["permission_suggestions"]
    assert denied["tool_input"] == {"command": "rm -rf nothing"} and "Bash(rm *)" in denied["reason"]
    assert failure["error"] == "invalid_request" and "bad on purpose" in failure["error_details"]


async def test_once_async_and_session_start_on_resume(project: Path) -> None:
    seen: list[str] = []

    def once(payload: dict[str, Any]) -> None:
        seen.append("once:" + payload["prompt"])

    async def slow(payload: dict[str, Any]) -> None:
        await asyncio.sleep(0.2)
        seen.append("async:" + payload["prompt"])

    def start(payload: dict[str, Any]) -> str:
        seen.append("start:" + payload["source"])
        return "resumed context" if payload["source"] == "resume" else ""

    hooks = {
        "UserPromptSubmit": [_group(once, once=True), _group(slow, **{"async": True})],
        "SessionStart": [_group(start, "resume")],
    }
    s = Session(project, ["a", "b", "c"], hooks)
    await s.run("one", "two")
    assert [x for x in seen if x.startswith("once")] == ["once:one"]
    assert sorted(x for x in seen if x.startswith("async")) == ["async:one", "async:two"]  # waited for at the end
    assert not any(x.startswith("start") for x in seen)  # the matcher is for resume only
    s.opts["resume"] = s.session_path.stem
    await s.run("three")
    assert "start:resume" in seen
    assert "resumed context" in json.dumps([to_data(b) for b in s.requests[-1].messages[-1].content])


async def test_the_callers_permission_hooks_list_is_left_alone(project: Path) -> None:
    mine: list[Any] = []
    s = Session(project, ["done"], {"PermissionRequest": [_group(lambda p: None)]}, permission_hooks=mine)
    await s.run("go")
    await s.run("again")  # a second runtime from the same options
    assert mine == []
