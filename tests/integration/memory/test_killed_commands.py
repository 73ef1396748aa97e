"""Memory commands killed for real (issue #31 item 6): `keel mem sync` and `keel mem repair` run
as subprocesses and are SIGKILLed at points along their way, then run again; a store damaged only
in its 100-byte header; a write that hits a full disk (RLIMIT_FSIZE in a child process); a
0-byte memory.db.

The sweep is small by default; ``KEEL_KILL_SWEEP=N`` runs N kill points for each command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.memory import open_store
from agentkeel.memory.sqlite_lib import sqlite3
from agentkeel.models.fake.server import FakeLLMServer
from conftest import KEEL, KeelRun, wire_env

MEM = ("mem", "--embedder", "none")
SWEEP = int(os.environ.get("KEEL_KILL_SWEEP", "0") or 0)
PYTHON = sys.executable


@pytest.fixture
def memdir(tmp_path: Path) -> Path:
    return tmp_path / "keelhome" / "memory"


def _facts(path: Path) -> list[str]:
    db = sqlite3.connect(str(path), timeout=30.0)
    try:
        return [r[0] for r in db.execute("SELECT text FROM events WHERE type = 'fact' AND superseded_by IS NULL")]
    finally:
        db.close()


def _count_facts(path: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error:
        return 0
    try:
        return int(db.execute("SELECT COUNT(*) FROM events WHERE type = 'fact'").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        db.close()


# -- keel mem sync ------------------------------------------------------------------------------------


def _mirror_with_new_lines(keel: Callable[..., KeelRun], project: Path, n: int) -> Path:
    assert keel(*MEM, "mirror").code == 0
    mirror = project / ".keel" / "memory" / "MEMORY.md"
    text = mirror.read_text(encoding="utf-8")
    extra = "\n".join(f"- the build step number {i} uses flag --opt{i}" for i in range(n))
    mirror.write_text(text.replace("## fact\n", f"## fact\n{extra}\n"), encoding="utf-8")
    return mirror


def _sync_killed_at(project: Path, memdir: Path, reached: int, delay: float | None) -> int | None:
    """Start `keel mem sync`, SIGKILL it once ``reached`` facts are stored (or after ``delay``
    seconds); returns its exit code (None if it was killed)."""
    proc = subprocess.Popen([KEEL, *MEM, "sync"], cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    db = memdir / "memory.db"
    deadline = time.monotonic() + 60
    start = time.monotonic()
    while proc.poll() is None and time.monotonic() < deadline:
        if delay is not None and time.monotonic() - start >= delay:
            break
        if delay is None and _count_facts(db) >= reached:
            break
        time.sleep(0.002)
    if proc.poll() is not None:
        proc.communicate()
        return proc.returncode
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    return None


def test_sync_killed_then_run_again_stores_each_new_line_once(
    project: Path, memdir: Path, keel: Callable[..., KeelRun]
) -> None:
    n = 300
    points: list[tuple[int, float | None]] = [(1, None), (n // 2, None), (n - 5, None), (n, None)]
    points += [(0, 0.05 * (i + 1)) for i in range(max(0, SWEEP - len(points)))]
    killed = 0
    for i, (reached, delay) in enumerate(points):
        home = project.parent / f"home{i}"
        env = {"KEEL_HOME": str(home)}
        os.environ["KEEL_HOME"] = str(home)  # the fixture's keel() and Popen inherit it
        db = home / "memory" / "memory.db"
        mirror = _mirror_with_new_lines(keel, project, n)
        before = mirror.read_text(encoding="utf-8")
        code = _sync_killed_at(project, home / "memory", reached, delay)
        killed += code is None
        # the user's mirror is whole: the old text or the rewritten one, never torn
        now = mirror.read_text(encoding="utf-8")
        assert now == before or now.startswith("# keel memory:"), now[:200]
        again = keel(*MEM, "sync", env=env)
        assert again.code == 0, again.stderr
        facts = _facts(db)
        assert len(facts) == n, f"kill point {i} ({reached} facts / {delay}s): {len(facts)} facts for {n} lines"
        assert len(set(facts)) == n
        assert not list(mirror.parent.glob(".MEMORY.md.*")), "a temporary file was left beside the mirror"
        # and a third run adds nothing either
        assert keel(*MEM, "sync", env=env).stdout.startswith("0 entries superseded, 0 added")
        mirror.unlink()
    assert killed >= 2, "the kill points came after sync had finished: nothing was tested"


def test_a_new_line_under_a_summary_heading_is_a_fact(
    project: Path, memdir: Path, keel: Callable[..., KeelRun]
) -> None:
    store = open_store(memdir / "memory.db", embedder="none")
    from agentkeel.memory.project import project_id

    pid = project_id(project)
    store.add_many([{"id": "s1", "type": "session_summary", "project": pid, "session": "a", "text": "Asked: x"}])
    store.close()
    assert keel(*MEM, "mirror").code == 0
    mirror = project / ".keel" / "memory" / "MEMORY.md"
    text = mirror.read_text(encoding="utf-8")
    mirror.write_text(text.replace("## session_summary\n", "## session_summary\n- the deploy key lives in vault\n"))
    assert keel(*MEM, "sync").stdout.startswith("0 entries superseded, 1 added")
    rows = [json.loads(x) for x in keel(*MEM, "export").stdout.splitlines()]
    added = [r for r in rows if r["text"] == "the deploy key lives in vault"]
    assert [r["type"] for r in added] == ["fact"]
    assert "- [" in mirror.read_text().split("## fact")[1].split("##")[0]  # listed under facts now


# -- keel mem repair ------------------------------------------------------------------------------------

KILL_AT_RENAME = textwrap.dedent(
    """
    import os, signal, sys
    n = int(sys.argv[1])
    seen = [0]
    def killing(real):
        def call(*args, **kwargs):
            seen[0] += 1
            if seen[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        return call
    os.replace = killing(os.replace)
    os.rename = killing(os.rename)
    from agentkeel.ui.cli.main import entry
    sys.argv = ["keel", "mem", "repair"]
    entry()
    """
)


def _seed(path: Path, n: int) -> None:
    store = open_store(path, embedder="none")
    store.add_many(
        {"id": f"m{i}", "type": "fact", "project": "p", "session": f"s{i // 20}", "text": f"entry {i} word{i}"}
        for i in range(n)
    )
    store.close()
    db = sqlite3.connect(str(path))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def _damage_header(path: Path) -> None:
    with path.open("r+b") as f:
        f.write(bytes(100))


def _drop_index_row(path: Path) -> None:
    """A word index that lost a row (what check finds and repair rebuilds, every entry kept)."""
    db = sqlite3.connect(str(path))
    db.execute("DELETE FROM fts WHERE rowid = 3")
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def _ids(keel: Callable[..., KeelRun]) -> set[str]:
    out = keel(*MEM, "export", "--all-projects")
    assert out.code == 0, out.stderr
    return {json.loads(x)["id"] for x in out.stdout.splitlines()}


def test_a_damaged_header_alone_loses_no_entry(memdir: Path, keel: Callable[..., KeelRun]) -> None:
    db = memdir / "memory.db"
    _seed(db, 2005)
    _damage_header(db)
    check = keel("mem", "check")
    assert check.code == 1 and "not a database" in check.stderr
    repair = keel("mem", "repair")
    assert repair.code == 0, repair.stderr
    assert "rebuilt with 2005 entries" in repair.stdout
    assert keel("mem", "check").code == 0
    assert _ids(keel) == {f"m{i}" for i in range(2005)}
    assert keel(*MEM, "search", "word1234", "--all-projects", "--json").json()[0]["id"] == "m1234"


def test_repair_killed_at_each_rename_is_finished_by_the_next_repair(
    project: Path, memdir: Path, keel: Callable[..., KeelRun], tmp_path: Path
) -> None:
    n_entries = 300
    points = range(1, max(SWEEP, 8) + 1)
    finished = False
    for n in points:
        home = tmp_path / f"home{n}"
        env = {"KEEL_HOME": str(home)}
        db = home / "memory" / "memory.db"
        _seed(db, n_entries)
        _drop_index_row(db)
        proc = subprocess.run(
            [PYTHON, "-c", KILL_AT_RENAME, str(n)],
            cwd=project,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode == 0:
            finished = True  # every rename came before the n-th: the sweep is complete
        else:
            assert proc.returncode == -signal.SIGKILL, proc.stderr
        check = keel("mem", "check", env=env)
        if check.code == 0:  # "ok" only when the rebuilt store is in place and whole
            assert db.exists()
            assert len(_ids_env(keel, env)) == n_entries
        else:
            assert "keel mem repair" in check.stderr, check.stderr
        # a store never opens over an interrupted repair (it would start an empty one)
        repair = keel("mem", "repair", env=env)
        assert repair.code == 0, (n, repair.stdout, repair.stderr)
        assert keel("mem", "check", env=env).code == 0
        assert len(_ids_env(keel, env)) == n_entries, (n, repair.stdout)
        assert not list(db.parent.glob("*.repaired")) and not list(db.parent.glob("*.repair-journal"))
        if finished:
            break
    assert finished, "the sweep did not reach the end of the repair"


def _ids_env(keel: Callable[..., KeelRun], env: dict[str, str]) -> set[str]:
    out = keel(*MEM, "export", "--all-projects", env=env)
    assert out.code == 0, out.stderr
    return {json.loads(x)["id"] for x in out.stdout.splitlines()}


def test_a_store_left_between_the_renames_refuses_to_open(memdir: Path, keel: Callable[..., KeelRun]) -> None:
    db = memdir / "memory.db"
    _seed(db, 10)
    _damage_header(db)
    ready = db.with_name("memory.db.repaired")
    # the state a kill leaves after the damaged file moved aside and before the rebuilt one moved in
    from agentkeel.memory.repair import repair_store

    kept = repair_store(db)
    db.replace(ready)
    search = keel(*MEM, "search", "word3")
    assert search.code == 1 and "repair was interrupted" in search.stderr and "keel mem repair" in search.stderr
    assert not db.exists()  # no empty store was made in its place
    assert keel("mem", "check").code == 1
    repair = keel("mem", "repair")
    assert repair.code == 0 and "finished an interrupted repair" in repair.stdout
    assert len(_ids(keel)) == 10
    assert kept.kept_as.exists()


# -- a full disk ----------------------------------------------------------------------------------------

FULL_DISK = textwrap.dedent(
    """
    import json, resource, signal, sys
    from pathlib import Path
    from agentkeel.memory import open_store
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    path = Path(sys.argv[1])
    store = open_store(path, embedder="none")
    store.add_many([{"id": "first", "type": "fact", "project": "p", "text": "before the disk filled"}])
    wal = Path(str(path) + "-wal")
    size = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 8192, hard))
    errors = 0
    big = "x" * 3000
    for i in range(200):  # each batch is one transaction: all of it or none
        try:
            store.add_many(
                [{"id": f"b{i}-{j}", "type": "fact", "project": "p", "text": f"{big} {i} {j}"} for j in range(5)]
            )
        except Exception as exc:
            errors += 1
            if errors >= 3:
                break
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # room again
    db = store._db
    store.add_many([{"id": "after", "type": "fact", "project": "p", "text": "after the disk had room"}])
    in_tx_after = db.in_transaction
    # a failing batch after the full disk still leaves nothing behind
    try:
        store.add_many([{"id": "half-1", "type": "fact", "project": "p", "text": "one"},
                        {"id": "half-2", "type": "fact", "project": "p", "text": "two", "timestamp": "not a time"}])
    except Exception:
        pass
    store.close()
    print(json.dumps({"errors": errors, "in_tx_after": in_tx_after}))
    """
)


def test_a_full_disk_leaves_the_store_transactional_and_whole(memdir: Path, keel: Callable[..., KeelRun]) -> None:
    db = memdir / "memory.db"
    proc = subprocess.run([PYTHON, "-c", FULL_DISK, str(db)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["errors"] >= 1, "the write limit was never hit"
    assert result["in_tx_after"] is False
    assert keel("mem", "check").code == 0
    ids = _ids(keel)
    assert {"first", "after"} <= ids and not ids & {"half-1", "half-2"}
    # every batch is whole or absent
    batches: dict[str, int] = {}
    for rid in ids - {"first", "after"}:
        batches[rid.split("-")[0]] = batches.get(rid.split("-")[0], 0) + 1
    assert all(count == 5 for count in batches.values()), batches


# -- an empty file --------------------------------------------------------------------------------------


def test_a_zero_byte_memory_db_is_named_and_replaced_only_by_repair(memdir: Path, keel: Callable[..., KeelRun]) -> None:
    memdir.mkdir(parents=True)
    db = memdir / "memory.db"
    db.write_bytes(b"")
    search = keel(*MEM, "search", "anything")
    assert search.code == 1
    assert "empty (0 bytes)" in search.stderr and "keel mem repair" in search.stderr
    assert db.stat().st_size == 0  # untouched: no new store was made in it
    check = keel("mem", "check")
    assert check.code == 1 and "empty (0 bytes)" in check.stderr
    repair = keel("mem", "repair")
    assert repair.code == 0, repair.stderr
    assert "kept as" in repair.stdout
    assert [p for p in memdir.iterdir() if p.name.startswith("memory.db.damaged-")]
    assert keel("mem", "check").code == 0
    assert keel(*MEM, "search", "anything").code == 0


def test_a_session_over_a_zero_byte_memory_db_warns_and_leaves_it(
    memdir: Path, keel: Callable[..., KeelRun], fake_llm: Callable[[Any], FakeLLMServer]
) -> None:
    memdir.mkdir(parents=True)
    db = memdir / "memory.db"
    db.write_bytes(b"")
    server = fake_llm({"steps": ["hi"]})
    run = keel("-p", "hello", "--output-format", "stream-json", "--verbose", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    notices = [x["message"] for x in run.lines() if x.get("subtype") == "notice"]
    assert any("memory is off" in n and "empty (0 bytes)" in n and "keel mem repair" in n for n in notices)
    assert db.stat().st_size == 0  # not made a new store behind the user's back
