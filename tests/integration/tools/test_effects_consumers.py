"""Everyone who used to name a tool asks it instead (issue #32, item 1): checkpoints, pruning, the
non-interactive shell guard, the comment checker, context tracking and the TUI diffs act on what
a tool declares (``Tool.effects``), so a tool keel has never heard of (MCP, plugin, SDK) that
declares the same effects is treated the same way as the built-in it resembles."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentkeel.config.settings import ReliabilitySettings
from agentkeel.context.state import WorkingState
from agentkeel.core.events import Event, EventBus, ToolFinished
from agentkeel.core.extensions import ToolCall
from agentkeel.core.provider import ModelRequest
from agentkeel.core.tools import Effects, Services, Tool, ToolContext, ToolOutput, ToolRegistry
from agentkeel.core.types import Message, ToolResultBlock, ToolUseBlock
from agentkeel.reliability.pruning import DUPLICATE, context_pruning
from agentkeel.reliability.registry import session_state
from agentkeel.reliability.shell import non_interactive_env
from agentkeel.session.checkpoints import CheckpointRecorder
from agentkeel.session.events import Checkpoint


async def _noop(args: Any, ctx: ToolContext) -> ToolOutput:
    return ToolOutput("ok")


def _tool(name: str, effects: Effects) -> Tool:
    return Tool(name, "a tool keel does not ship", None, _noop, raw_schema={"type": "object"}, effects=effects)


def test_a_checkpoint_is_taken_for_any_tool_that_declares_it_writes(tmp_path: Path) -> None:
    """A plugin's file-writing tool is checkpointed like Write: the path it names, resolved
    against the session's working directory, is recorded before and after the call."""
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    target = project / "sub" / "out.txt"
    target.write_text("before\n")
    emitted: list[Event] = []
    recorder = CheckpointRecorder(tmp_path / "s.jsonl", project, emitted.append)
    ext = recorder.extension()
    scribe = _tool("plugin_scribe", Effects(rule="Edit", path_fields=("target",), writes=True))
    call = ToolCall("toolu_1", scribe.name, {"target": "out.txt", "text": "after"}, scribe, cwd=project / "sub")

    async def run() -> None:
        assert ext.before_tool is not None and ext.after_tool is not None
        assert await ext.before_tool(call) is None
        target.write_text("after\n")
        await ext.after_tool(call, ToolOutput("ok"))

    asyncio.run(run())
    [checkpoint] = [e for e in emitted if isinstance(e, Checkpoint)]
    assert checkpoint.tool == "plugin_scribe" and list(checkpoint.files) == [str(target)]
    assert recorder.store.path(checkpoint.files[str(target)] or "").read_text() == "before\n"


def build(
    name: str,
    bus: EventBus,
    services: Services,
    *,
    config: ReliabilitySettings | None = None,
    tool_env: dict[str, str] | None = None,
) -> Any:
    """The reliability built-in ``name`` on one session's state, as the registry makes it."""
    state = session_state(services, config, 0, "")
    if name == "non-interactive-env":
        return non_interactive_env(bus, state, tool_env)
    return context_pruning(bus, state, services)


def test_a_tool_declaring_a_shell_gets_the_non_interactive_guard() -> None:
    bus = EventBus()
    ext = build("non-interactive-env", bus, Services(), tool_env={})
    assert ext is not None and ext.before_tool is not None
    shell = _tool("remote_sh", Effects(rule="Bash", shell=True))
    verdict = asyncio.run(ext.before_tool(ToolCall("t1", shell.name, {"command": "vim notes.txt"}, shell)))
    assert verdict is not None and verdict.decision == "deny"
    other = _tool("notes", Effects())
    assert asyncio.run(ext.before_tool(ToolCall("t2", other.name, {"command": "vim notes.txt"}, other))) is None


def _turn(i: int, name: str, inp: dict[str, object], result: str) -> list[Message]:
    return [
        Message(role="assistant", content=[ToolUseBlock(id=f"t{i}", name=name, input=inp)]),
        Message(role="user", content=[ToolResultBlock(tool_use_id=f"t{i}", content=result)]),
    ]


def _live(ext: Any, messages: list[Message]) -> list[Message]:
    """The messages as pruning sends them in a live session: it saw the session's first request
    (a first request with history is a resumed one, whose cached prefix pruning leaves alone)."""

    def request(upto: list[Message]) -> ModelRequest:
        return ModelRequest(model="m", system="", messages=upto, tools=[], max_tokens=100)

    asyncio.run(ext.before_request(request(messages[:1])))
    return asyncio.run(ext.before_request(request(messages))).messages


def test_pruning_keeps_what_a_session_tool_declares_protected() -> None:
    """A tool of the session (here a plan tool added by an extension) that declares its result
    protected is never pruned; an undeclared one repeating the same call is."""
    services = Services()
    services.put(ToolRegistry, ToolRegistry([_tool("Plan", Effects(protected=True)), _tool("Probe", Effects())]))
    ext = build(
        "dynamic-context-pruning",
        EventBus(),
        services,
        config=ReliabilitySettings(pruneAtPercent=0, pruneProtectTurns=0),
    )
    assert ext is not None and ext.before_request is not None
    messages = [Message.user("go")]
    for i, name in enumerate(["Plan", "Plan", "Probe", "Probe"]):
        messages += _turn(i, name, {"step": 1}, f"{name} result {i}")
    pruned = _live(ext, messages)
    texts = {b.tool_use_id: b.text() for m in pruned for b in m.tool_results()}
    assert texts == {"t0": "Plan result 0", "t1": "Plan result 1", "t2": DUPLICATE, "t3": "Probe result 3"}


def test_pruning_supersedes_a_read_by_what_the_tools_declare() -> None:
    """A Read of a file a NotebookEdit changed later is superseded: "changes the file" is the
    tool's ``writes``, not a list of names (behaviour kept from the name table)."""
    services = Services()
    ext = build(
        "dynamic-context-pruning",
        EventBus(),
        services,
        config=ReliabilitySettings(pruneAtPercent=0, pruneProtectTurns=0),
    )
    assert ext is not None and ext.before_request is not None
    nb = "/p/a.ipynb"
    messages = [Message.user("go")]
    messages += _turn(0, "Read", {"file_path": nb}, "old cells")
    messages += _turn(1, "NotebookEdit", {"notebook_path": nb, "cell_id": "a", "new_source": "x"}, "Updated")
    pruned = _live(ext, messages)
    texts = {b.tool_use_id: b.text() for m in pruned for b in m.tool_results()}
    assert texts["t0"].startswith("[pruned: /p/a.ipynb was changed after this read")


def test_context_tracks_files_by_what_the_tool_does() -> None:
    """Files read and changed, from the tools' reads/writes (behaviour kept from the name tables)."""
    state = WorkingState()
    for name, inp in (
        ("Read", {"file_path": "/p/a.py"}),
        ("NotebookEdit", {"notebook_path": "/p/n.ipynb", "cell_id": "a", "new_source": ""}),
        ("TodoWrite", {"todos": []}),
    ):
        state.on_event(ToolFinished(tool_use_id="t", name=name, input=inp, is_error=False, duration_ms=1))
    assert state.files == ["/p/a.py", "/p/n.ipynb"] and state.changed == ["/p/n.ipynb"]


def test_comment_checker_reads_the_pairs_of_any_known_writing_tool() -> None:
    from agentkeel.reliability.comments import slop_comments

    write = _tool("Write", Effects(rule="Edit", path_fields=("file_path",), writes=True))
    call = ToolCall("t", "Write", {"file_path": "a.py", "content": "# Added retry logic as requested\n"}, write)
    assert slop_comments(call) == ["# Added retry logic as requested"]
    # a tool of the same name that declares no writes (an MCP server's "Write" to a wiki) is not checked
    wiki = _tool("Write", Effects())
    assert slop_comments(ToolCall("t", "Write", dict(call.input), wiki)) == []
