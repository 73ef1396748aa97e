"""The session's background memory work: the embedding pass that runs only while the session
is idle, at low priority, in a thread of the session's own process; searches never embed more
than their query. The embedder is a real OpenAI-compatible endpoint on loopback (fake-llm)."""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkeel.config.settings import MemorySettings
from agentkeel.core.events import EventBus, RunFinished, UserMessage
from agentkeel.core.types import Message, Usage
from agentkeel.memory import open_store
from agentkeel.memory.plugin import MemoryPlugin
from agentkeel.models.fake.server import FakeLLMServer


def _finished() -> RunFinished:
    return RunFinished(
        subtype="success", is_error=False, result="ok", num_turns=1, duration_ms=1, usage=Usage(), total_cost_usd=0.0
    )


def _seed(db: Path, n: int) -> None:
    store = open_store(db, embedder="none")
    store.add_many(
        {"id": f"e{i}", "type": "fact", "project": "p", "session": f"s{i // 10}", "text": f"note number {i}"}
        for i in range(n)
    )
    store.close()


def _pending(db: Path) -> int:
    store = open_store(db, embedder="none")
    try:
        return store.pending_vectors()
    finally:
        store.close()


def _wait(condition: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def _waiting_for_idle(thread: threading.Thread) -> bool:
    """The embedding thread is parked, waiting for the session to become idle (read from its stack)."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code.co_name == "_wait_for_idle":
            return True
        frame = frame.f_back
    return False


@pytest.fixture
def endpoint(fake_llm: Callable[[Any], FakeLLMServer], monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    server = fake_llm({"steps": []})
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-for-tests")
    return server


def _plugin(project: Path, keel_home: Path, idle_after_s: float = 0.2) -> MemoryPlugin:
    # a model name of its own: embedders are built once per process and remember their endpoint
    config = MemorySettings(embedder=f"openai:fake-embed-{uuid.uuid4().hex[:8]}")
    return MemoryPlugin(
        config, cwd=project, keel_home=keel_home, session_id="s-now", window_tokens=200_000, idle_after_s=idle_after_s
    )


def test_an_idle_session_embeds_what_is_pending_in_a_low_priority_thread(
    project: Path, tmp_path: Path, endpoint: FakeLLMServer
) -> None:
    keel_home = tmp_path / "keelhome"
    db = keel_home / "memory" / "memory.db"
    _seed(db, 100)
    plugin = _plugin(project, keel_home)
    bus = EventBus()
    plugin.attach(bus)
    time.sleep(0.5)
    assert endpoint.embedding_requests == []  # nothing while no turn has ended

    bus.emit(_finished())
    assert _wait(lambda: _pending(db) == 0)
    sizes = [len(r["input"]) for r in endpoint.embedding_requests]
    assert sum(sizes) == 100 and max(sizes) <= 16  # small batches: a new turn waits at most one
    thread = next(t for t in threading.enumerate() if t.name == "keel-memory-embed")
    assert thread.daemon  # dies with the process: nothing to leak
    assert thread.native_id is not None and os.getpriority(os.PRIO_PROCESS, thread.native_id) == 19
    plugin.close()
    assert _wait(lambda: not thread.is_alive())
    hits = open_store(db, embedder=plugin.config.embedder).search("note number 42", k=3)
    assert hits[0].id == "e42"


@pytest.mark.timeout(600)
def test_a_new_turn_stops_the_pass_between_two_batches(project: Path, tmp_path: Path, endpoint: FakeLLMServer) -> None:
    keel_home = tmp_path / "keelhome"
    db = keel_home / "memory" / "memory.db"
    _seed(db, 4000)
    plugin = _plugin(project, keel_home)
    bus = EventBus()
    plugin.attach(bus)
    bus.emit(_finished())
    assert plugin.embedding is not None
    assert _wait(lambda: plugin.embedding is not None and plugin.embedding.embedded > 0)
    bus.emit(UserMessage(message=Message.user("the next prompt")))
    at_busy = plugin.embedding.embedded
    # the pass stops: its thread goes back to waiting for the session to be idle (however long the
    # batch in flight takes on a loaded machine: the thread runs at the lowest priority)
    thread = next(t for t in threading.enumerate() if t.name == "keel-memory-embed")
    assert _wait(lambda: _waiting_for_idle(thread))
    settled = plugin.embedding.embedded
    assert settled <= at_busy + 16  # one batch in flight at most
    time.sleep(1.0)
    assert plugin.embedding.embedded == settled  # and it stays stopped while the turn runs
    assert _wait(lambda: _pending(db) == 4000 + 1 - settled)  # + the prompt just captured

    bus.emit(_finished())  # idle again: it carries on
    assert _wait(lambda: _pending(db) < 4000 + 1 - settled)
    # to the end: thousands of entries at the lowest priority take minutes on a loaded machine
    assert _wait(lambda: _pending(db) == 0, 420)
    plugin.close()


def test_nothing_pending_loads_no_model_and_a_search_embeds_only_its_query(
    project: Path, tmp_path: Path, endpoint: FakeLLMServer
) -> None:
    keel_home = tmp_path / "keelhome"
    db = keel_home / "memory" / "memory.db"
    plugin = _plugin(project, keel_home)
    bus = EventBus()
    plugin.attach(bus)
    bus.emit(_finished())
    time.sleep(1.0)
    assert endpoint.embedding_requests == []  # an empty store: the embedder was never even asked
    plugin.close()

    _seed(db, 1000)
    store = open_store(db, embedder=plugin.config.embedder)
    assert store.pending_vectors() == 1000
    assert [h.id for h in store.search("note number 417", k=1)] == ["e417"]  # found by its words
    assert [r["input"] for r in endpoint.embedding_requests] == [["note number 417"]]
    assert store.pending_vectors() == 1000
    store.close()
