"""What keeps a turn cheap, observed from outside: no thread per child process; a Read window taken
in bulk reads the same as line by line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentkeel import Runtime, RuntimeOptions
from agentkeel.tools.reading import LineWindow
from kit import wire_env


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
        name = threading.current_thread().name
        # a thread that has ended is seen once more in its teardown, under a made-up "Dummy-N" name
        # (it has left threading's table by then): counting that would count it twice
        if not name.startswith("Dummy-"):
            started.add((threading.get_ident(), name))

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


def test_a_wire_session_leaves_out_httpx_cli_and_trio(project: Path, fake_llm: Any) -> None:
    """httpx/__init__ imports its CLI (click, rich, pygments) and httpcore imports trio when they are
    installed, each dearer than httpx itself; ``keel -p`` talks to the model over httpx without them,
    and an explicit import of either still works afterwards."""
    server = fake_llm({"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]}, "done"]})
    code = (
        "import sys\n"
        "from agentkeel.ui.cli.main import main\n"
        "code = main(['-p', 'hi', '--model', 'anthropic:claude-sonnet-4-5', '--allowedTools', 'Bash'])\n"
        "print(code, sorted(m for m in ('httpx', 'httpx._main', 'click', 'rich', 'trio') if m in sys.modules))\n"
        "import httpx._main\n"
        "try:\n"
        "    import trio\n"
        "except ImportError:\n"
        "    pass\n"
        "print('cli', 'click' in sys.modules)\n"
    )
    env = {**os.environ, **wire_env(server, "anthropic")}
    run = subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines()[-2:] == ["0 ['httpx']", "cli True"], run.stdout[-2000:]


@pytest.mark.parametrize("thread", [False, True])
def test_leave_skips_the_teardown_but_not_atexit_buffered_output_or_a_running_thread(
    tmp_path: Path, thread: bool
) -> None:
    """``keel``'s exit (cli/_exit.py): atexit handlers run and buffered stdout is written; the
    interpreter's teardown (module clearing, __del__ of what is still referenced) is skipped, unless a
    non-daemon thread is still running, which is then waited for as sys.exit waits."""
    marks = tmp_path / "marks"
    code = (
        "import atexit, os, sys, threading, time\n"
        "from agentkeel.ui.cli._exit import leave\n"
        f"marks = open({str(marks)!r}, 'a', buffering=1)\n"
        "class Torn:  # writes at teardown, with what it bound (builtins are gone by then)\n"
        f"    def __del__(self, write=os.write, fd=os.open({str(marks)!r}, os.O_WRONLY | os.O_APPEND)):\n"
        "        write(fd, b'teardown\\n')\n"
        "kept = Torn()\n"
        "atexit.register(lambda: marks.write('atexit\\n'))\n"
        "def work():\n"
        "    time.sleep(0.3)\n"
        "    marks.write('thread\\n')\n"
        f"if {thread}:\n"
        "    threading.Thread(target=work).start()\n"
        "sys.stdout.write('result without a newline')\n"
        "leave(3)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (run.returncode, run.stdout) == (3, "result without a newline"), run.stderr
    seen = marks.read_text().splitlines()
    if thread:
        assert seen[:2] == ["thread", "atexit"] and "teardown" in seen, seen
    else:
        assert seen == ["atexit"], seen


def test_keel_version_is_answered_without_argparse_formatting_or_typing(keel: Any) -> None:
    run = keel("--version")
    assert (run.code, run.stdout) == (0, "0.1.0 (keel)\n") or run.stdout.endswith(" (keel)\n"), run
    code = (
        "import sys\n"
        "from agentkeel.ui.cli.main import main\n"
        "main(['--version'])\n"
        "print(sorted(m for m in ('typing', 'shutil', 'textwrap', 'threading') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.splitlines()[-1] == "[]", out
