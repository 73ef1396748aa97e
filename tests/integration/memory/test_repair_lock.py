"""`keel mem repair` never swaps a memory file another process has open (issue #31 item 6).

A repair renames the damaged file aside and puts the rebuilt one in its place; a process that
still had the old file open would write to the renamed-away file, and what it wrote would be
lost. Every opener holds a shared flock on ``<name>.lock`` while the file is open; the repair
takes it exclusive or refuses, in one line naming the process, changing nothing."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentkeel.memory import lock, open_store
from agentkeel.memory.capture import Outbox
from agentkeel.memory.sqlite_lib import sqlite3
from conftest import KEEL, KeelRun
from serve_fixtures import Served
from serve_fixtures import serve as serve  # the fixture

PYTHON = sys.executable
NO_EMBEDDER = {"KEEL_MEMORY_EMBEDDER": "none"}


def _rows(db: Path, like: str = "%") -> list[str]:
    """The entries' texts (read-only; [] while the file is not there yet)."""
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    try:
        return [r[0] for r in conn.execute("SELECT text FROM events WHERE text LIKE ?", (like,))]
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def _drop_index_row(db: Path) -> None:
    """Damage `keel mem check` finds and `keel mem repair` rebuilds (a word index that lost a row)."""
    conn = sqlite3.connect(str(db), timeout=30.0)
    conn.execute("DELETE FROM fts WHERE rowid = (SELECT MIN(rowid) FROM fts)")
    conn.commit()
    conn.close()


def _left_by_a_repair(memdir: Path) -> list[str]:
    return sorted(p.name for p in memdir.iterdir() if any(m in p.name for m in (".damaged-", ".repair")))


def _wait(cond: Callable[[], object], timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _ids(keel: Callable[..., KeelRun]) -> set[str]:
    out = keel("mem", "--embedder", "none", "export", "--all-projects")
    assert out.code == 0, out.stderr
    return {json.loads(x)["id"] for x in out.stdout.splitlines()}


def _texts(keel: Callable[..., KeelRun]) -> str:
    out = keel("mem", "--embedder", "none", "export", "--all-projects")
    assert out.code == 0, out.stderr
    return "\n".join(json.loads(x)["text"] for x in out.stdout.splitlines())


# -- a real session -------------------------------------------------------------------------------------


def test_repair_refuses_while_a_session_writes_memory_and_loses_nothing(
    project: Path, keel: Callable[..., KeelRun]
) -> None:
    memdir = Path(os.environ["KEEL_HOME"]) / "memory"
    db = memdir / "memory.db"
    go = project / "go"
    # the Bash step holds the session open until the test has tried the repair; its output, the
    # answer after it and the session's summary are all written to memory after that
    wait_for_go = f"for i in $(seq 1200); do [ -e {go} ] && break; sleep 0.1; done; echo late-marker-7781"
    steps = [{"tool_calls": [{"name": "Bash", "input": {"command": wait_for_go}}]}, "finished with late-answer-5519"]
    script = project.parent / "script.json"
    script.write_text(json.dumps({"steps": steps}))
    session = subprocess.Popen(
        [KEEL, "-p", "remember early-prompt-3307", "--model", f"scripted:{script}", "--allowedTools", "Bash"],
        cwd=project,
        env={**os.environ, **NO_EMBEDDER},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        _wait(lambda: _rows(db, "%early-prompt-3307%"), what="the session to write its prompt to memory")
        inode = db.stat().st_ino
        _drop_index_row(db)  # damage found mid-session: what a user would run repair for

        check = keel("mem", "check", env=NO_EMBEDDER)  # check runs beside a session, read-only
        assert check.code == 1 and "word index holds" in check.stderr, (check.stdout, check.stderr)

        repair = keel("mem", "repair", env=NO_EMBEDDER)
        files_after_refusal = _left_by_a_repair(memdir)
        inode_after_refusal = db.stat().st_ino
    finally:
        go.touch()
    _, err = session.communicate(timeout=120)
    assert session.returncode == 0, err

    # after the session ended the repair runs, and everything the session wrote is in the store,
    # the records written after the refused repair included (before the lock, they went to the
    # file the repair had moved aside)
    after = keel("mem", "repair", env=NO_EMBEDDER)
    assert after.code == 0, after.stderr
    texts = _texts(keel)
    for marker in ("early-prompt-3307", "late-marker-7781", "late-answer-5519"):
        assert marker in texts, f"{marker} was lost: {texts[:2000]}"
    assert keel("mem", "check", env=NO_EMBEDDER).code == 0

    # the refused repair: one line naming the session, exit non-zero, nothing changed
    assert repair.code != 0, repair.stdout
    assert repair.stdout == ""
    lines = repair.stderr.strip().splitlines()
    assert len(lines) == 1, repair.stderr
    assert f"a keel session (pid {session.pid})" in lines[0] and "keel mem repair" in lines[0], lines[0]
    assert "Traceback" not in repair.stderr
    assert files_after_refusal == [] and inode_after_refusal == inode
    assert "rebuilt with" in after.stdout  # the damage was repaired once the session had ended


# -- a process holding the store, killed -----------------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys, time
    from agentkeel.memory import open_store
    store = open_store(sys.argv[1], embedder="none")
    store.add_many([{"id": "held-1", "type": "fact", "project": "p", "text": "written by the holder"}])
    print("open", flush=True)
    sys.stdin.readline()  # the test says when to write again
    store.add_many([{"id": "held-2", "type": "fact", "project": "p", "text": "written after the repair was tried"}])
    print("wrote", flush=True)
    sys.stdin.readline()
    store.close()
    """
)


def _seed(db: Path, n: int) -> None:
    store = open_store(db, embedder="none")
    store.add_many({"id": f"m{i}", "type": "fact", "project": "p", "text": f"entry {i} word{i}"} for i in range(n))
    store.close()


def _holder(db: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [PYTHON, "-c", HOLDER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "open", proc.stderr.read() if proc.stderr else ""
    return proc


def test_a_process_holding_the_store_keeps_what_it_writes_and_a_kill_9_frees_the_store(
    keel: Callable[..., KeelRun],
) -> None:
    memdir = Path(os.environ["KEEL_HOME"]) / "memory"
    db = memdir / "memory.db"
    _seed(db, 50)
    holder = _holder(db)
    try:
        _drop_index_row(db)
        refused = keel("mem", "repair", env=NO_EMBEDDER)
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "wrote"
        # what the holder wrote after the repair was tried is in memory.db, not in a file moved aside
        assert _rows(db, "written after the repair was tried"), _left_by_a_repair(memdir)
        assert refused.code != 0 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert f"(pid {holder.pid}" in refused.stderr and "keel mem repair" in refused.stderr
        assert _left_by_a_repair(memdir) == []
        # kill -9: the kernel drops the holder's lock with the process, so it blocks nothing
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)
    repair = keel("mem", "repair", env=NO_EMBEDDER)
    assert repair.code == 0, repair.stderr
    assert "rebuilt with 52 entries" in repair.stdout, repair.stdout
    assert _ids(keel) == {f"m{i}" for i in range(50)} | {"held-1", "held-2"}
    assert keel("mem", "check", env=NO_EMBEDDER).code == 0


def test_repair_names_a_keel_mem_mcp_server_holding_the_store(project: Path, keel: Callable[..., KeelRun]) -> None:
    memdir = Path(os.environ["KEEL_HOME"]) / "memory"
    db = memdir / "memory.db"
    _seed(db, 3)
    server = subprocess.Popen(
        [KEEL, "mem", "--embedder", "none", "mcp"],
        cwd=project,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(lambda: server.pid in lock.holders(lock.lock_file(db)), 30, what="`keel mem mcp` to open the store")
        refused = keel("mem", "repair", env=NO_EMBEDDER)
        assert refused.code != 0
        assert f"`keel mem mcp` (pid {server.pid}) is using the memory store" in refused.stderr, refused.stderr
    finally:
        assert server.stdin is not None
        server.stdin.close()  # end of input ends the server
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)
    assert keel("mem", "repair", env=NO_EMBEDDER).code == 0


def test_repair_names_keel_serve_once_its_memory_views_have_opened_the_store(
    serve: Callable[..., Served], keel: Callable[..., KeelRun]
) -> None:
    db = Path(os.environ["KEEL_HOME"]) / "memory" / "memory.db"
    _seed(db, 3)
    s = serve({"steps": ["x"]})
    assert s.get("memory/api/stats").status_code == 200  # the dashboard opens the store, and keeps it
    refused = keel("mem", "repair", env=NO_EMBEDDER)
    assert refused.code != 0
    assert f"`keel serve` (pid {s.proc.pid}) is using the memory store" in refused.stderr, refused.stderr
    s.stop()
    assert keel("mem", "repair", env=NO_EMBEDDER).code == 0


# -- a store opened while a repair runs ------------------------------------------------------------------

REPAIRING = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from agentkeel.memory.lock import hold
    held = hold(Path(sys.argv[1]), exclusive=True)
    print("held", flush=True)
    sys.stdin.readline()
    held.release()
    """
)


def test_a_store_opened_during_a_repair_waits_for_it_then_says_who_holds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = Path(os.environ["KEEL_HOME"]) / "memory" / "memory.db"
    _seed(db, 1)
    proc = subprocess.Popen(
        [PYTHON, "-c", REPAIRING, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        monkeypatch.setattr(lock, "SHARED_WAIT_S", 0.3)
        with pytest.raises(lock.MemoryBusy) as caught:
            open_store(db, embedder="none")
        assert f"(pid {proc.pid}" in str(caught.value) and "being repaired" in str(caught.value)
        assert len(str(caught.value).splitlines()) == 1
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)
    store = open_store(db, embedder="none")  # the repair is over: the store opens
    assert store.stats()["entries"] == 1
    store.close()


def test_repair_in_a_process_that_has_the_store_open_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentkeel.memory.repair import repair_files

    home = Path(os.environ["KEEL_HOME"])
    db = home / "memory" / "memory.db"
    _seed(db, 2)
    store = open_store(db, embedder="none")
    try:
        with pytest.raises(lock.MemoryBusy, match="open in this process"):
            repair_files(db, home)
    finally:
        store.close()
    assert repair_files(db, home)[-1].endswith("healthy: nothing to repair")
    # a store or outbox dropped without close() is closed as it is collected, and gives its lock back
    assert open_store(db, embedder="none").stats()["entries"] == 2
    assert Outbox(home / "memory" / "outbox.db", lambda: open_store(db, embedder="none")).counts()["pending"] == 0
    gc.collect()
    assert repair_files(db, home)[-1].endswith("healthy: nothing to repair")


def test_a_kill_9d_session_in_the_middle_of_a_tool_call_does_not_block_repair(project: Path) -> None:
    """The kernel drops a killed session's locks, and no process it started holds them (the lock's
    descriptor is not inherited): the repair runs at once. (A guard of the lock itself: with no
    lock at all, repair also runs.)"""
    memdir = Path(os.environ["KEEL_HOME"]) / "memory"
    db = memdir / "memory.db"
    go = project / "go"
    wait_for_go = f"for i in $(seq 1200); do [ -e {go} ] && break; sleep 0.1; done"
    script = project.parent / "script.json"
    script.write_text(json.dumps({"steps": [{"tool_calls": [{"name": "Bash", "input": {"command": wait_for_go}}]}]}))
    session = subprocess.Popen(
        [KEEL, "-p", "remember killed-prompt-4410", "--model", f"scripted:{script}", "--allowedTools", "Bash"],
        cwd=project,
        env={**os.environ, **NO_EMBEDDER},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        _wait(lambda: _rows(db, "%killed-prompt-4410%"), what="the session to write its prompt to memory")
        _wait(lambda: _running_with(str(go)), what="the session's Bash step to start")
        session.send_signal(signal.SIGKILL)
        session.wait(30)
        assert lock.holders(lock.lock_file(db)) == [] and lock.holders(lock.lock_file(memdir / "outbox.db")) == []
        _drop_index_row(db)
        repair = subprocess.run(
            [KEEL, "mem", "repair"], env={**os.environ, **NO_EMBEDDER}, capture_output=True, text=True, timeout=120
        )
        assert repair.returncode == 0, repair.stderr
        assert "rebuilt with" in repair.stdout
    finally:
        go.touch()  # ends the Bash command, if it outlived the session
        if session.poll() is None:
            session.kill()
            session.wait(30)


def _running_with(text: str) -> list[int]:
    """The live processes whose command line holds ``text``."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if text.encode() in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                continue
    return found
