"""The TUI's rough edges a newcomer met (#31 item 11), each through the app (Textual's Pilot, a real
Runtime, the scripted model over loopback): an interrupted tool block stops its clock; a resumed
session shows its answers, its prompts as typed (also one sent after an interrupt) and its turn and
cost; keys typed faster than the completion list run what was typed; an Edit that cannot apply
fails with its error and no dialog; "No" stops the turn and the next prompt is the instruction;
/help lists /exit and /quit; the start screen has a hint; a command's preview is its last lines;
retries of one request are one line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual import events

from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.ui.tui.app import KeelApp
from agentkeel.ui.tui.chat import AnswerBlock, NoticeLine, ToolBlock, UserBlock
from agentkeel.ui.tui.dialogs import ChooserScreen
from agentkeel.ui.tui.prompt import PromptInput
from tui_harness import make_options, screen_text, type_text, wait_for

SID = "00000000-0000-4000-8000-0000000000aa"


def _idle(app: KeelApp) -> bool:
    return app.running is not None and app.running.done() and app.status == "idle"


async def _send(pilot: Any, text: str) -> None:
    await type_text(pilot, text)
    await pilot.press("enter")


async def test_an_interrupted_tool_block_stops_spinning_and_counting(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm(
        {"steps": [{"text": "Sleeping.", "tool_calls": [{"name": "Bash", "input": {"command": "sleep 30"}}]}]}
    )
    app = KeelApp(make_options(project, server, permission_mode="bypassPermissions"), home=tmp_path / "keelhome")
    async with app.run_test(size=(120, 40)) as pilot:
        await _send(pilot, "sleep")
        await wait_for(pilot, lambda: "· running" in screen_text(app), what="the running block")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: _idle(app), what="the interrupt")
        block = next(iter(app.query(ToolBlock)))
        title = str(block.title)
        assert not block.running and "interrupted after" in title and "running" not in title
        await pilot.pause(1.3)  # a spinner would have turned, a clock counted on
        assert str(block.title) == title
        assert "[interrupted]" in screen_text(app)


async def test_a_resumed_session_shows_what_was_said(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    """Answers, prompts as typed (memory's context named, not shown), the prompt sent after an
    interrupted call (it shares a message with that call's result), and the turn and cost."""
    memory = project / ".keel" / "agents" / "main" / "MEMORY.md"
    memory.parent.mkdir(parents=True)
    memory.write_text("Always answer in English.\n")
    steps = [
        "First answer here.",
        {"text": "Sleeping.", "tool_calls": [{"name": "Bash", "input": {"command": "sleep 30"}}]},
        "Answer after the interrupt.",
    ]
    server = fake_llm({"steps": steps})
    home = tmp_path / "keelhome"
    app = KeelApp(make_options(project, server, session_id=SID, permission_mode="bypassPermissions"), home=home)
    async with app.run_test(size=(120, 40)) as pilot:
        await _send(pilot, "hello")
        await wait_for(pilot, lambda: _idle(app), what="the first answer")
        await _send(pilot, "sleep")
        await wait_for(pilot, lambda: "· running" in screen_text(app), what="the sleep")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: _idle(app), what="the interrupt")
        await pilot.pause(2.1)  # not a double Ctrl-C
        await _send(pilot, "after the interrupt")
        await wait_for(pilot, lambda: _idle(app) and "Answer after the interrupt." in screen_text(app))
        live_cost = app.cost
    first = server.cursor.requests[0]["body"]["messages"][0]["content"]
    assert any("<memory-context" in b.get("text", "") for b in first if isinstance(b, dict))  # memory was added

    resumed = KeelApp(make_options(project, server, resume=SID), home=home)
    async with resumed.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "Answer after the interrupt." in screen_text(resumed), what="the history")
        shown = screen_text(resumed)
        assert "First answer here." in shown and "Sleeping." in shown
        assert [b.text for b in resumed.query(UserBlock)] == ["hello", "sleep", "after the interrupt"]
        assert "<memory-context" not in shown and "+ context: memory" in shown
        assert [a.text for a in resumed.query(AnswerBlock)] == [
            "First answer here.",
            "Sleeping.",
            "Answer after the interrupt.",
        ]
        assert resumed.turn == 3 and "turn 3" in shown
        assert resumed.cost == live_cost > 0 and f"${live_cost:.4f}" in shown


async def _burst(app: KeelApp, keys: list[str]) -> None:
    """Keys as a terminal delivers a fast typist's: all at once, none waiting for the screen."""
    assert app._driver is not None
    for key in keys:
        event = events.Key(key, key if len(key) == 1 else ("\r" if key == "enter" else None))
        event.set_sender(app)
        app._driver.send_message(event)


async def test_keys_typed_faster_than_the_list_run_what_was_typed(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": ["unused"]})
    app = KeelApp(make_options(project, server), home=tmp_path / "keelhome")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("/")
        await wait_for(pilot, lambda: app.completions.display, what="the command list")
        await _burst(app, ["c", "o", "s", "t", "enter"])
        await wait_for(pilot, lambda: _idle(app), what="the command")
        assert [b.text for b in app.query(UserBlock)] == ["/cost"]
        assert "Slash commands" not in screen_text(app)
        assert app.query_one(PromptInput).text == ""


async def test_an_edit_that_cannot_apply_fails_without_asking(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    """As Claude Code's validateInput: the tool's own check runs before the permission dialog, so
    nobody approves an edit that then fails; a file never read is not even looked into."""
    code = project / "app.py"
    code.write_text("x = 1\n")
    unread = project / "other.py"
    unread.write_text("y = 1\n")
    bad_edit = {"file_path": str(code), "old_string": "x = 99", "new_string": "x = 2"}
    steps = [
        {"text": "Reading.", "tool_calls": [{"name": "Read", "input": {"file_path": str(code)}}]},
        {"text": "Editing.", "tool_calls": [{"name": "Edit", "input": bad_edit}]},
        {
            "text": "And the other.",
            "tool_calls": [
                {"name": "Edit", "input": {"file_path": str(unread), "old_string": "y = 1", "new_string": "y = 2"}}
            ],
        },
        "I could not edit them.",
    ]
    server = fake_llm({"steps": steps})
    app = KeelApp(make_options(project, server), home=tmp_path / "keelhome")
    async with app.run_test(size=(120, 40)) as pilot:
        await _send(pilot, "edit app.py")
        await wait_for(pilot, lambda: _idle(app) or isinstance(app.screen, ChooserScreen), what="the end or a dialog")
        assert not isinstance(app.screen, ChooserScreen), screen_text(app)
        edits = [b for b in app.query(ToolBlock) if b.tool_name == "Edit"]
        assert len(edits) == 2 and all("-error" in b.classes for b in edits)
        shown = screen_text(app)
        assert "String to replace not found" in shown and "File has not been read yet" in shown
        assert "I could not edit them." in shown
    assert code.read_text() == "x = 1\n" and unread.read_text() == "y = 1\n"


async def test_no_stops_the_turn_and_the_next_prompt_is_the_instruction(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    steps = [
        {"text": "Touching.", "tool_calls": [{"name": "Bash", "input": {"command": "touch made.txt"}}]},
        "Doing it your way.",
    ]
    server = fake_llm({"steps": steps})
    app = KeelApp(make_options(project, server), home=tmp_path / "keelhome")
    async with app.run_test(size=(120, 40)) as pilot:
        await _send(pilot, "touch a file")
        await wait_for(pilot, lambda: isinstance(app.screen, ChooserScreen), what="the dialog")
        assert "No, and tell the model what to do instead" in screen_text(app)
        await pilot.press("n")
        await wait_for(pilot, lambda: _idle(app), what="the turn to stop")
        assert len(server.cursor.requests) == 1  # the model was not asked to go on by itself
        assert "Tell keel what to do instead" in screen_text(app)
        assert isinstance(app.focused, PromptInput)
        await _send(pilot, "use made-by-hand.txt instead")
        await wait_for(pilot, lambda: _idle(app) and "Doing it your way." in screen_text(app), what="the answer")
    assert not (project / "made.txt").exists()
    last = server.cursor.requests[1]["body"]["messages"][-1]["content"]
    assert any(b.get("type") == "tool_result" and "denied" in str(b.get("content")) for b in last)
    assert any(b.get("type") == "text" and b.get("text") == "use made-by-hand.txt instead" for b in last)


async def test_help_lists_exit_and_the_start_screen_has_a_hint(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm({"steps": ["unused"]})
    app = KeelApp(make_options(project, server), home=tmp_path / "keelhome")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "/ commands" in screen_text(app), what="the start hint")
        assert "/exit leaves" in screen_text(app)
        await _send(pilot, "/help")
        await wait_for(pilot, lambda: _idle(app) and "Slash commands" in screen_text(app), what="/help")
        help_text = next(n.text for n in app.query(NoticeLine) if n.text.startswith("Slash commands"))
        assert "  /exit  " in help_text and "(also /quit)" in help_text
        await _send(pilot, "/quit")
        await wait_for(pilot, lambda: not app.is_running, what="the exit")
    assert app.return_code == 0


async def test_a_command_preview_shows_its_last_lines(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    server = fake_llm(
        {"steps": [{"text": "Counting.", "tool_calls": [{"name": "Bash", "input": {"command": "seq 1 40"}}]}, "Done."]}
    )
    app = KeelApp(make_options(project, server, permission_mode="bypassPermissions"), home=tmp_path / "keelhome")
    async with app.run_test(size=(120, 40)) as pilot:
        await _send(pilot, "count")
        await wait_for(pilot, lambda: _idle(app) and "Done." in screen_text(app), what="the answer")
        block = next(iter(app.query(ToolBlock)))
        shown = str(block.output.render())
        assert shown.splitlines() == ["… +34 lines", "35", "36", "37", "38", "39", "40"]


async def test_retries_of_one_request_are_one_line(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    busy = {"error": {"status": 429, "retry_after_ms": 50}}
    server = fake_llm({"steps": [busy, busy, busy, "Through at last."]})
    app = KeelApp(make_options(project, server), home=tmp_path / "keelhome")
    async with app.run_test(size=(120, 40)) as pilot:
        await _send(pilot, "hello")
        await wait_for(pilot, lambda: _idle(app) and "Through at last." in screen_text(app), what="the answer")
        retries = [n.text for n in app.query(NoticeLine) if "retrying" in n.text]
        assert len(retries) == 1 and "(attempt 3)" in retries[0]


async def test_no_to_a_subagents_call_stops_the_whole_turn(
    project: Path, tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    task = {
        "name": "Task",
        "input": {"description": "touch it", "prompt": "touch made.txt", "subagent_type": "general-purpose"},
    }
    steps = [
        {"text": "Delegating.", "tool_calls": [task]},
        {"text": "Touching.", "tool_calls": [{"name": "Bash", "input": {"command": "touch made.txt"}}]},
        "The subagent went on.",
        "The parent went on.",
    ]
    server = fake_llm({"steps": steps})
    app = KeelApp(make_options(project, server), home=tmp_path / "keelhome")
    async with app.run_test(size=(120, 40)) as pilot:
        await _send(pilot, "delegate")
        await wait_for(pilot, lambda: isinstance(app.screen, ChooserScreen), what="the subagent's dialog")
        assert "touch made.txt" in screen_text(app)
        await pilot.press("n")
        await wait_for(pilot, lambda: _idle(app), what="the turn to stop")
        assert len(server.cursor.requests) == 2  # the parent's and the subagent's first: nobody went on
        assert "Tell keel what to do instead" in screen_text(app)
    assert not (project / "made.txt").exists()
