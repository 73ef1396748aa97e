"""Companion checks: the vendored tests whose own assertions could pass with keel producing nothing.

Each runs one vendored test unchanged (same harness, same script: the responder is picked by the
name after ``__``) and then asserts on what keel actually did: the stream-json lines the SDK read
(``sdk_lines``) and the requests the scripted model received (``sdk_model``). An assertion that
sits inside ``async for ... if init: ... break`` passes when no init arrives; a test that asserts
nothing passes whatever happens; "the denied tool did not run" passes when it was never offered.

They hold on Claude Code 2.1.328 too (``SDK_E2E_CLI=<claude> pytest tests/integration/sdk_e2e``),
except where a docstring says what keel adds.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agentkeel.models.fake.server import FakeLLMServer

from .vendored import (
    test_agents_and_settings,
    test_dynamic_control,
    test_hook_events,
    test_hooks,
    test_sdk_mcp_tools,
    test_stderr_callback,
)

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def sdk_lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """Every line the SDK read from the CLI's stdout, in order (observed, not changed)."""
    from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

    seen: list[dict[str, Any]] = []
    read = SubprocessCLITransport.read_messages

    async def tee(self: Any) -> AsyncIterator[dict[str, Any]]:
        async for line in read(self):
            seen.append(line)
            yield line

    monkeypatch.setattr(SubprocessCLITransport, "read_messages", tee)
    yield seen


def kind(lines: list[dict[str, Any]], type_: str, subtype: str | None = None) -> list[dict[str, Any]]:
    return [x for x in lines if x.get("type") == type_ and (subtype is None or x.get("subtype") == subtype)]


def tool_results(server: FakeLLMServer) -> list[dict[str, Any]]:
    out = []
    for request in server.cursor.requests:
        for message in request["body"].get("messages", []):
            content = message.get("content")
            if message.get("role") == "user" and isinstance(content, list):
                out += [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    return out


def text_of(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content)


# -- assertions inside "if init: ... break": they hold only if an init arrived ----------------------


async def test_companion__test_agent_definition(sdk_lines: list[dict[str, Any]]) -> None:
    await test_agents_and_settings.test_agent_definition()
    (init,) = kind(sdk_lines, "system", "init")
    assert "test-agent" in init["agents"]


async def test_companion__test_large_agent_definitions_via_initialize(sdk_lines: list[dict[str, Any]]) -> None:
    await test_agents_and_settings.test_large_agent_definitions_via_initialize()
    (init,) = kind(sdk_lines, "system", "init")
    assert {f"large-agent-{i}" for i in range(20)} <= set(init["agents"])


async def test_companion__test_setting_sources_default(sdk_lines: list[dict[str, Any]]) -> None:
    await test_agents_and_settings.test_setting_sources_default()
    (init,) = kind(sdk_lines, "system", "init")
    assert init["output_style"] == "local-test-style"


async def test_companion__test_setting_sources_project_included(sdk_lines: list[dict[str, Any]]) -> None:
    await test_agents_and_settings.test_setting_sources_project_included()
    (init,) = kind(sdk_lines, "system", "init")
    assert init["output_style"] == "local-test-style"


async def test_companion__test_setting_sources_user_only(sdk_lines: list[dict[str, Any]]) -> None:
    """ "testcmd not in slash_commands" also holds when there is no list: the list is there (the
    built-in commands), only without the project's command."""
    await test_agents_and_settings.test_setting_sources_user_only()
    (init,) = kind(sdk_lines, "system", "init")
    assert "clear" in init["slash_commands"] and "testcmd" not in init["slash_commands"]


# -- tests that assert nothing -----------------------------------------------------------------------


async def test_companion__test_set_permission_mode(sdk_lines: list[dict[str, Any]], sdk_model: FakeLLMServer) -> None:
    await test_dynamic_control.test_set_permission_mode()
    results = kind(sdk_lines, "result")
    assert [r["result"] for r in results] == ["4", "6"] and not any(r["is_error"] for r in results)
    answers = [x for x in sdk_lines if x.get("type") == "control_response"]
    assert all(a["response"]["subtype"] == "success" for a in answers), answers


async def test_companion__test_set_model(sdk_lines: list[dict[str, Any]], sdk_model: FakeLLMServer) -> None:
    """The second query goes to the model set_model named; the third to the default again."""
    await test_dynamic_control.test_set_model()
    results = kind(sdk_lines, "result")
    assert [r["result"] for r in results] == ["2", "4", "6"] and not any(r["is_error"] for r in results)
    models = [r["body"]["model"] for r in sdk_model.cursor.requests if r["body"].get("messages")]
    first, switched, back = models[0], models[1], models[-1]
    assert switched == "claude-3-5-haiku-20241022" and back == first != switched


async def test_companion__test_interrupt(sdk_lines: list[dict[str, Any]]) -> None:
    """The interrupt ends the turn: one result, an error result with ``errors`` (the TypeScript SDK
    throws without it), not a success."""
    await test_dynamic_control.test_interrupt()
    (result,) = kind(sdk_lines, "result")
    assert result["is_error"] is True and result["subtype"] == "error_during_execution", result
    assert isinstance(result.get("errors"), list) and result["errors"], result


async def test_companion__test_stderr_callback_without_debug(sdk_lines: list[dict[str, Any]], tmp_path: Any) -> None:
    """No stderr, and not because keel said nothing: the run answered."""
    await test_stderr_callback.test_stderr_callback_without_debug(tmp_path)
    (result,) = kind(sdk_lines, "result")
    assert result["result"] == "2" and result["is_error"] is False


async def test_companion__test_notification_hook(sdk_lines: list[dict[str, Any]]) -> None:
    """No Notification fires in a plain run (Claude Code does not fire one either); the run answered."""
    await test_hook_events.test_notification_hook()
    (result,) = kind(sdk_lines, "result")
    assert result["result"] == "Hello" and result["is_error"] is False


# -- hooks: the hook ran, and what it said took effect -----------------------------------------------


async def test_companion__test_hook_with_permission_decision_and_reason(sdk_model: FakeLLMServer) -> None:
    await test_hooks.test_hook_with_permission_decision_and_reason()
    (block,) = tool_results(sdk_model)[:1]
    assert block.get("is_error") and "Security policy: Bash blocked" in text_of(block)


async def test_companion__test_hook_with_additional_context(sdk_model: FakeLLMServer) -> None:
    await test_hooks.test_hook_with_additional_context()
    after_tool = json.dumps(sdk_model.cursor.requests[-1]["body"]["messages"])
    assert "The command executed successfully with hook monitoring" in after_tool


async def test_companion__test_hook_with_continue_and_stop_reason(
    sdk_lines: list[dict[str, Any]], sdk_model: FakeLLMServer
) -> None:
    """``continue: false`` from PostToolUse ends the run after the tool: the model is not asked again."""
    await test_hooks.test_hook_with_continue_and_stop_reason()
    assert len([r for r in sdk_model.cursor.requests if r["body"].get("messages")]) == 1
    assert len(kind(sdk_lines, "result")) == 1


async def test_companion__test_pre_tool_use_hook_with_additional_context(sdk_model: FakeLLMServer) -> None:
    await test_hook_events.test_pre_tool_use_hook_with_additional_context()
    assert "This command is running in a test environment" in json.dumps(
        sdk_model.cursor.requests[-1]["body"]["messages"]
    )


# -- a tool that must not run: it was offered and asked for, and refused ------------------------------


async def test_companion__test_sdk_mcp_without_permissions(
    sdk_lines: list[dict[str, Any]], sdk_model: FakeLLMServer
) -> None:
    await test_sdk_mcp_tools.test_sdk_mcp_without_permissions()
    calls = [
        b
        for line in kind(sdk_lines, "assistant")
        for b in line["message"]["content"]
        if b.get("type") == "tool_use" and b.get("name") == "mcp__noperm__echo"
    ]
    assert calls, "the model never called the tool: the vendored assertion held vacuously"
    (refused,) = [b for b in tool_results(sdk_model) if b["tool_use_id"] == calls[0]["id"]]
    assert refused.get("is_error")
    (result,) = kind(sdk_lines, "result")
    assert [d["tool_name"] for d in result["permission_denials"]] == ["mcp__noperm__echo"]


async def test_companion__test_sdk_mcp_permission_enforcement(
    sdk_lines: list[dict[str, Any]], sdk_model: FakeLLMServer
) -> None:
    """The disallowed tool is not offered to the model at all (Claude Code: the same)."""
    await test_sdk_mcp_tools.test_sdk_mcp_permission_enforcement()
    offered = {t["name"] for r in sdk_model.cursor.requests for t in r["body"].get("tools") or []}
    assert "mcp__test__greet" in offered and "mcp__test__echo" not in offered
