"""Damaged memory files, damaged for real: pages overwritten in the middle of memory.db and of
outbox.db, files truncated or replaced with garbage, a word index that lost rows. Each is found,
named in one line with the fix, and `keel mem repair` rebuilds it keeping every readable row."""

from __future__ import annotations

import json
import random
import sqlite3 as stdlib_sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.memory import open_store
from agentkeel.memory.capture import Outbox
from agentkeel.memory.health import check_outbox, check_store, quick_check
from agentkeel.memory.project import project_id
from agentkeel.memory.sqlite_lib import sqlite3  # the store's own library: two copies of SQLite must not share a file
from agentkeel.models.fake.server import FakeLLMServer
from conftest import KeelRun, wire_env

PAGE = 4096
MEM = ("mem", "--embedder", "none")  # these tests are about the files, not vectors


def _seed(path: Path, project: str, n: int, sessions: bool = True) -> list[str]:
    """n entries, each with a word of its own (codeword<i>), checkpointed into the main file.
    Without sessions an entry has no context, so only its own row holds its word."""
    store = open_store(path, embedder="none")
    ids = [f"m{i}" for i in range(n)]
    store.add_many(
        {
            "id": ids[i],
            "type": "fact",
            "project": project,
            "session": f"s{i // 20}" if sessions else "",
            "text": f"entry {i} codeword{i} " + "lorem ipsum dolor sit amet " * 8,
        }
        for i in range(n)
    )
    store.close()
    _checkpoint(path)
    return ids


def _checkpoint(path: Path) -> None:
    db = sqlite3.connect(str(path))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def _leaf_pages(path: Path, table: str) -> list[int]:
    """Read with the standard library's SQLite, built with the dbstat table (the bundled one is
    not); only ever on a file this process has closed."""
    db = stdlib_sqlite3.connect(str(path))
    try:
        rows = db.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY path", (table,))
        return [int(r[0]) for r in rows]
    finally:
        db.close()


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = 0
    for i in range(9):
        byte = data[at + i]
        if i == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, at + i + 1
    raise AssertionError("unreachable")


def _rowids_on(path: Path, page: int) -> set[int]:
    """The rowids a table b-tree leaf page holds, read from the file's bytes (SQLite's format)."""
    data = path.read_bytes()[(page - 1) * PAGE : page * PAGE]
    assert data[0] == 0x0D, "not a table leaf page"
    cells = int.from_bytes(data[3:5], "big")
    rowids = set()
    for i in range(cells):
        at = int.from_bytes(data[8 + 2 * i : 10 + 2 * i], "big")
        _, at = _varint(data, at)  # payload size
        rowid, _ = _varint(data, at)
        rowids.add(rowid)
    return rowids


def _overwrite(path: Path, page: int, seed: int) -> None:
    with path.open("r+b") as f:
        f.seek((page - 1) * PAGE)
        f.write(random.Random(seed).randbytes(PAGE))


def _one_line(run: KeelRun) -> str:
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


@pytest.fixture
def memdir(tmp_path: Path) -> Path:
    return tmp_path / "keelhome" / "memory"


# -- memory.db ------------------------------------------------------------------------------------------


def test_a_page_overwritten_mid_file_is_named_and_repair_keeps_every_readable_entry(
    project: Path, memdir: Path, keel: Callable[..., KeelRun]
) -> None:
    db = memdir / "memory.db"
    ids = _seed(db, project_id(project), 1500)
    leaves = _leaf_pages(db, "events")
    page = leaves[len(leaves) // 2]
    lost = {f"m{rid - 1}" for rid in _rowids_on(db, page)}  # rid n holds m<n-1>
    assert 3 <= len(lost) < 30
    _overwrite(db, page, seed=1)

    one = sorted(lost)[0]
    hit = keel(*MEM, "search", f"codeword{one[1:]}")
    line = _one_line(hit)
    assert hit.code == 1 and line.startswith(f"keel mem: {db} is damaged (") and "keel mem repair" in line
    empty = keel(*MEM, "search", "zebra")  # no entry has the word: not "no memories match", exit 0
    assert empty.code == 1 and str(db) in _one_line(empty) and empty.stdout == ""
    check = keel("mem", "check")
    assert check.code == 1 and f"{db} is damaged" in check.stderr

    repair = keel("mem", "repair")
    assert repair.code == 0, repair.stderr
    assert f"rebuilt with {len(ids) - len(lost)} entries, {len(lost)} could not be read" in repair.stdout
    kept = sorted(memdir.glob("memory.db.damaged-*"))
    assert [p.name for p in kept if not p.name.endswith(("-wal", "-shm"))] and f"kept as {kept[0]}" in repair.stdout
    assert keel("mem", "check").code == 0
    assert not list(memdir.glob("*.repairing*"))  # no scratch files left behind
    exported = {json.loads(x)["id"] for x in keel(*MEM, "export").stdout.splitlines()}
    assert exported == set(ids) - lost
    survivor = next(i for i in ids if i not in lost and int(i[1:]) > int(one[1:]))
    found = keel(*MEM, "search", f"codeword{survivor[1:]}", "--json").json()
    assert found[0]["id"] == survivor  # the word index was rebuilt


def test_a_damaged_word_index_gives_no_silent_empty_answer(
    project: Path, memdir: Path, keel: Callable[..., KeelRun]
) -> None:
    db = memdir / "memory.db"
    ids = _seed(db, project_id(project), 800)
    pages = _leaf_pages(db, "fts_content")
    _overwrite(db, pages[len(pages) // 2], seed=2)  # searches read other pages: they still answer

    empty = keel(*MEM, "search", "zebra")
    assert empty.code == 1 and f"keel mem: {db} is damaged" in _one_line(empty)
    assert keel("mem", "repair").code == 0
    assert keel("mem", "check").code == 0
    assert keel(*MEM, "search", "zebra").stdout.strip() == "no memories match"
    assert len(keel(*MEM, "export").stdout.splitlines()) == len(ids)  # the entries were intact


def test_a_word_index_that_lost_rows_is_found_and_rebuilt(
    project: Path, memdir: Path, keel: Callable[..., KeelRun]
) -> None:
    db = memdir / "memory.db"
    ids = _seed(db, project_id(project), 300, sessions=False)
    raw = sqlite3.connect(str(db))
    raw.execute("DELETE FROM fts WHERE rowid % 3 = 0")  # entries the index no longer knows
    raw.commit()
    assert quick_check(raw) == []  # invisible to SQLite's own check
    raw.close()

    missing = keel(*MEM, "search", "codeword2")  # m2 is rid 3: dropped from the index
    line = _one_line(missing)
    assert missing.code == 1 and "the word index holds 200 rows for 300 entries" in line and "repair" in line
    repair = keel("mem", "repair")
    assert repair.code == 0 and "rebuilt with 300 entries" in repair.stdout, repair.stdout + repair.stderr
    assert keel(*MEM, "search", "codeword2", "--json").json()[0]["id"] == "m2"
    assert len(keel(*MEM, "export").stdout.splitlines()) == len(ids)


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_truncated_or_garbage_memory_db_is_one_line_and_the_outbox_is_not_lost(
    damage: str, project: Path, memdir: Path, keel: Callable[..., KeelRun]
) -> None:
    db = memdir / "memory.db"
    ids = _seed(db, project_id(project), 600)
    outbox = Outbox(memdir / "outbox.db", lambda: open_store(db, embedder="none"))
    acked = outbox.put_durable({"id": f"o{i}", "type": "fact", "text": f"pending note {i}"} for i in range(5))
    outbox.close()
    if damage == "truncated":
        with db.open("r+b") as f:
            f.truncate(db.stat().st_size // 2 // PAGE * PAGE)
    else:
        db.write_bytes(random.Random(3).randbytes(50 * PAGE))

    stats = keel(*MEM, "stats")
    line = _one_line(stats)
    assert stats.code == 1 and line.startswith(f"keel mem: {db} is damaged (") and "keel mem repair" in line
    assert check_outbox(memdir / "outbox.db") == []
    assert Outbox(memdir / "outbox.db", lambda: open_store(db)).counts() == {"pending": 5, "dead": 0}

    repair = keel("mem", "repair")
    assert repair.code == 0, repair.stderr
    assert "indexed 5 records the outbox held" in repair.stdout
    exported = {json.loads(x)["id"] for x in keel(*MEM, "export", "--all-projects").stdout.splitlines()}
    assert set(acked) <= exported  # acknowledged by the outbox: never lost
    if damage == "truncated":
        assert len(exported & set(ids)) > len(ids) // 4  # the first half of the file was readable
    assert check_store(db, full=True) == []


# -- outbox.db ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["page", "truncated", "garbage"])
def test_a_damaged_outbox_is_named_and_repair_indexes_its_readable_records(
    damage: str, project: Path, memdir: Path, keel: Callable[..., KeelRun]
) -> None:
    db = memdir / "memory.db"
    _seed(db, project_id(project), 10)
    path = memdir / "outbox.db"
    outbox = Outbox(path, lambda: open_store(db, embedder="none"))
    acked = outbox.put_durable(
        {"id": f"o{i}", "type": "fact", "project": project_id(project), "text": f"pending note {i} " + "x" * 150}
        for i in range(600)
    )
    outbox.close()
    _checkpoint(path)
    lost: set[str] = set()
    if damage == "page":
        leaves = _leaf_pages(path, "outbox")
        page = leaves[len(leaves) // 2]
        lost = {acked[seq - 1] for seq in _rowids_on(path, page)}
        _overwrite(path, page, seed=4)
    elif damage == "truncated":
        with path.open("r+b") as f:
            f.truncate(path.stat().st_size // 2 // PAGE * PAGE)
    else:
        path.write_bytes(random.Random(5).randbytes(20 * PAGE))
    before = path.read_bytes()

    search = keel(*MEM, "search", "lorem")
    assert search.code == 0 and search.stdout.strip()  # the store still answers
    assert f"keel mem: warning: {path} is damaged (" in _one_line(search) and "keel mem repair" in search.stderr
    assert path.read_bytes() == before  # nothing written into it
    stats = keel(*MEM, "stats", "--json")
    assert stats.code == 0 and "is damaged" in stats.json()["outbox"]["damaged"]

    repair = keel("mem", "repair")
    assert repair.code == 0, repair.stderr
    assert f"{path} was damaged" in repair.stdout and "the damaged file is kept as" in repair.stdout
    exported = {json.loads(x)["id"] for x in keel(*MEM, "export").stdout.splitlines()}
    recovered = exported & set(acked)
    if damage == "page":
        assert recovered == set(acked) - lost and 3 <= len(lost) < 40
    elif damage == "truncated":
        assert len(recovered) > len(acked) // 4
    else:
        assert recovered == set()  # nothing readable, and the garbage is kept aside
    assert sorted(memdir.glob("outbox.db.damaged-*")) and keel("mem", "check").code == 0
    assert not list(memdir.glob("*.repairing*"))


# -- sessions -------------------------------------------------------------------------------------------


def _requests(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r["body"] for r in server.cursor.requests]


def test_a_session_on_a_damaged_store_runs_without_memory_says_so_and_loses_nothing(
    project: Path, memdir: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    db = memdir / "memory.db"
    _seed(db, project_id(project), 1500)
    leaves = _leaf_pages(db, "events")
    _overwrite(db, leaves[len(leaves) // 2], seed=6)
    server = fake_llm(
        {
            "steps": [
                {"tool_calls": [{"name": "MemorySearch", "input": {"query": "codeword7"}}]},
                "Answered without memory.",
            ]
        }
    )
    run = keel("-p", "what is the deploy password rotation rule?", env=wire_env(server, "anthropic"))
    assert run.code == 0 and "Answered without memory." in run.stdout, run.stderr
    notice = f"keel: memory is off for this session: {db} is damaged ("
    assert notice in run.stderr and "keel mem repair" in run.stderr and "Traceback" not in run.stderr
    assert run.stderr.count(notice) == 1
    first, second = _requests(server)
    assert "<memory-context" not in json.dumps(first)
    assert "Memory is unavailable:" in json.dumps(second) and "keel mem repair" in json.dumps(second)

    # capture went on into the outbox; the repair indexes it
    assert Outbox(memdir / "outbox.db", lambda: open_store(db)).counts()["pending"] >= 2
    assert keel("mem", "repair").code == 0
    found = keel(*MEM, "search", "deploy password rotation", "--type", "user_prompt", "--json").json()
    assert found and "rotation" in found[0]["summary"]


def test_a_session_with_a_word_index_that_lost_rows_says_so(
    project: Path, memdir: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    db = memdir / "memory.db"
    _seed(db, project_id(project), 200)
    raw = sqlite3.connect(str(db))
    raw.execute("DELETE FROM fts WHERE rowid > 150")
    raw.commit()
    raw.close()
    server = fake_llm({"steps": ["ok"]})
    run = keel("-p", "codeword3 please", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert "memory is off for this session" in run.stderr and "the word index holds 150 rows for 200 entries" in (
        run.stderr
    )


def test_a_session_with_a_damaged_outbox_keeps_reading_memory_and_says_capture_is_off(
    project: Path, memdir: Path, fake_llm: Callable[[Any], FakeLLMServer], keel: Callable[..., KeelRun]
) -> None:
    db = memdir / "memory.db"
    _seed(db, project_id(project), 50)
    outbox = memdir / "outbox.db"
    outbox.write_bytes(random.Random(7).randbytes(8 * PAGE))
    before = outbox.read_bytes()
    server = fake_llm({"steps": ["ok"]})
    run = keel("-p", "what was codeword12 about?", env=wire_env(server, "anthropic"))
    assert run.code == 0, run.stderr
    assert f"keel: memory capture is off for this session: {outbox} is damaged (file is not a database)" in (run.stderr)
    assert "codeword12" in json.dumps(_requests(server)[0]).split("<memory-context", 1)[1]  # still remembered
    assert outbox.read_bytes() == before


def test_check_and_repair_say_where_they_apply(project: Path, keel: Callable[..., KeelRun]) -> None:
    healthy = keel("mem", "repair")
    assert healthy.code == 0 and "healthy: nothing to repair" in healthy.stdout
    dsn = "postgresql://keel:fake-password@127.0.0.1:9/nowhere"
    for action in ("check", "repair"):
        run = keel("mem", "--store", dsn, action)
        assert run.code == 2 and "PostgreSQL guards its own pages" in _one_line(run)
        assert "fake-password" not in run.stderr
