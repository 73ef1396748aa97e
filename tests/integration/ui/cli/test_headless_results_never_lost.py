"""Issue 31 (items 4, 7, 8, 10) and issue 30 item 15: a headless run never loses a result silently,
always ends, and its output says what happened (denied calls, closed output, limits, API status).

The end-to-end tests run the real ``keel -p`` against keel's scripted model server (``fake_llm``);
two check the view's id repair and the loop detector in process."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.core.events import AssistantMessage, ToolResults, UserMessage
from agentkeel.core.extensions import PromptInfo, ToolCall
from agentkeel.core.provider import ModelRequest
from agentkeel.core.run import RunStopped
from agentkeel.core.types import Message, TextBlock, ToolResultBlock, ToolUseBlock
from agentkeel.core.view import Compaction, messages_from_events
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.policy.safety import LoopDetector
from kit import KEEL, KeelRun, session_files, wait_until


def _env(server: FakeLLMServer) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key", "ANTHROPIC_BASE_URL": server.url}


def _requests(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r for r in server.cursor.requests if "body" in r]


def _tool_use_ids(body: dict[str, Any]) -> list[str]:
    return [
        block["id"]
        for message in body.get("messages", [])
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]


# --- item 4: a deleted KEEL_HOME -------------------------------------------------------------------


def test_keel_home_deleted_mid_session_stops_the_run_with_one_line(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    """KEEL_HOME is removed while a slow Bash call runs. The transcript is gone with it, so the run
    must not go on and exit 0 as if it had been recorded: it stops with one line naming the lost
    session file and exit 1, and no traceback."""
    marker = project / "started"
    server = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "Bash", "input": {"command": f"touch {marker}; sleep 3; echo slow-done"}}]},
                {"tool_calls": [{"name": "Bash", "input": {"command": "echo second"}}]},
                "all done",
            ]
        }
    )
    home = Path(os.environ["KEEL_HOME"])
    proc = subprocess.Popen(
        [KEEL, "-p", "go", "--allowedTools", "Bash"],
        cwd=project,
        env={**os.environ, **_env(server)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(marker.exists, what="the slow Bash call to start")
        assert session_files(home), "the session file exists while the run is going"
        shutil.rmtree(home)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, (proc.returncode, out, err)
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "session file" in lines[0] and "deleted" in lines[0], lines[0]
    assert "all done" not in out  # the run did not go on to its answer
    assert len(_requests(server)) == 1  # nor ask the model again with nothing recorded


# --- item 7: a runaway model ends --------------------------------------------------------------------


def _log_size(home: Path) -> int:
    return sum(p.stat().st_size for p in session_files(home))


def test_a_model_repeating_one_call_ends_the_headless_run(
    fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """A model that calls the same tool with the same input forever (843 requests a minute before,
    never ending): the loop detector refuses the repeat, and when the model ignores three refusals
    the run ends before its next request, with an error that says so."""
    server = fake_llm(
        {
            "steps": [{"text": "Checking.", "tool_calls": [{"name": "Bash", "input": {"command": "echo same"}}]}],
            "loop": True,
        }
    )
    run = keel("-p", "go", "--allowedTools", "Bash", "--output-format", "json", env=_env(server), timeout=120)
    assert run.code == 1, run.stderr
    result = run.json()
    assert result["subtype"] == "error_during_execution" and result["is_error"]
    assert "loop detected" in result["result"] and "Bash" in result["result"]
    assert len(_requests(server)) == 5  # two runs of the call, three refusals, then the end
    assert _log_size(Path(os.environ["KEEL_HOME"])) < 100_000
    # the refusals are not permission denials
    assert result["permission_denials"] == []


def test_a_model_varying_its_calls_forever_ends_at_the_default_max_turns(
    fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """A model that never repeats itself escapes the loop detector: -p without --max-turns still
    ends, at the headless default (200 requests), as error_max_turns."""
    steps = [{"tool_calls": [{"name": "Read", "input": {"file_path": f"missing-{n}.txt"}}]} for n in range(260)]
    server = fake_llm({"steps": steps})
    run = keel("-p", "go", "--output-format", "json", env=_env(server), timeout=300)
    assert run.code == 1, run.stderr
    result = run.json()
    assert result["subtype"] == "error_max_turns" and result["num_turns"] == 200
    assert len(_requests(server)) == 200
    assert result["errors"] == ["reached the maximum number of turns (200)"]
    assert _log_size(Path(os.environ["KEEL_HOME"])) < 2_000_000


# --- item 8: a tool_use id used again by a later turn ----------------------------------------------


def _dup_script() -> dict[str, Any]:
    return {
        "steps": [
            {"tool_calls": [{"id": "toolu_dup", "name": "Bash", "input": {"command": "echo first-call"}}]},
            {"tool_calls": [{"id": "toolu_dup", "name": "Bash", "input": {"command": "echo second-call"}}]},
            "done",
        ]
    }


def _pairs(body: dict[str, Any]) -> dict[str, str]:
    """tool_use id -> the text of its tool_result, over the whole request."""
    out: dict[str, str] = {}
    for message in body["messages"]:
        if not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if block.get("type") == "tool_result":
                content = block["content"]
                text = content if isinstance(content, str) else " ".join(c.get("text", "") for c in content)
                out[block["tool_use_id"]] = text
    return out


def test_a_tool_use_id_repeated_across_turns_is_made_unique(
    fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """A model (or proxy) that numbers its calls per response reuses an id in a later turn. The API
    rejects a conversation with a repeated id, so every later request would fail: the next request
    keel sends carries unique ids, each answered by its own call's result."""
    server = fake_llm(_dup_script())
    run = keel("-p", "go", "--allowedTools", "Bash", "--output-format", "json", env=_env(server))
    assert run.code == 0, run.stderr
    body = _requests(server)[-1]["body"]
    ids = _tool_use_ids(body)
    assert len(ids) == 2 and len(set(ids)) == 2, ids
    pairs = _pairs(body)
    assert "first-call" in pairs[ids[0]] and "second-call" in pairs[ids[1]]


def test_resume_of_a_log_with_a_repeated_tool_use_id_works(
    fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """A log written before ids were made unique (the later turn's id equal to the earlier one's):
    resuming it sends a conversation with unique ids, each result with its own call."""
    server = fake_llm(_dup_script())
    first = keel("-p", "go", "--allowedTools", "Bash", "--output-format", "json", env=_env(server))
    assert first.code == 0, first.stderr
    (path,) = session_files(Path(os.environ["KEEL_HOME"]))
    text = path.read_text()
    renamed = set(_tool_use_ids(_requests(server)[-1]["body"])) - {"toolu_dup"}
    assert len(renamed) == 1
    path.write_text(text.replace(f'"{renamed.pop()}"', '"toolu_dup"'))  # the damaged log an older keel wrote
    assert path.read_text().count('"id":"toolu_dup"') == 2

    again = fake_llm({"steps": ["resumed fine"]})
    run = keel("-p", "-r", first.json()["session_id"], "and now?", "--output-format", "json", env=_env(again))
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "resumed fine"
    body = _requests(again)[-1]["body"]
    ids = _tool_use_ids(body)
    assert len(ids) == 2 and len(set(ids)) == 2, ids
    pairs = _pairs(body)
    assert set(pairs) == set(ids)
    assert "first-call" in pairs[ids[0]] and "second-call" in pairs[ids[1]]


# --- item 10 and issue 30 item 15: what the output says --------------------------------------------


def _denied_script(project: Path) -> dict[str, Any]:
    calls = [
        {"id": "toolu_w1", "name": "Write", "input": {"file_path": str(project / "x.txt"), "content": "hi"}},
        {"id": "toolu_b1", "name": "Bash", "input": {"command": "touch y.txt"}},
    ]
    return {"steps": [{"text": "writing", "tool_calls": calls}, "Done."]}


def test_permission_denials_list_the_calls_nobody_approved_in_json_and_stream_json(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """-p with no approver: the Write and the Bash call are denied. Claude Code 2.1.328 lists both in
    ``permission_denials`` and exits 0; keel does the same (it listed none). Measured with
    tests' fake model server and Claude Code's binary from ``npm install @anthropic-ai/claude-code@2.1.328``:
    ``HOME=$tmp/home ANTHROPIC_BASE_URL=$fake ANTHROPIC_API_KEY=sk-ant-test-not-a-real-key
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p 'do it' --output-format json --allowedTools Read``
    -> exit 0, ``"permission_denials": [{"tool_name": "Write", "tool_use_id": "toolu_w1", "tool_input":
    {...}}, {"tool_name": "Bash", ...}]``, nothing on stderr (the same with a deny rule, and with a
    PreToolUse hook that denies)."""
    expected = [
        {
            "tool_name": "Write",
            "tool_use_id": "toolu_w1",
            "tool_input": {"file_path": str(project / "x.txt"), "content": "hi"},
        },
        {"tool_name": "Bash", "tool_use_id": "toolu_b1", "tool_input": {"command": "touch y.txt"}},
    ]
    server = fake_llm(_denied_script(project))
    run = keel("-p", "do it", "--output-format", "json", env=_env(server))
    assert run.code == 0, run.stderr
    assert run.json()["permission_denials"] == expected
    assert not (project / "x.txt").exists() and not (project / "y.txt").exists()

    server = fake_llm(_denied_script(project))
    run = keel("-p", "do it", "--output-format", "stream-json", "--verbose", env=_env(server))
    assert run.code == 0, run.stderr
    assert run.lines()[-1]["type"] == "result" and run.lines()[-1]["permission_denials"] == expected


def test_a_deny_rule_denial_is_listed_and_text_mode_says_so_on_stderr(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """A settings deny rule refuses the Bash call while Write is allowed: only Bash is listed (as
    Claude Code does). In text mode the answer goes to stdout as before and one stderr line names
    what was denied; the exit code stays 0, as Claude Code's."""
    settings = project / "deny.json"
    settings.write_text(json.dumps({"permissions": {"deny": ["Bash(touch *)"]}}))
    server = fake_llm(_denied_script(project))
    run = keel(
        "-p",
        "do it",
        "--settings",
        str(settings),
        "--allowedTools",
        "Write",
        "--output-format",
        "json",
        env=_env(server),
    )
    assert run.code == 0, run.stderr
    assert [d["tool_name"] for d in run.json()["permission_denials"]] == ["Bash"]
    assert (project / "x.txt").read_text() == "hi"

    (project / "x.txt").unlink()
    server = fake_llm(_denied_script(project))
    run = keel("-p", "do it", env=_env(server))
    assert run.code == 0, run.stderr
    assert run.stdout == "Done.\n"
    assert "keel: 2 tool calls were denied (Write, Bash): see --allowedTools" in run.stderr, run.stderr


def test_closing_the_stream_json_reader_ends_the_run_quietly_as_output_closed(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    """``keel -p ... --output-format stream-json | head -1``: the reader goes away after one line. The
    run stops with nothing on stderr (it printed a RuntimeWarning: a coroutine never awaited), exit
    0, and the session log records the end as "output closed" (it said "interrupted by user")."""
    steps = [{"tool_calls": [{"name": "Bash", "input": {"command": f"echo {n}; sleep 0.3"}}]} for n in range(8)]
    server = fake_llm({"steps": [*steps, "done"]})
    proc = subprocess.Popen(
        [KEEL, "-p", "go", "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash"],
        cwd=project,
        env={**os.environ, **_env(server)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    assert json.loads(first)["subtype"] == "init"
    proc.stdout.close()  # what `| head -1` does after its line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert err == "", err
    assert len(_requests(server)) < 9  # the run stopped; it did not go on to the end
    (path,) = session_files(Path(os.environ["KEEL_HOME"]))
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    (result,) = [e for e in entries if e["type"] == "result"]
    assert result["result"] == "output closed", result
    assert [e["reason"] for e in entries if e["type"] == "session_end"] == ["output closed"]


def test_a_401_reports_its_api_error_status(
    fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """Claude Code 2.1.328 on a 401: ``"is_error": true, "api_error_status": 401``, exit 1."""
    server = fake_llm({"steps": [{"error": {"status": 401, "message": "invalid x-api-key"}}], "loop": True})
    run = keel("-p", "hi", "--output-format", "json", env=_env(server))
    assert run.code == 1, run.stderr
    result = run.json()
    assert result["is_error"] and result["api_error_status"] == 401


def test_limits_in_text_mode_say_the_limit_not_the_last_answer(
    fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    """--max-turns (and --max-budget-usd) reached in text mode: the stderr line names the limit;
    the model's last words ("Let me look.") are not presented as the reason."""
    step = {"text": "Let me look.", "tool_calls": [{"name": "Read", "input": {"file_path": "a.txt"}}]}
    server = fake_llm({"steps": [step, {**step, "tool_calls": [{"name": "Read", "input": {"file_path": "b.txt"}}]}]})
    run = keel("-p", "go", "--max-turns", "1", env=_env(server))
    assert run.code == 1
    assert run.stdout == ""
    assert "keel: error_max_turns: reached the maximum number of turns (1)" in run.stderr, run.stderr
    assert "Let me look." not in run.stderr

    usage = {"input_tokens": 100_000, "output_tokens": 1000}
    server = fake_llm({"steps": [{**step, "usage": usage}, "never reached"]})
    run = keel("-p", "go", "--max-budget-usd", "0.0001", "--model", "claude-sonnet-4-5", env=_env(server))
    assert run.code == 1
    assert "keel: error_max_budget_usd: reached the maximum budget" in run.stderr, run.stderr
    assert "Let me look." not in run.stderr


# --- the pieces, in process ------------------------------------------------------------------------


def test_the_view_renames_an_id_an_earlier_turn_used_and_keeps_compacted_ids() -> None:
    """The view of a damaged log: the later use of an id and its result get ``<id>_2`` (the same on
    every replay); a compaction's kept messages are not renamed against the ids it replaced."""

    def use(n: int) -> AssistantMessage:
        return AssistantMessage(
            message=Message(role="assistant", content=[ToolUseBlock(id="t1", name="Bash", input={"n": n})])
        )

    def result(n: int) -> ToolResults:
        return ToolResults(
            message=Message(role="user", content=[ToolResultBlock(tool_use_id="t1", content=f"out {n}")])
        )

    events = [UserMessage(message=Message.user("go")), use(1), result(1), use(2), result(2)]
    view = messages_from_events(events)
    pairs = [(b.id, b.input["n"]) for m in view.messages for b in m.content if isinstance(b, ToolUseBlock)]
    answers = [(b.tool_use_id, b.content) for m in view.messages for b in m.content if isinstance(b, ToolResultBlock)]
    assert pairs == [("t1", 1), ("t1_2", 2)]
    assert answers == [("t1", "out 1"), ("t1_2", "out 2")]
    assert any("renamed t1_2" in r for r in view.repairs)

    kept = [Message.user("summary"), use(1).message, result(1).message]
    compacted = messages_from_events(
        [
            *events,
            Compaction(messages=kept),
            AssistantMessage(message=Message(role="assistant", content=[TextBlock(text="ok")])),
        ]
    )
    ids = [b.id for m in compacted.messages for b in m.content if isinstance(b, ToolUseBlock)]
    assert ids == ["t1"]


def test_the_loop_detector_stops_the_run_after_three_refusals_and_starts_over_with_a_prompt() -> None:

    detector = LoopDetector(None)
    call = ToolCall(id="t", name="Bash", input={"command": "echo same"}, tool=None)
    request = ModelRequest(model="m", system="", messages=[], tools=[], max_tokens=100)

    async def play() -> list[str]:
        seen: list[str] = []
        for _ in range(5):
            verdict = await detector(call)
            seen.append("run" if verdict is None else verdict.decision)
            try:
                await detector.before_request(request)
            except RunStopped as stop:
                seen.append(f"stopped: {stop}")
        return seen

    seen = asyncio.run(play())
    assert seen[:5] == ["run", "run", "deny", "deny", "deny"]
    assert seen[5].startswith("stopped: loop detected") and len(seen) == 6
    asyncio.run(detector.on_prompt(PromptInfo("next", first=False)))
    assert asyncio.run(detector(call)) is None  # a new prompt: the repeat counts start over


def test_closing_stdout_of_a_stream_json_input_session_is_logged_as_output_closed(
    project: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    """The same for ``--input-format stream-json`` (an SDK host that went away): the run stops and
    its log says "output closed", not "interrupted by user"."""
    steps = [{"tool_calls": [{"name": "Bash", "input": {"command": f"echo {n}; sleep 0.3"}}]} for n in range(8)]
    server = fake_llm({"steps": [*steps, "done"]})
    stream = ["--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
    proc = subprocess.Popen(
        [KEEL, "-p", *stream, "--allowedTools", "Bash"],
        cwd=project,
        env={**os.environ, **_env(server)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    message = {"type": "user", "session_id": "", "message": {"role": "user", "content": "go"}}
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["type"] in ("system", "assistant")
    proc.stdout.close()
    home = Path(os.environ["KEEL_HOME"])
    wait_until(
        lambda: session_files(home) and '"type":"result"' in session_files(home)[0].read_text(), what="the run to end"
    )
    proc.stdin.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "RuntimeWarning" not in err, err
    (path,) = session_files(home)
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    results = [e["result"] for e in entries if e["type"] == "result"]
    assert results == ["output closed"], results
    assert len(_requests(server)) < 9
