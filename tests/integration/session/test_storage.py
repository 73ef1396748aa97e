"""Session storage on real files and real processes: writer, lock, tolerant loader, kill -9."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkeel.core.events import AssistantMessage, ToolResults, UserMessage
from agentkeel.core.types import Message, TextBlock, ToolResultBlock, ToolUseBlock
from agentkeel.core.view import MISSING_RESULT, repair_messages
from agentkeel.models.fake.script import Script
from agentkeel.models.fake.server import FakeLLMServer
from agentkeel.session.load import LoadReport, load_session, parse_lines
from agentkeel.session.store import SessionLock, SessionLocked, SessionWriter, encode_project
from kit import KEEL, KeelRun, session_files, wait_until, wire_env


def test_encode_project_matches_claude_code() -> None:
    assert encode_project(Path("/home/user/my_project.v2")) == "-home-user-my-project-v2"


def test_writer_chains_parents_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    w = SessionWriter(path, "s")
    events = [
        UserMessage(message=Message.user("hi")),
        AssistantMessage(message=Message(role="assistant", content=[TextBlock(text="yo")])),
    ]
    for e in events:
        w(e)
    w.close()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0]["parentUuid"] is None and lines[1]["parentUuid"] == lines[0]["uuid"]
    loaded = load_session(path)
    assert loaded.report.clean and [m.text() for m in loaded.messages] == ["hi", "yo"]


def test_loader_skips_garbage_and_never_rewrites(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    w = SessionWriter(path, "s")
    w(UserMessage(message=Message.user("one")))
    w.close()
    with path.open("ab") as f:
        f.write(b"not json at all\n\x00\x00\x00\x00\n[1,2]\n")
        f.write(b'{"type": "mystery"}\n')  # a type this version does not know: loads, ignored by the view
        f.write(b'{"type": "user", "message": 7}\n')  # a known type that does not fit it
    w = SessionWriter(path, "s")
    w(AssistantMessage(message=Message(role="assistant", content=[TextBlock(text="two")])))
    w.close()
    with path.open("ab") as f:
        f.write(b'{"type": "user", "message": {"ro')  # torn last line
    before = path.read_bytes()
    loaded = load_session(path)
    assert path.read_bytes() == before
    assert [m.text() for m in loaded.messages] == ["one", "two"]
    assert len(loaded.report.skipped) == 5
    assert "torn last line" in loaded.report.skipped[-1]
    # the next writer starts on a fresh line, so the torn line never swallows a new entry
    w = SessionWriter(path, "s")
    w(UserMessage(message=Message.user("three")))
    w.close()
    assert [m.text() for m in load_session(path).messages] == ["one", "two", "three"]


def test_view_repairs_pairing() -> None:
    use = ToolUseBlock(id="t1", name="Read", input={})
    msgs = [
        Message.user("go"),
        Message(role="assistant", content=[use]),
        Message.user("next"),
        Message(role="user", content=[ToolResultBlock(tool_use_id="orphan", content="x")]),
    ]
    view = repair_messages(msgs)
    assert [m.role for m in view.messages] == ["user", "assistant", "user"]
    first = view.messages[2].content[0]
    assert isinstance(first, ToolResultBlock) and first.tool_use_id == "t1" and first.content == MISSING_RESULT
    assert any("orphan" in r for r in view.repairs) and any("missing" in r for r in view.repairs)


def test_duplicate_entries_dropped(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    w = SessionWriter(path, "s")
    w(UserMessage(message=Message.user("one")))
    w.close()
    line = path.read_bytes()
    path.write_bytes(line + line)
    loaded = load_session(path)
    assert [m.text() for m in loaded.messages] == ["one"] and "duplicate" in loaded.report.repairs[0]


def test_lock_is_exclusive_across_and_within_processes_and_dies_with_its_holder(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    lock = SessionLock(session)
    lock.acquire()
    with pytest.raises(SessionLocked):  # a second client in the same process (SDK, server)
        SessionLock(session).acquire()
    holder = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import sys; from pathlib import Path; from agentkeel.session.store import SessionLock, SessionLocked\n"
                f"try:\n    SessionLock(Path({str(session)!r})).acquire()\nexcept SessionLocked as e:\n    print(e)"
            ),
        ],
        capture_output=True,
        text=True,
    )
    assert f"in use by pid {os.getpid()}" in holder.stdout
    lock.release()
    SessionLock(session).acquire()  # released: free again (this one is dropped unreleased below)
    # a holder killed with -9 never cleans up; the kernel releases its lock
    other = tmp_path / "t.jsonl"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from pathlib import Path; from agentkeel.session.store import SessionLock\n"
                f"SessionLock(Path({str(other)!r})).acquire(); print('held', flush=True); time.sleep(60)"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    with pytest.raises(SessionLocked):
        SessionLock(other).acquire()
    child.kill()
    child.wait()
    SessionLock(other).acquire()


def test_lock_has_one_holder_when_many_processes_race(tmp_path: Path) -> None:
    """8 processes start at once, 5 rounds: exactly one holds the lock each round. (The old
    O_EXCL lock took an empty lock file for stale and saw two or more holders in 27 of 40 rounds.)
    A holder keeps the lock until every process has tried (its stdin closes then), however late
    a loaded machine starts one of them."""
    script = (
        "import sys, time; from pathlib import Path\n"
        "from agentkeel.session.store import SessionLock, SessionLocked\n"
        "go = float(sys.argv[2])\n"
        "while time.time() < go: pass\n"
        "try:\n"
        "    SessionLock(Path(sys.argv[1])).acquire()\n"
        "except SessionLocked:\n"
        "    print('refused', flush=True); sys.exit(0)\n"
        "print('held', flush=True); sys.stdin.read()\n"
    )
    for round_ in range(5):
        session = tmp_path / f"r{round_}.jsonl"
        if round_ % 2:
            (tmp_path / f"r{round_}.jsonl.lock").write_text("")  # an empty lock file left by a crash
        go = time.time() + 2.0
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", script, str(session), str(go)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(8)
        ]
        try:
            outs = []
            for p in procs:  # each has tried: "held" (and holds on), or "refused"
                assert p.stdout is not None
                outs.append(p.stdout.readline().strip())
        finally:
            for p in procs:
                p.communicate(timeout=60)  # closes stdin: a holder lets go
        assert outs.count("held") == 1, (round_, outs)


def test_second_process_on_same_session_is_refused(
    tmp_path: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    server = fake_llm({"steps": ["first", {"text": "slow", "delay_s": 60}, "other"]})
    env = wire_env(server, "anthropic")
    sid = keel("-p", "hi", "--output-format", "json", env=env).json()["session_id"]
    slow = subprocess.Popen(
        [KEEL, "-p", "-r", sid, "slow one"],
        env={**os.environ, **env},
        cwd=tmp_path / "project",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_until(lambda: len(server.cursor.requests) >= 2, 60, "the slow request")  # it holds the lock now
    assert len(server.cursor.requests) == 2
    second = keel("-p", "-r", sid, "concurrent", env=env)
    assert slow.poll() is None  # it held the lock all along (its answer takes a minute)
    slow.kill()
    slow.communicate()
    assert second.code == 2 and f"session {sid} is in use" in second.stderr


WRITER_CHILD = """
import sys
from pathlib import Path
from agentkeel.core.events import UserMessage
from agentkeel.core.types import Message
from agentkeel.session.store import SessionWriter
w = SessionWriter(Path(sys.argv[1]), "crash")
for i in range(100000):
    e = UserMessage(message=Message.user(f"entry {i} " + "x" * 4000))
    w(e)
    sys.stdout.write(e.uuid + "\\n")
    sys.stdout.flush()
"""


def test_kill_9_during_writes_loses_nothing_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "crash.jsonl"
    child = subprocess.Popen([sys.executable, "-c", WRITER_CHILD, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    acked: list[str] = []
    while len(acked) < 300:
        acked.append(child.stdout.readline().strip())
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    acked += [line.strip() for line in child.stdout.read().splitlines() if line.strip()]
    loaded = load_session(path)
    stored = {e.uuid for e in loaded.events}
    assert set(acked) <= stored
    assert all(r.startswith("line") for r in loaded.report.skipped)  # at most a torn tail, reported
    assert len(loaded.messages) == 1  # consecutive user messages merge in the view; nothing dropped from the log


def test_kill_9_of_the_cli_then_resume(
    tmp_path: Path, project: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    steps: list[Any] = [
        {"text": f"step {i}", "tool_calls": [{"name": "Bash", "input": {"command": f"echo {i}"}}]} for i in range(200)
    ]
    server = fake_llm({"steps": steps})
    env = {**os.environ, **wire_env(server, "openai")}
    proc = subprocess.Popen(
        [KEEL, "-p", "work", "--allowedTools", "Bash"],
        env=env,
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_until(lambda: len(server.cursor.requests) >= 15, 120, "15 requests, to kill keel in the middle", interval=0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    [log] = session_files(tmp_path / "keelhome")
    before = log.read_bytes()
    sid = log.stem
    server.cursor.reset(Script.from_data({"steps": ["resumed fine"]}))
    run = keel("-p", "-r", sid, "continue", "--output-format", "json", env=wire_env(server, "openai"))
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "resumed fine"
    assert log.read_bytes().startswith(before)  # the crashed bytes are kept as they were
    sent = server.cursor.requests[-1]["body"]["messages"]
    tool_ids = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert tool_ids == answered  # every tool call has its result in the repaired view
    assert len(tool_ids) >= 10


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_parse_lines_never_crashes(data: bytes) -> None:
    report = LoadReport(Path("x.jsonl"))
    parse_lines(data, report)


_block = st.one_of(
    st.builds(TextBlock, text=st.text(max_size=5)),
    st.builds(ToolUseBlock, id=st.sampled_from(["a", "b", "c"]), name=st.just("Read"), input=st.just({})),
    st.builds(ToolResultBlock, tool_use_id=st.sampled_from(["a", "b", "c", "z"]), content=st.just("r")),
)
_message = st.builds(Message, role=st.sampled_from(["user", "assistant"]), content=st.lists(_block, max_size=4))


@settings(max_examples=400, deadline=None)
@given(st.lists(_message, max_size=12))
def test_repaired_view_is_always_valid(messages: list[Message]) -> None:
    view = repair_messages(messages).messages
    if view:
        assert view[0].role == "user"
    for prev, cur in itertools.pairwise(view):
        assert prev.role != cur.role
    for i, m in enumerate(view):
        assert m.content
        if m.role == "assistant":
            uses = [u.id for u in m.tool_uses()]
            if uses:
                nxt = view[i + 1]
                assert [r.tool_use_id for r in nxt.tool_results()][: len(uses)] == uses
        else:
            prev_uses = {u.id for u in view[i - 1].tool_uses()} if i else set()
            assert {r.tool_use_id for r in m.tool_results()} <= prev_uses
    assert repair_messages(view).messages == view  # repairing twice changes nothing


def test_tool_results_event_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    w = SessionWriter(path, "s")
    w(UserMessage(message=Message.user("go")))
    w(AssistantMessage(message=Message(role="assistant", content=[ToolUseBlock(id="t", name="LS", input={})])))
    w(ToolResults(message=Message(role="user", content=[ToolResultBlock(tool_use_id="t", content="ok")])))
    w.close()
    assert load_session(path).report.clean


def test_session_locked_message() -> None:
    err = SessionLocked(Path("/x/abc.jsonl"), {"pid": 7, "host": "h", "time": 1})
    assert "session abc is in use by pid 7" in str(err)


def test_pytest_sees_this_module() -> None:
    assert pytest is not None
