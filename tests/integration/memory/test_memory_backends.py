"""A memory backend is one module and one registration (issue #32): the store's location picks
its backend from one table (``memory.backends.BACKENDS``), a backend implements the primitives
of ``store.Backend`` and nothing else, and a location no backend claims is one clear line.

The shared store suite runs on every registered backend (``memory_fixtures.backend``), the
in-memory fake of ``memory_fake_backend`` included: that module plus its ``register`` line is
all it took."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

import pytest

from agentkeel.memory import open_store
from agentkeel.memory.backends import BACKENDS, FILE, Backend, is_file, scheme_of
from agentkeel.memory.capture import outbox_path
from agentkeel.memory.store import StoreBase
from conftest import KeelRun
from memory_fake_backend import FakeStore


def required_primitives() -> set[str]:
    """The ``Backend`` primitives ``StoreBase`` gives no default for: what a backend must write."""
    declared = {name for name, _ in inspect.getmembers(Backend, inspect.isfunction) if name in Backend.__dict__}
    defaulted = {name for name in declared if name in StoreBase.__dict__}
    return declared - defaulted


def test_a_registered_backend_opens_its_urls_through_open_store(tmp_path: Path) -> None:
    assert BACKENDS["fake"] is FakeStore  # the one registration line
    store = open_store(f"fake://{tmp_path}", embedder="none")
    try:
        assert isinstance(store, FakeStore)
        store.add_many([{"id": "a", "type": "fact", "text": "the staging database moved to port 5433"}])
        assert store.stats()["backend"] == "fake" and [h.id for h in store.search("staging port")] == ["a"]
    finally:
        store.close()
    again = open_store(f"fake://{tmp_path}", embedder="none")  # a location is one database
    assert [e.id for e in again.export()] == ["a"]
    again.close()


def test_the_fake_writes_every_primitive_and_nothing_of_the_recipe() -> None:
    """What a new backend implements is ``Backend``'s list: the fake overrides each primitive
    ``StoreBase`` has no default for, and none of the recipe's public methods but its own three."""
    required = required_primitives()
    assert {"_insert", "_lexical", "_vector", "_commit", "_rollback", "_scan", "forget"} <= required
    missing = sorted(name for name in required if name not in FakeStore.__dict__)
    assert missing == []
    recipe = {"add_many", "search", "timeline", "get", "supersede", "export", "recent", "sessions", "reindex"}
    assert not recipe & set(FakeStore.__dict__)


def test_locations_name_their_backend() -> None:
    assert scheme_of("~/.keel/memory/memory.db") == FILE and is_file("relative/memory.db")
    assert scheme_of("postgresql://u@h/db") == scheme_of("POSTGRESQL://u@h/db") == "postgresql"
    assert BACKENDS[scheme_of("postgres://u@h/db")] is BACKENDS["postgresql"]
    assert not is_file("fake://x")


def test_an_unknown_scheme_is_one_clear_line_and_creates_nothing(
    project: Path, keel: Callable[..., KeelRun], tmp_path: Path
) -> None:
    """Before: any location not ``postgres(ql)://`` was a SQLite path, so ``redis://...`` made
    folders named after the URL (its password included) in the working directory, and `keel mem
    check` printed the URL, password and all, followed by "ok"."""
    url = "redis://keel:fake-password-0000@127.0.0.1/0"
    with pytest.raises(RuntimeError, match=r"redis://") as caught:
        open_store(url, embedder="none")
    assert "fake-password-0000" not in str(caught.value)
    assert "postgresql://" in str(caught.value)  # what would work
    before = sorted(project.rglob("*"))
    out = keel("mem", "--store", url, "stats")
    assert out.code != 0
    assert out.stderr.startswith("keel mem: memory.store redis://...") and out.stderr.count("\n") == 1
    assert "Traceback" not in out.stderr and "fake-password-0000" not in out.stderr + out.stdout
    for action in ("check", "repair"):  # before: "redis:/keel:<password>@127.0.0.1/0: ok"
        out = keel("mem", "--store", url, action)
        assert out.code != 0 and out.stderr.startswith("keel mem: memory.store redis://..."), action
        assert "fake-password-0000" not in out.stderr + out.stdout and "Traceback" not in out.stderr
    assert sorted(project.rglob("*")) == before
    with pytest.raises(RuntimeError, match=r"sqlite://"):  # not a spelling of a file: said, not guessed
        open_store(f"sqlite://{tmp_path}/m.db", embedder="none")


def test_a_url_stores_outbox_does_not_depend_on_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's outbox is named after its store; a URL is not a path to resolve against the
    working directory (before, only ``postgres(ql)://`` was known as a URL, so two sessions in
    two folders had two outboxes for the same ``fake://`` store)."""
    names = set()
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        names.add(outbox_path(tmp_path / "home", "fake://team-memory"))
        assert outbox_path(tmp_path / "home", "memory.db") == outbox_path(
            tmp_path / "home", str(Path.cwd() / "memory.db")
        )
    assert len(names) == 1
