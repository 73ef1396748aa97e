"""What keeps a turn cheap, observed from outside: no thread per child process; a Read window taken
in bulk reads the same as line by line."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentkeel import Runtime, RuntimeOptions
from agentkeel.tools.reading import LineWindow


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


@given(
    st.lists(
        st.sampled_from([b"a", b"\n", b"\r", b"\xc3\xa9", b"\xc3", b"x" * 40, b"\n\n", b"\xe2\x82"]), max_size=120
    ),
    st.integers(1, 5),
    st.integers(1, 30),
    st.lists(st.integers(0, 400), max_size=6),
    st.booleans(),
)
def test_a_read_window_is_the_same_in_bulk_and_byte_by_byte(
    parts: list[bytes], start: int, limit: int, cuts: list[int], eof: bool
) -> None:
    """Whole lines of a chunk are taken in bulk; a byte at a time takes the line-by-line path."""
    data = b"".join(parts)
    cuts = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    windows = []
    for pieces in (chunks, [data[i : i + 1] for i in range(len(data))]):
        w = LineWindow(start, limit)
        for piece in pieces:
            if w.feed(piece):
                break
        w.finish(eof)
        windows.append((w.lines, w.newlines, w.total, w.full))
    assert windows[0] == windows[1]
