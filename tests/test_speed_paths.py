"""What keeps a turn cheap, observed from outside: no thread per child process, on the real loop."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from agentkeel import Runtime, RuntimeOptions


@pytest.mark.skipif(sys.platform != "linux", reason="pidfds are Linux's")
async def test_bash_calls_start_no_thread_per_child(project: Path) -> None:
    """Python 3.11's asyncio starts a waitpid thread per child; keel watches children through pidfds
    (3.12 does the same by itself). Threads started while the session runs are counted by the
    profile hook threading installs in each new thread."""
    steps: list[object] = [
        {"text": f"step {i}", "tool_calls": [{"name": "Bash", "input": {"command": f"echo step-{i}"}}]}
        for i in range(8)
    ]
    script = project.parent / "bash.json"
    script.write_text(json.dumps({"steps": [*steps, "done"]}))
    started: set[tuple[int, str]] = set()

    def seen(*_: object) -> None:
        started.add((threading.get_ident(), threading.current_thread().name))

    rt = Runtime.create(
        RuntimeOptions(cwd=project, model=f"scripted:{script}", permission_mode="bypassPermissions", max_turns=20)
    )
    await rt.start()  # extension starts (the memory check...) are not what is counted
    threading.setprofile(seen)
    try:
        result = await rt.run("go")
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
        await rt.aclose()
    assert result.subtype == "success" and result.num_turns == 9
    names = sorted(name for _, name in started)  # memory's outbox and embedding pass, the watchdog reaper
    assert len(names) <= 5, f"{len(names)} threads for 8 Bash calls: {names}"
