"""Read on what could blow keel up or hang it: devices, FIFOs, sockets, a 4 GB sparse file, a huge line.

Each Read runs in a child process through keel's public tool API, under a hard timeout
(``subprocess.run(timeout=...)``) and an address-space limit (so that a Read that loads a
device or a huge file fails with MemoryError instead of eating the machine); the child
reports its peak RSS before and after the Read.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkeel.tools.reading import LINE_KEEP, LineWindow
from agentkeel.tools.textfile import decode_line
from kit import KEEL, session_files, wait_until

HARD_TIMEOUT_S = 60
RSS_BUDGET_MIB = 64  # growth of peak RSS a Read may cause, whatever the file
GIB = 1 << 30

CHILD = r"""
import asyncio, json, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # a Read that loads everything dies here, not the host
from agentkeel.core.tools import Services, ToolContext, ToolError, ToolRegistry
from agentkeel.tools import builtin_tools

async def main() -> None:
    args = json.loads(sys.argv[1])
    tool = ToolRegistry(builtin_tools()).get("Read")
    ctx = ToolContext(cwd=Path.cwd(), session_id="t", services=Services(), emit=lambda e: None)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        out = await tool.run(tool.parse(args), ctx)
        text, is_error, meta = out.text(), out.is_error, out.metadata
    except ToolError as e:
        text, is_error, meta = str(e), True, {}
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"text": text, "is_error": is_error, "meta": meta, "rss_growth_kib": after - before}))

asyncio.run(main())
"""


def read_in_child(cwd: Path, **args: Any) -> dict[str, Any]:
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(args)],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=HARD_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"Read {args} hung: no answer in {HARD_TIMEOUT_S}s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result: dict[str, Any] = json.loads(proc.stdout)
    assert result["rss_growth_kib"] < RSS_BUDGET_MIB * 1024, f"Read {args} grew RSS by {result['rss_growth_kib']} KiB"
    return result


@pytest.fixture
def writer() -> Iterator[Callable[[Path], subprocess.Popen[bytes]]]:
    """A process that keeps a FIFO open for writing and fills it."""
    started: list[subprocess.Popen[bytes]] = []

    def start(fifo: Path) -> subprocess.Popen[bytes]:
        code = "import os,sys\nfd=os.open(sys.argv[1], os.O_RDWR)\nwhile True: os.write(fd, b'y\\n' * 32768)"
        p = subprocess.Popen([sys.executable, "-c", code, str(fifo)])
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()
        p.wait()


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_read_refuses_character_devices(project: Path, device: str) -> None:
    out = read_in_child(project, file_path=device)
    assert out["is_error"] and f"{device} is a character device, not a regular file" in out["text"]
    assert "use Bash with a bounded command" in out["text"]


def test_read_refuses_a_fifo_in_the_project_with_or_without_a_writer(
    project: Path, writer: Callable[[Path], subprocess.Popen[bytes]]
) -> None:
    fifo = project / "pipe"
    os.mkfifo(fifo)
    out = read_in_child(project, file_path="pipe")  # no writer: opening it for reading would block forever
    assert out["is_error"] and "is a FIFO (named pipe), not a regular file" in out["text"]
    feeding = writer(fifo)  # a writer that never stops: reading it to the end would never end
    out = read_in_child(project, file_path=str(fifo), offset=1, limit=5)
    assert out["is_error"] and "FIFO" in out["text"]
    assert feeding.poll() is None  # Read took nothing from it and did not break it
    (project / "link").symlink_to(fifo)
    assert "FIFO" in read_in_child(project, file_path="link")["text"]


def test_read_refuses_a_socket(project: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(project / "s.sock"))
        out = read_in_child(project, file_path="s.sock")
    finally:
        sock.close()
    assert out["is_error"] and "is a socket, not a regular file" in out["text"]


def test_read_a_4gb_sparse_file_with_offset_and_limit_stays_small(project: Path) -> None:
    big = project / "sparse.log"
    with big.open("wb") as f:
        f.write(b"".join(b"head %d\n" % i for i in range(1, 1001)))
        f.seek(4 * GIB)
        f.write(b"\ntail 1\ntail 2\ntail 3\n")
    assert big.stat().st_size > 4 * GIB and big.stat().st_blocks * 512 < 64 << 20  # really sparse
    out = read_in_child(project, file_path=str(big), offset=998, limit=2)
    assert out["text"].startswith("998\thead 998\n999\thead 999\n") and not out["is_error"]
    assert "Showing lines 998-999 of 1004" in out["text"]
    out = read_in_child(project, file_path=str(big), offset=1002, limit=2)
    assert out["text"].startswith("1002\ttail 1\n1003\ttail 2")
    out = read_in_child(project, file_path=str(big), offset=1001, limit=1)  # the hole: one 4 GiB line of NULs
    assert "[line truncated]" in out["text"] and len(out["text"]) < 10_000
    out = read_in_child(project, file_path=str(big))  # no limit: the first 2000 lines, not the file
    assert out["meta"]["lines"] == 1004 and out["meta"]["total_lines"] == 1004
    out = read_in_child(project, file_path=str(big), offset=5000)
    assert "The file has only 1004 lines; offset 5000 is past the end" in out["text"]


def test_read_a_large_dense_file_near_its_end_stays_small(project: Path) -> None:
    big = project / "rows.log"
    filler = b"filler row\n" * (1 << 20)  # 11 MiB, a million lines
    with big.open("wb") as f:
        for _ in range(6):
            f.write(filler)
        f.write(b"end 1\nend 2\n")
    total = 6 * (1 << 20) + 2
    out = read_in_child(project, file_path=str(big), offset=total - 1, limit=5)
    assert out["text"] == f"{total - 1}\tend 1\n{total}\tend 2"
    out = read_in_child(project, file_path=str(big), offset=10, limit=2)
    assert out["text"].startswith("10\tfiller row\n11\tfiller row\n")
    assert out["meta"]["total_lines"] is None  # counting stops 64 MiB past the window
    assert "of a 66.0 MiB file; keel stopped reading there and did not count the lines after" in out["text"]


def test_read_with_a_huge_limit_keeps_a_bounded_window(project: Path) -> None:
    empty_lines = project / "blank.txt"
    empty_lines.write_bytes(b"\n" * (48 << 20))  # 48 million empty lines: a list of them is 400 MB of pointers
    out = read_in_child(project, file_path=str(empty_lines), limit=10**9)
    shown = out["meta"]["lines"]
    assert 1000 < shown < 1_000_000 and out["meta"]["total_lines"] == 48 << 20
    assert out["text"].endswith(f"[Showing lines 1-{shown} of {48 << 20}. Use offset and limit to read more.]")


def test_read_a_huge_single_line_file(project: Path) -> None:
    line = project / "min.js"
    chunk = b"x" * (1 << 20)
    with line.open("wb") as f:
        for _ in range(100):
            f.write(chunk)
    out = read_in_child(project, file_path=str(line))
    assert not out["is_error"] and out["text"].startswith("1\txxxx")
    assert "[line truncated]" in out["text"] and len(out["text"]) < 5000
    assert "100.0 MiB file" in out["text"] and "did not count the lines after" in out["text"]


def test_read_of_a_proc_file_and_a_crlf_file(project: Path) -> None:
    out = read_in_child(project, file_path="/proc/self/status", limit=1)  # st_size 0, content anyway
    assert out["text"].startswith("1\tName:")
    (project / "dos.txt").write_bytes(b"one\r\ntwo\r\n\r\nlast")
    assert read_in_child(project, file_path="dos.txt")["text"] == "1\tone\n2\ttwo\n3\t\n4\tlast"


def test_interrupting_keel_during_a_fifo_read(project: Path, tmp_path: Path) -> None:
    """A Read of a FIFO in the project is answered at once; SIGINT ends keel (the old Read blocked in open())."""
    os.mkfifo(project / "events")
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "steps": [
                    {"text": "reading", "tool_calls": [{"name": "Read", "input": {"file_path": "events"}}]},
                    {"text": "slow", "delay_s": 30},
                ]
            }
        )
    )
    keel = subprocess.Popen(
        [KEEL, "-p", "read it", "--model", f"scripted:{script}", "--output-format", "stream-json", "--verbose"],
        cwd=project,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        home = Path(os.environ["KEEL_HOME"])
        # the Read has answered (the old one stayed stuck in open()) and the next request is in flight
        wait_until(
            lambda: any("FIFO" in f.read_text() for f in session_files(home)), HARD_TIMEOUT_S, "the Read's answer"
        )
        keel.send_signal(signal.SIGINT)
        out, err = keel.communicate(timeout=HARD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail("keel ignored SIGINT during a FIFO Read")
    finally:
        if keel.poll() is None:
            keel.kill()
            keel.wait()
    assert keel.returncode == 130, err
    results = [m for m in map(json.loads, out.splitlines()) if m["type"] == "user"]
    content = results[0]["message"]["content"][0]
    assert content["is_error"] and "is a FIFO (named pipe), not a regular file" in str(content["content"])
    assert "Traceback" not in err


def test_edit_refuses_non_regular_and_oversized_files(tmp_path: Path) -> None:
    """Edit loads a whole file: a FIFO swapped in after the Read is refused, not waited on."""
    out = subprocess.run(
        [sys.executable, "-c", EDIT_CHILD],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=HARD_TIMEOUT_S,
    )
    assert out.returncode == 0, out.stderr
    fifo, big = json.loads(out.stdout)
    assert "is a FIFO (named pipe), not a regular file" in fifo
    assert "too large for Edit" in big


EDIT_CHILD = r"""
import asyncio, json, os
from pathlib import Path
from agentkeel.core.tools import Services, ToolContext, ToolError, ToolRegistry
from agentkeel.tools import builtin_tools
from agentkeel.tools.files import FileState

async def main() -> None:
    reg = ToolRegistry(builtin_tools())
    ctx = ToolContext(cwd=Path.cwd(), session_id="t", services=Services(), emit=lambda e: None)
    async def call(name, **kw):
        tool = reg.get(name)
        try:
            return (await tool.run(tool.parse(kw), ctx)).text()
        except ToolError as e:
            return str(e)
    Path("f").write_text("a\n")
    await call("Read", file_path="f")
    os.unlink("f")
    os.mkfifo("f")
    ctx.services.get(FileState).mark(Path.cwd() / "f")  # as if the FIFO had been read: Edit must still refuse
    fifo = await call("Edit", file_path="f", old_string="a", new_string="b")
    with open("big", "wb") as f:
        f.truncate(60 << 20)
        f.seek(0)
        f.write(b"a\n")
    ctx.services.get(FileState).mark(Path.cwd() / "big")
    big = await call("Edit", file_path="big", old_string="a", new_string="b")
    print(json.dumps([fifo, big]))

asyncio.run(main())
"""


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\r\n", b"\xc3\xa9", b"\xff", b"x" * 9000]), max_size=40),
    cuts=st.lists(st.integers(min_value=1, max_value=20000), max_size=8),
    start=st.integers(min_value=1, max_value=30),
    limit=st.integers(min_value=1, max_value=30),
)
def test_line_window_agrees_with_splitting_whatever_the_chunks(
    text: list[bytes], cuts: list[int], start: int, limit: int
) -> None:
    data = b"".join(text)
    window = LineWindow(start, limit)
    pos = 0
    for cut in sorted(cuts):
        window.feed(data[pos:cut])
        pos = max(pos, cut)
    window.feed(data[pos:])
    window.finish(eof=True)
    lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in data.split(b"\n")] if data else []
    if data.endswith(b"\n"):
        lines.pop()
    # a line is UTF-8, or Windows-1252 when it is not (the kept part of a long line decides)
    want = [decode_line(ln[:LINE_KEEP], cut=len(ln) > LINE_KEEP) for ln in lines[start - 1 : start - 1 + limit]]
    got = window.lines
    assert [g[:2000] for g in got] == [w[:2000] for w in want]
    assert all(len(g) > 2000 for g, w in zip(got, want, strict=True) if len(w) > 2000)  # cut, never shortened
    assert window.total == len(lines)
