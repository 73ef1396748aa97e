"""The testing façade (tests/kit.py) does what docs/testing.md says: a real session from steps or
over loopback, the CLI, and a wait that fails with what it waited for."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentkeel.session.load import load_session
from kit import call, fake_llm_server, run_keel, run_session, session, stop, wait_until, wait_until_async, write_script


async def test_an_edit_changes_the_file(project: Path) -> None:
    # the example of docs/testing.md, as written there
    (project / "a.txt").write_text("old\n")
    steps = [
        call("Read", file_path="a.txt"),
        call("Edit", file_path="a.txt", old_string="old", new_string="new"),
        "done",
    ]
    result = await run_session(session(project, steps, permission_mode="acceptEdits"), "edit a.txt")
    assert result.subtype == "success" and (project / "a.txt").read_text() == "new\n"


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
async def test_a_session_over_loopback_reaches_the_server_and_logs_the_run(project: Path, wire: str) -> None:
    server = fake_llm_server([call("Read", "Reading.", file_path="a.txt"), "it says hi"])
    try:
        (project / "a.txt").write_text("hi\n")
        rt = session(project, server=server, wire=wire, settings={"permissions": {"allow": ["Read"]}})
        result = await run_session(rt, "what does a.txt say?")
    finally:
        stop(server)
    assert result.result == "it says hi" and len(server.cursor.requests) == 2
    assert any(m.role == "user" for m in load_session(rt.session_path).messages)


def test_the_cli_plays_a_script_and_a_scripted_error_is_seen_at_once(project: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, ["hello from the script"])
    run = run_keel("-p", "hi", "--model", f"scripted:{script}", "--output-format", "json", cwd=project)
    assert run.code == 0 and run.json()["result"] == "hello from the script", run.stderr
    broken = write_script(tmp_path, [{"error": {"status": 500, "message": "down"}}])
    failed = run_keel("-p", "hi", "--model", f"scripted:{broken}", cwd=project, env={"KEEL_MAX_RETRIES": "0"})
    assert failed.code == 1 and "Traceback" not in failed.stderr


def test_wait_until_returns_the_value_and_fails_naming_what_it_waited_for() -> None:
    start = time.monotonic()
    assert wait_until(lambda: time.monotonic() - start > 0.1 and "ready", 10, "ready") == "ready"
    with pytest.raises(AssertionError, match=r"timed out after 0.2 s waiting for the door, which is shut"):
        wait_until(lambda: False, 0.2, lambda: "the door, which is " + "shut")


async def test_wait_until_async_awaits_its_condition() -> None:
    calls: list[int] = []

    async def third_time() -> bool:
        calls.append(1)
        return len(calls) >= 3

    assert await wait_until_async(third_time, 10, "the third call", interval=0) is True
    with pytest.raises(AssertionError, match="waiting for never"):
        await wait_until_async(lambda: _false(), 0.1, "never")


async def _false() -> bool:
    return False
