"""LS and MultiEdit are registered but not offered to the model (Glob lists a directory; Edit,
called once per change, does MultiEdit's job; Claude Code 2.1.328 offers neither): a call by name
still runs, and a read-only agent's tool list no longer names them. An agent definition that names
one still gets it (tests/integration/agents/test_agents_skills_commands_plugins_cli.py, ``tools: LS``)."""

from __future__ import annotations

import json
from pathlib import Path

from agentkeel.core.extensions import Extensions
from agentkeel.core.loop import Agent
from agentkeel.core.run import LoopConfig
from agentkeel.core.tools import Services, ToolContext, ToolRegistry
from agentkeel.models.fake.script import Script
from agentkeel.models.scripted import ScriptedProvider
from agentkeel.tools import NOT_OFFERED, builtin_tools, file_reader_names, read_only_names


def test_ls_and_multiedit_are_registered_but_not_shown() -> None:
    registry = ToolRegistry(builtin_tools())
    shown = [t.name for t in registry.visible()]
    assert {"Glob", "Grep", "Read", "Edit", "Write", "Bash"} <= set(shown)
    assert "LS" not in shown and "MultiEdit" not in shown
    assert registry.get("LS") is not None and registry.get("MultiEdit") is not None
    saved = sum(len(t.description) + len(json.dumps(t.input_schema)) for t in builtin_tools() if t.name in NOT_OFFERED)
    assert saved > 1000  # characters each request no longer carries (about 300 tokens)
    assert not NOT_OFFERED & {*read_only_names(), *file_reader_names()}


async def test_a_call_by_name_still_runs(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("alpha beta\n")
    read = {"name": "Read", "input": {"file_path": str(target)}}
    multi = {
        "name": "MultiEdit",
        "input": {"file_path": str(target), "edits": [{"old_string": "alpha", "new_string": "gamma"}]},
    }
    provider = ScriptedProvider(Script.from_data({"steps": [{"tool_calls": [read]}, {"tool_calls": [multi]}, "done"]}))
    ctx = ToolContext(cwd=tmp_path, session_id="t", services=Services(), emit=lambda e: None)
    agent = Agent(
        provider, ToolRegistry(builtin_tools()), LoopConfig(model="scripted"), extensions=Extensions([]), context=ctx
    )
    result = await agent.run("go")
    assert result.subtype == "success"
    assert target.read_text() == "gamma beta\n"
