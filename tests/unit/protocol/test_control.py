"""The control protocol's sans-IO pieces: reading what a client sends, failing closed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentkeel.core.events import AssistantMessage, RequestStarted, TextDelta
from agentkeel.core.types import Message, TextBlock, ToolUseBlock, Usage
from agentkeel.protocol import control, stream_json
from agentkeel.protocol.partial import PartialMessages


@pytest.mark.parametrize(
    "body",
    [{}, {"behavior": "Allow"}, {"behavior": "maybe"}, {"behavior": None}, {"behavior": "deny", "message": 3}],
)
def test_anything_but_a_clear_allow_denies(body: dict[str, object]) -> None:
    assert control.permission_answer(body).allow is False


def test_an_allow_may_change_the_input_and_a_deny_may_interrupt() -> None:
    allowed = control.permission_answer({"behavior": "allow", "updatedInput": {"command": "ls"}})
    assert allowed.allow and allowed.updated_input == {"command": "ls"}
    denied = control.permission_answer({"behavior": "deny", "message": "no", "interrupt": True})
    assert not denied.allow and denied.message == "no" and denied.interrupt


def test_hook_registrations_are_read_and_bad_ones_named() -> None:
    init = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hookCallbackIds": ["hook_0", "hook_1"], "timeout": 5}]}}
    (reg,) = control.hook_registrations(init)
    assert (reg.event, reg.matcher, reg.callback_ids, reg.timeout) == ("PreToolUse", "Bash", ("hook_0", "hook_1"), 5.0)
    assert control.hook_registrations({"hooks": None}) == []
    with pytest.raises(control.ControlError, match="hookCallbackIds"):
        control.hook_registrations({"hooks": {"Stop": [{"hookCallbackIds": [1]}]}})
    with pytest.raises(control.ControlError, match=r"hooks\.Stop must be a list"):
        control.hook_registrations({"hooks": {"Stop": {}}})


def test_sdk_servers_are_split_from_the_rest() -> None:
    sdk, rest = control.sdk_servers({"mcpServers": {"calc": {"type": "sdk", "name": "calc"}, "gh": {"command": "x"}}})
    assert sdk == ["calc"] and rest == {"gh": {"command": "x"}}


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("[1]", "must be a JSON object"),
        ('{"type": "user"}', "needs a 'message' object"),
        ('{"type": "user", "message": {"content": 5}}', "string or a list"),
        ('{"type": "control_request", "request": {}}', "'subtype'"),
        ('{"type": "telepathy"}', "unknown line type 'telepathy'"),
        (json.dumps({"type": "user", "message": {"content": [{"type": "image", "source": {}}]}}), "base64"),
    ],
)
def test_bad_input_lines_say_what_is_wrong(line: str, words: str) -> None:
    with pytest.raises(stream_json.ProtocolError, match=words):
        stream_json.decode(line)


def test_control_responses_and_keep_alives_decode() -> None:
    ok = stream_json.decode(json.dumps(control.success("r1", {"behavior": "allow"})))
    assert ok == stream_json.ControlResponse("r1", True, {"behavior": "allow"})
    bad = stream_json.decode(json.dumps(control.error("r2", "nope")))
    assert bad == stream_json.ControlResponse("r2", False, {}, "nope")
    assert stream_json.decode('{"type": "keep_alive"}') is None


def test_partial_messages_rebuild_the_anthropic_event_sequence() -> None:
    enc = PartialMessages("s1")
    lines = enc.encode(RequestStarted(turn=1, model="m", message_count=1))
    lines += enc.encode(TextDelta(text="Hel")) + enc.encode(TextDelta(text="lo"))
    message = Message(role="assistant", content=[TextBlock(text="Hello"), ToolUseBlock(id="t1", name="LS", input={})])
    lines += enc.encode(AssistantMessage(message=message, model="m", stop_reason="tool_use", usage=Usage()))
    kinds = [line["event"]["type"] for line in lines]
    assert kinds == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert [line["event"].get("index") for line in lines][1:8] == [0, 0, 0, 0, 1, 1, 1]
    assert lines[-2]["event"]["delta"]["stop_reason"] == "tool_use"


def test_flags_for_other_subsystems_are_left_on_runtime_options(tmp_path: Path) -> None:
    """--mcp-config (minus SDK servers), --strict-mcp-config and --plugin-dir are carried on
    RuntimeOptions for keel's MCP client and plugin loader."""
    from agentkeel.ui.cli.headless import options_from_args
    from agentkeel.ui.cli.main import build_parser

    config = {"mcpServers": {"calc": {"type": "sdk", "name": "calc"}, "gh": {"command": "gh-mcp"}}}
    argv = ["-p", "x", "--mcp-config", json.dumps(config), "--strict-mcp-config", "--plugin-dir", str(tmp_path)]
    args = build_parser().parse_args(argv)
    opts = options_from_args(args)
    assert args.sdk_mcp_servers == ["calc"]
    assert [json.loads(c) for c in opts.mcp_config] == [{"mcpServers": {"gh": {"command": "gh-mcp"}}}]
    assert opts.strict_mcp_config and opts.plugin_dirs == (tmp_path.resolve(),)
    with pytest.raises(Exception, match="not a directory"):
        options_from_args(build_parser().parse_args(["-p", "x", "--plugin-dir", str(tmp_path / "nope")]))
