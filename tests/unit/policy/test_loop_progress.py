"""The loop detector counts a file change between two identical calls as progress: ``pytest``
run again after an Edit is how a fix is checked, not a doom loop (#35 item 7)."""

from __future__ import annotations

import asyncio

from agentkeel.core.events import Checkpoint
from agentkeel.core.extensions import ToolCall, Verdict
from agentkeel.core.tools import ToolOutput
from agentkeel.policy.safety import LoopDetector
from agentkeel.tools import builtin_tools

TOOLS = {t.name: t for t in builtin_tools()}


def _bash(n: int, command: str = "pytest -q") -> ToolCall:
    return ToolCall(f"bash{n}", "Bash", {"command": command}, TOOLS["Bash"])


def _edit(n: int) -> ToolCall:
    return ToolCall(
        f"edit{n}", "Edit", {"file_path": "/p/a.py", "old_string": f"v{n}", "new_string": f"v{n + 1}"}, TOOLS["Edit"]
    )


async def _run(detector: LoopDetector, call: ToolCall, output: ToolOutput | None = None) -> str:
    ext = detector.extension()
    assert ext.before_tool is not None
    verdict = await ext.before_tool(call)
    if isinstance(verdict, Verdict) and verdict.decision == "deny":
        return "deny"
    if ext.after_tool is not None:
        await ext.after_tool(call, output or ToolOutput("ok"))
    return "ok"


def test_pytest_three_times_with_edits_between_all_run() -> None:
    async def go() -> list[str]:
        d = LoopDetector(None, limit=3)
        out = []
        for n in range(4):
            out.append(await _run(d, _bash(n)))
            await _run(d, _edit(n))
        return out

    assert asyncio.run(go()) == ["ok", "ok", "ok", "ok"]


def test_pytest_three_times_with_nothing_between_is_still_refused() -> None:
    async def go() -> list[str]:
        d = LoopDetector(None, limit=3)
        return [await _run(d, _bash(n)) for n in range(3)]

    assert asyncio.run(go()) == ["ok", "ok", "deny"]


def test_a_failed_edit_is_not_progress() -> None:
    async def go() -> list[str]:
        d = LoopDetector(None, limit=3)
        out = []
        for n in range(3):
            out.append(await _run(d, _bash(n)))
            await _run(d, _edit(n), ToolOutput("old_string not found", is_error=True))
        return out

    assert asyncio.run(go()) == ["ok", "ok", "deny"]


def test_a_shell_change_by_another_command_is_progress_but_not_the_repeated_calls_own() -> None:
    """Checkpoints name what a Bash call changed: a ``sed -i`` between two test runs is progress;
    the repeated command changing files itself (``echo x >> log``) is still a loop."""

    async def go() -> tuple[list[str], list[str]]:
        d = LoopDetector(None, limit=3)
        ext = d.extension()
        between = []
        for n in range(3):
            between.append(await _run(d, _bash(n)))
            sed = _bash(100 + n, f"sed -i s/v{n}/v{n + 1}/ a.py")
            await _run(d, sed)
            for sub in ext.subscribers:
                sub(Checkpoint(tool_use_id=sed.id, tool="Bash", files={"/p/a.py": "sha"}))
        own = LoopDetector(None, limit=3)
        own_ext = own.extension()
        itself = []
        for n in range(3):
            call = _bash(n, "echo x >> log")
            itself.append(await _run(own, call))
            for sub in own_ext.subscribers:
                sub(Checkpoint(tool_use_id=call.id, tool="Bash", files={"/p/log": "sha"}))
        return between, itself

    between, itself = asyncio.run(go())
    assert between == ["ok", "ok", "ok"]
    assert itself == ["ok", "ok", "deny"]
