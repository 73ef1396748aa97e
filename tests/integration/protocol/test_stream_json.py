"""``keel --input-format stream-json --output-format stream-json``: the wire, line by line.

Shapes are pinned against a capture of the real Claude Code (2.1.328) on the same script:
tests/data/claude_code_stream_json.jsonl.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.models.fake.server import FakeLLMServer
from kit import KEEL, KeelRun, wire_env

Start = Callable[[Any], FakeLLMServer]
Keel = Callable[..., KeelRun]
CAPTURE = Path(__file__).parents[2] / "data" / "claude_code_stream_json.jsonl"
STREAM = ["--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
# fields Claude Code prints that keel has no counterpart for (timing breakdowns, its own features)
CLAUDE_ONLY = {
    "init": {
        "analytics_disabled", "capabilities", "claude_code_version", "fast_mode_disabled_reason", "fast_mode_state",
        "memory_paths", "messaging_socket_path", "original_cwd", "per_turn_effort_active",
        "product_feedback_disabled", "terminal_slash_commands", "ultrathink_available", "ultrathink_typed_raises",
        "view_mode",
    },
    "user": {"tool_result_meta", "tool_use_result"},
    "result": {
        "fast_mode_disabled_reason", "fast_mode_state", "first_content_frame_ms", "modelUsage",
        "model_usage_since_last_result", "queued_turn_count", "result_index", "safety_stops", "subagent_stats",
        "terminal_reason", "time_to_request_ms", "ttft_ms", "ttft_stream_ms",
    },
}  # fmt: skip


def user(content: Any) -> str:
    return json.dumps({"type": "user", "session_id": "", "message": {"role": "user", "content": content}})


def control(rid: str, subtype: str, **body: Any) -> str:
    return json.dumps({"type": "control_request", "request_id": rid, "request": {"subtype": subtype, **body}})


def kind(line: dict[str, Any]) -> str:
    return "init" if line.get("subtype") == "init" else str(line["type"])


def test_lines_have_claude_codes_shape(fake_llm: Start, project: Path, keel: Keel) -> None:
    target = project / "a.txt"
    write = {"name": "Write", "input": {"file_path": str(target), "content": "hi\n"}}
    server = fake_llm({"steps": [{"text": "Writing.", "tool_calls": [write]}, "Done writing."]})
    stdin = "\n".join([control("req_1", "initialize", hooks=None), user("write a file")]) + "\n"
    run = keel(
        *STREAM, "--include-partial-messages", "--allowedTools", "Write", stdin=stdin, env=wire_env(server, "anthropic")
    )
    assert run.code == 0, run.stderr
    ours = run.lines()
    theirs = [json.loads(line) for line in CAPTURE.read_text().splitlines()]
    assert target.read_text() == "hi\n"
    for name in ("init", "assistant", "user", "result"):
        mine = next(line for line in ours if kind(line) == name)
        claude = next(line for line in theirs if kind(line) == name)
        missing = set(claude) - set(mine) - CLAUDE_ONLY.get(name, set())
        assert not missing, f"{name}: keel lacks {sorted(missing)}"
    response = ours[0]
    assert response["type"] == "control_response" and response["response"]["request_id"] == "req_1"
    assert response["response"]["subtype"] == "success"
    # the partial stream: the same event sequence per message (consecutive deltas collapsed)
    assert _events(ours) == _events(theirs)
    stream = [line for line in ours if line["type"] == "stream_event"]
    assert all({"uuid", "session_id", "parent_tool_use_id", "event"} <= set(line) for line in stream)
    text = "".join(e["event"]["delta"].get("text", "") for e in stream if e["event"]["type"] == "content_block_delta")
    assert text == "Writing.Done writing."


def _events(lines: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for line in lines:
        if line["type"] != "stream_event":
            continue
        event = line["event"]
        name = event["type"] + (":" + event["content_block"]["type"] if event["type"] == "content_block_start" else "")
        if not out or out[-1] != name:
            out.append(name)
    return out


def test_control_requests_are_answered_and_unsupported_ones_say_so(fake_llm: Start, project: Path, keel: Keel) -> None:
    server = fake_llm({"steps": ["Seen."]})
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    lines = [
        control("r1", "initialize", hooks=None),
        control("r2", "mcp_status"),
        control("r3", "get_context_usage"),
        control("r4", "rewind_files", user_message_id="x"),
        control("r5", "set_model", model="nonesuch:model-x"),
        control("r6", "stop_task", task_id="bash_9"),
        control("r7", "frobnicate"),
        control("r8", "set_permission_mode", mode="yolo"),
        "this is not json",
        user([{"type": "text", "text": "what is in the picture?"}, image]),
    ]
    run = keel(*STREAM, stdin="\n".join(lines) + "\n", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    answers = {
        line["response"]["request_id"]: line["response"] for line in run.lines() if line["type"] == "control_response"
    }
    assert set(answers) == {f"r{i}" for i in range(1, 9)}
    assert answers["r2"]["subtype"] == "success" and answers["r2"]["response"] == {"mcpServers": []}
    usage = answers["r3"]["response"]
    assert usage["totalTokens"] > 0 and usage["maxTokens"] >= usage["totalTokens"] and usage["categories"]
    # rewind_files (session/history.py) answers in Claude Code's shape: an unknown message cannot be rewound to
    assert answers["r4"]["subtype"] == "success" and answers["r4"]["response"]["canRewind"] is False
    for rid, words in {
        "r5": "set_model",
        "r6": "no task 'bash_9'",
        "r7": "unsupported control request 'frobnicate'",
        "r8": "unknown mode 'yolo'",
    }.items():
        assert answers[rid]["subtype"] == "error" and words in answers[rid]["error"], answers[rid]
    assert "line 9: not JSON" in run.stderr and run.stderr.count("\n") == 1
    (request,) = server.cursor.requests
    content = request["body"]["messages"][0]["content"]
    (sent,) = [{k: v for k, v in b.items() if k != "cache_control"} for b in content if b["type"] == "image"]
    assert sent == image
    assert run.lines()[-1]["result"] == "Seen."


def test_sdk_flags_map_onto_the_session(fake_llm: Start, project: Path, tmp_path: Path, keel: Keel) -> None:
    server = fake_llm({"steps": ["One."]})
    extra = [tmp_path / "x", tmp_path / "y"]
    for d in extra:
        d.mkdir()
    sid = "0f5e5c1c-1d2e-4c1b-9a57-3a0b1f7e2d11"
    args = [*STREAM, "--system-prompt", "You are terse.", "--append-system-prompt", "Be kind.", "--tools", "Read,Glob"]
    args += ["--add-dir", str(extra[0]), "--add-dir", str(extra[1]), f"--session-id={sid}"]
    args += ["--settings", json.dumps({"env": {"KEEL_TEST_MARK": "1"}}), "--max-thinking-tokens", "2048"]
    run = keel(*args, stdin=user("hi") + "\n", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    init = run.lines()[0]
    assert init["subtype"] == "init" and init["session_id"] == sid and init["tools"] == ["Read", "Glob"]
    assert init["additional_directories"] == [str(d) for d in extra]
    body = server.cursor.requests[0]["body"]
    system = "".join(b["text"] for b in body["system"]) if isinstance(body["system"], list) else body["system"]
    assert system == "You are terse.\n\nBe kind."
    assert [t["name"] for t in body["tools"]] == ["Read", "Glob"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}


def test_flags_keel_cannot_honour_fail_in_one_line(fake_llm: Start, keel: Keel) -> None:
    env = wire_env(fake_llm({"steps": []}), "anthropic")
    cases = {
        ("--fork-session",): "--fork-session needs -r SESSION_ID or -c",
        ("--setting-sources=user,policy",): "--setting-sources: unknown source policy",
        ("--permission-prompt-tool", "mcp__x__ask"): "supports only 'stdio'",
        ("--betas", "x"): "--betas is not supported",
        ("--tools", "Nope"): "--tools: no tool named Nope",
    }
    for flags, words in cases.items():
        run = keel(*STREAM, *flags, stdin=user("hi") + "\n", env=env)
        assert run.code == 2 and words in run.stderr and run.stderr.count("\n") == 1, (flags, run.stderr)
    run = keel("-p", "hi", "--input-format", "stream-json")
    assert run.code == 2 and "needs --output-format stream-json" in run.stderr


def test_setting_sources_chooses_the_settings_files(fake_llm: Start, project: Path, keel: Keel) -> None:
    """As Claude Code: ``--setting-sources user`` leaves the project's settings files unread."""
    (project / ".keel").mkdir()
    (project / ".keel" / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Write"]}}))
    target = project / "out.txt"
    write = {"name": "Write", "input": {"file_path": str(target), "content": "x\n"}}
    for sources, written in (("user,project,local", False), ("user", True), ("", True)):
        target.unlink(missing_ok=True)
        server = fake_llm({"steps": [{"tool_calls": [write]}, "ok"]})
        run = keel(
            "-p", "w", "--allowedTools", "Write", f"--setting-sources={sources}", env=wire_env(server, "anthropic")
        )
        assert run.code == 0, run.stderr
        assert target.exists() is written, sources


def test_json_schema_structured_output(fake_llm: Start, project: Path, keel: Keel) -> None:
    schema = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    server = fake_llm({"steps": ['{"city": "Oslo"}']})
    run = keel(
        "-p",
        "capital of Norway?",
        "--output-format",
        "json",
        "--json-schema",
        schema,
        env=wire_env(server, "anthropic"),
    )
    assert run.code == 0, run.stderr
    assert run.json()["structured_output"] == {"city": "Oslo"} and run.json()["subtype"] == "success"

    server = fake_llm({"steps": ["Oslo, I think.", '{"town": "Oslo"}']})
    run = keel("-p", "capital?", "--output-format", "json", "--json-schema", schema, env=wire_env(server, "anthropic"))
    result = run.json()
    assert run.code == 1 and result["subtype"] == "error_max_structured_output_retries" and result["is_error"]
    assert "'city' is a required property" in result["result"] and "structured_output" not in result
    assert len(server.cursor.requests) == 2  # retried exactly once
    assert "not JSON" in json.dumps(server.cursor.requests[1]["body"]["messages"][-1])

    run = keel("-p", "x", "--json-schema", '{"type": "nonsense"}')
    assert run.code == 2 and "not a valid JSON Schema" in run.stderr and run.stderr.count("\n") == 1


def test_hook_events_are_streamed_on_request(fake_llm: Start, project: Path, keel: Keel) -> None:
    server = fake_llm({"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]}, "Ok."]})
    hooks = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}]}}
    args = [*STREAM, "--allowedTools", "Bash", "--settings", json.dumps(hooks)]
    quiet = keel(*args, stdin=user("go") + "\n", env=wire_env(server, "anthropic"))
    server = fake_llm({"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]}, "Ok."]})
    loud = keel(*args, "--include-hook-events", stdin=user("go") + "\n", env=wire_env(server, "anthropic"))
    assert quiet.code == loud.code == 0, loud.stderr
    assert not [line for line in quiet.lines() if line.get("subtype") == "hook_response"]
    (hook,) = [line for line in loud.lines() if line.get("subtype") == "hook_response"]
    assert hook["hook_event"] == "PreToolUse" and hook["exit_code"] == 0


def test_print_mode_streams_partial_messages_and_hook_events(fake_llm: Start, project: Path, keel: Keel) -> None:
    server = fake_llm({"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]}, "Ok."]})
    hooks = {"hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}]}}
    args = ["-p", "go", "--output-format", "stream-json", "--allowedTools", "Bash", "--settings", json.dumps(hooks)]
    run = keel(*args, "--include-partial-messages", "--include-hook-events", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    lines = run.lines()
    assert [h["hook_event"] for h in lines if h.get("subtype") == "hook_response"] == ["PostToolUse"]
    events = [line["event"]["type"] for line in lines if line["type"] == "stream_event"]
    assert events.count("message_start") == 2 and events.count("message_stop") == 2


def test_a_question_nobody_can_answer_stops_the_run(fake_llm: Start, project: Path, keel: Keel) -> None:
    """--permission-prompt-tool stdio, and stdin ends before the client answers can_use_tool:
    keel must neither hang nor run the tool."""
    target = project / "never.txt"
    write = {"name": "Write", "input": {"file_path": str(target), "content": "x\n"}}
    server = fake_llm({"steps": [{"tool_calls": [write]}, "Should not get here."]})
    stdin = user("write it") + "\n"
    run = keel(*STREAM, "--permission-prompt-tool", "stdio", stdin=stdin, env=wire_env(server, "anthropic"), timeout=60)
    assert not target.exists()
    assert "Traceback" not in run.stderr
    result = run.lines()[-1]
    assert result["type"] == "result" and result["is_error"] and run.code == 1
    assert len(server.cursor.requests) == 1


def test_stdin_closing_while_keel_waits_for_an_answer_denies_and_stops(fake_llm: Start, project: Path) -> None:
    target = project / "never.txt"
    write = {"name": "Write", "input": {"file_path": str(target), "content": "x\n"}}
    server = fake_llm({"steps": [{"tool_calls": [write]}, "Should not get here."]})
    proc = subprocess.Popen(
        [KEEL, *STREAM, "--permission-prompt-tool", "stdio"],
        cwd=project,
        env={**os.environ, **wire_env(server, "anthropic")},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(user("write it") + "\n")
    proc.stdin.flush()
    for raw in proc.stdout:
        line = json.loads(raw)
        if line["type"] == "control_request":
            assert line["request"]["subtype"] == "can_use_tool"
            break
    proc.stdin.close()  # the client goes away without answering
    rest = [json.loads(raw) for raw in proc.stdout]
    assert proc.wait(timeout=60) == 1
    assert not target.exists() and rest[-1]["type"] == "result" and rest[-1]["is_error"]
    assert len(server.cursor.requests) == 1
