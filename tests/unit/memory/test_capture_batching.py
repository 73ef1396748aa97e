"""Memory capture on the per-turn path: records wait in memory for the batch window (one writer
wake-up per batch, not per record), and whoever needs them on disk does not wait the window out."""

from __future__ import annotations

from pathlib import Path

from agentkeel.memory import open_store
from agentkeel.memory.capture import Outbox
from agentkeel.memory.sqlite_lib import sqlite3  # the store's own library: two copies of SQLite must not share a file


def _records(n: int) -> list[dict[str, str]]:
    return [
        {"id": f"r{i}", "type": "tool_observation", "project": "p", "session": "s", "text": f"obs {i}"}
        for i in range(n)
    ]


def _on_disk(tmp_path: Path) -> set[str]:
    """Ids acknowledged: still in the outbox file, or already indexed into the store."""
    db = sqlite3.connect(tmp_path / "outbox.db")
    try:
        import json

        rows = {json.loads(r[0])["id"] for r in db.execute("SELECT record FROM outbox")}
    finally:
        db.close()
    store = open_store(tmp_path / "mem.db", embedder="none")
    try:
        return rows | {e.id for e in store.export()}
    finally:
        store.close()


def test_flush_writes_what_is_queued_without_waiting_out_the_window(tmp_path: Path) -> None:
    store = open_store(tmp_path / "mem.db", embedder="none")
    outbox = Outbox(tmp_path / "outbox.db", store, window_s=60.0)  # a window no flush may wait for
    for record in _records(5):
        outbox.put(record)
    assert outbox.flush(10.0), "flush waited for the batch window"
    assert {f"r{i}" for i in range(5)} <= _on_disk(tmp_path)
    for record in _records(8)[5:]:  # a second batch after the first
        outbox.put(record)
    assert outbox.flush(10.0)
    assert {f"r{i}" for i in range(8)} <= _on_disk(tmp_path)
    outbox.close(timeout=10.0)
    store.close()


def test_close_writes_and_indexes_what_is_queued(tmp_path: Path) -> None:
    store = open_store(tmp_path / "mem.db", embedder="none")
    outbox = Outbox(tmp_path / "outbox.db", store, window_s=60.0)
    for record in _records(70):  # more than a batch
        outbox.put(record)
    outbox.close(timeout=10.0)
    assert {e.id for e in store.export()} == {f"r{i}" for i in range(70)}
    assert Outbox(tmp_path / "outbox.db", store).counts() == {"pending": 0, "dead": 0}
    store.close()
