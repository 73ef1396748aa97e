"""Adding a slash command is one decorated function (in commands/builtins.py): a session lists it
in /help and runs it, in ``keel -p "/name args"`` as in the interactive prompt."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.app.runtime import Runtime, RuntimeOptions
from agentkeel.commands import builtins
from agentkeel.commands.builtins import BUILTIN
from agentkeel.commands.run import run_prompt
from agentkeel.core.handle import SessionHandle
from agentkeel.models.fake.server import FakeLLMServer
from conftest import wire_env

Fake = Callable[[Any], FakeLLMServer]


async def test_a_new_command_is_one_decorated_function(
    project: Path, fake_llm: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(BUILTIN, "_commands", list(BUILTIN._commands))  # the table as it was, after the test

    # what a contributor writes in commands/builtins.py, and nothing else:
    @BUILTIN.command("shout", "Say the arguments loudly", argument_hint="<words>")
    async def shout(session: SessionHandle, args: str) -> str:
        return f"{args.upper()}! (session {session.session_id[:8]}, model {session.agent.config.model})"

    @BUILTIN.command("haiku", "Ask for a haiku", argument_hint="<topic>", expands=True)
    async def haiku(session: SessionHandle, args: str) -> str:
        return f"Write a haiku about {args}."

    server = fake_llm({"steps": ["An old silent pond"]})
    env = {**os.environ, **wire_env(server, "anthropic")}
    rt = Runtime.create(RuntimeOptions(cwd=project, env=env))
    try:
        shown = await run_prompt(rt, "/shout hello there")
        assert shown.subtype == "success" and shown.result.startswith("HELLO THERE! (session ")
        assert not server.cursor.requests  # a command's own output needs no model request
        listing = await run_prompt(rt, "/help")
        assert "/shout <words>  Say the arguments loudly" in listing.result
        assert "/haiku <topic>  Ask for a haiku" in listing.result
        answered = await run_prompt(rt, "/haiku ponds")
        assert answered.result == "An old silent pond"
        assert "Write a haiku about ponds." in str(server.cursor.requests[-1]["body"]["messages"])
    finally:
        await rt.aclose()
    assert builtins.builtin_commands()[-1].name == "haiku"


def test_no_command_has_a_stand_in_handler() -> None:
    """/cost is the context subsystem's: no fallback kept beside it (a second truth of its output)."""
    cost = next(c for c in builtins.builtin_commands() if c.name == "cost")
    assert cost.handler == "agentkeel.context.commands:cost" and cost.resolve_handler() is not None
    assert not hasattr(builtins, "FALLBACKS") and "fallback" not in type(cost).__struct_fields__
