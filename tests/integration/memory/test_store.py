"""The memory store through its public API, on every registered backend alike (SQLite, PostgreSQL, the
in-memory fake of ``memory_fake_backend``): one suite."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkeel.memory import RecordError, embed, open_store
from agentkeel.memory.backends import open_location
from agentkeel.memory.privacy import DEFAULT_MASKER
from agentkeel.memory.store import MemoryStore, query_terms
from agentkeel.models.fake.script import fake_embedding
from agentkeel.models.fake.server import FakeLLMServer

FAKE_SECRETS = [
    "sk-ant-api03-FAKEFAKEFAKEFAKEFAKEFAKE0000",
    "ghp_FAKEfakeFAKEfakeFAKEfakeFAKEfake0000",
    "AKIAFAKEFAKEFAKE0000",
]


def rec(rid: str, text: str, **kw: Any) -> dict[str, Any]:
    base = {"id": rid, "type": "fact", "project": "p", "session": "s1", "timestamp": "2024-05-08T10:00:00Z"}
    base.update(kw)
    base["text"] = text
    return base


def test_ids_are_kept_and_search_finds_by_words(store: MemoryStore) -> None:
    n = store.add_many(
        [
            rec("D1:1", "Caroline: I went to the LGBTQ support group yesterday."),
            rec("D1:2", "Melanie: That sounds powerful. I painted a sunrise last week."),
            rec("D1:3", "Caroline: The transgender stories were inspiring."),
        ]
    )
    assert n == 3
    hits = store.search("support group", k=5)
    assert hits and hits[0].id == "D1:1"
    assert "support group" in hits[0].summary
    assert store.add_many([rec("D1:1", "again")]) == 0  # re-import adds nothing


def test_neighbouring_turns_give_context(store: MemoryStore) -> None:
    store.add_many(
        [
            rec("a", "Tim: How did your kids like the military memorial?"),
            rec("b", "John: They were awestruck and humbled."),
            rec("c", "Tim: Nice. I am reading about dragons."),
            rec("z", "unrelated chatter about the weather", session="s2"),
        ]
    )
    ids = [h.id for h in store.search("kids reaction military memorial", k=3)]
    assert ids[:2] == ["a", "b"] or set(ids[:2]) == {"a", "b"}


def test_date_words_are_searchable(store: MemoryStore) -> None:
    store.add_many(
        [
            rec("may", "we shipped the parser", timestamp="2023-05-20T09:00:00Z", session="x"),
            rec("jul", "we shipped the lexer", timestamp="2023-07-02T09:00:00Z", session="y"),
        ]
    )
    assert store.search("what shipped in May 2023", k=1)[0].id == "may"


def test_filters(store: MemoryStore) -> None:
    store.add_many(
        [
            rec("1", "cache bug in parser", project="a", session="s1", timestamp="2024-01-01T00:00:00Z"),
            rec("2", "cache bug in lexer", project="b", session="s2", timestamp="2024-06-01T00:00:00Z"),
            rec("3", "cache bug fixed", type="lesson", project="a", session="s3", timestamp="2024-07-01T00:00:00Z"),
            rec(
                "4",
                "edited cache code",
                type="tool_observation",
                project="a",
                session="s4",
                timestamp="2024-08-01T00:00:00Z",
                metadata={"file_path": "src/cache.py"},
            ),
        ]
    )
    assert {h.id for h in store.search("cache", project="a")} == {"1", "3", "4"}
    assert [h.id for h in store.search("cache", type="lesson")] == ["3"]
    assert [h.id for h in store.search("cache", session="s2")] == ["2"]
    window = store.search("cache", since="2024-05-01T00:00:00Z", until="2024-06-30T00:00:00Z")
    assert {h.id for h in window} == {"2"}
    assert [h.id for h in store.search("cache", file="src/cache.py")] == ["4"]
    assert store.search("nothing-matches-this") == []
    assert store.search("") == [] and store.search("the of and") == []


def test_progressive_disclosure_and_budgets(store: MemoryStore) -> None:
    store.add_many([rec(f"t{i}", f"turn {i} about deployment step {i} " + "detail " * 40) for i in range(10)])
    hits = store.search("deployment", k=10, budget_tokens=60)
    assert len(hits) == 1 or (len(hits) < 10 and sum(h.tokens for h in hits) <= 60)
    line = store.timeline("t5", before=2, after=2)
    assert [h.id for h in line] == ["t3", "t4", "t5", "t6", "t7"]
    budgeted = store.timeline("t5", before=5, after=5, budget_tokens=90)
    assert "t5" in [h.id for h in budgeted] and sum(h.tokens for h in budgeted) <= 90 and len(budgeted) < 11
    assert store.timeline("missing") == []
    full = store.get(["t2", "t1"])
    assert [e.id for e in full] == ["t2", "t1"] and "detail detail" in full[0].text
    cut = store.get(["t1", "t2", "t3"], budget_tokens=70)
    assert cut[-1].text.endswith("ask for this id alone to read the rest]")


def test_supersede_keeps_the_old_entry_but_hides_it(store: MemoryStore) -> None:
    store.add_many([rec("old", "the API port is 8080")])
    store.supersede("old", rec("new", "the API port is 9090"))
    assert [h.id for h in store.search("API port")] == ["new"]
    old = store.get(["old"])[0]
    assert old.superseded_by == "new" and "8080" in old.text
    assert {e.id for e in store.export()} == {"old", "new"}


def test_forget_erases(store: MemoryStore) -> None:
    store.add_many([rec("x", "my home address is 12 Elm Street"), rec("y", "Elm trees in the park")])
    assert store.forget(["x", "nope"]) == 1
    assert [h.id for h in store.search("Elm")] == ["y"]
    assert store.get(["x"]) == []
    assert all(e.id != "x" for e in store.export())


def test_stats_and_recent(store: MemoryStore) -> None:
    store.add_many([rec("a", "one"), rec("b", "two", type="session_summary", timestamp="2024-06-01T00:00:00Z")])
    stats = store.stats()
    assert stats["entries"] == 2 and stats["by_type"] == {"session_summary": 1, "fact": 1}
    assert [e.id for e in store.recent(["session_summary"], project="p")] == ["b"]


def test_bad_records_are_rejected_with_the_field_named(store: MemoryStore) -> None:
    for bad, word in [
        ({"id": "1"}, "text"),
        ({"text": "x", "type": "gossip"}, "type"),
        ({"text": "x", "timestamp": "yesterday"}, "timestamp"),
        ("text", "object"),
    ]:
        with pytest.raises(RecordError, match=word):
            store.add_many([bad])  # type: ignore[list-item]
    assert store.stats()["entries"] == 0


def test_planted_secrets_never_come_back(store: MemoryStore) -> None:
    records = [
        rec("s1", f"deploy with key {FAKE_SECRETS[0]} and then restart"),
        rec("s2", f"export GITHUB_TOKEN={FAKE_SECRETS[1]} before pushing"),
        rec("s3", "aws creds", metadata={"note": f"access key {FAKE_SECRETS[2]}"}),
        rec("s4", "the db password is <private>hunter2-correct-horse</private> remember it"),
        rec("s5", "password = Tr0ub4dor&3xyz for staging"),
    ]
    store.add_many(records)
    seen: list[str] = []
    for query in [
        "deploy key restart",
        "GITHUB_TOKEN pushing",
        "aws creds",
        "db password",
        "staging password",
        *FAKE_SECRETS,
        "hunter2",
    ]:
        for h in store.search(query, k=10):
            seen.append(h.summary)
            seen += [t.summary for t in store.timeline(h.id)]
    seen += [e.text + repr(e.metadata) for e in store.get([r["id"] for r in records])]
    seen += [e.text + repr(e.metadata) for e in store.export()]
    blob = "\n".join(seen)
    assert "deploy with key" in blob  # the rest of the text survives
    for secret in [*FAKE_SECRETS, "hunter2-correct-horse", "Tr0ub4dor&3xyz"]:
        assert secret not in blob


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=80))
def test_any_query_gets_an_answer_not_a_crash(tmp_path: Path, query: str) -> None:
    s = open_store(tmp_path / "q.db", embedder="none")
    try:
        s.add_many([rec("a", "alpha beta gamma"), rec("b", "quotes \" and ' and * and NEAR(x y)")])
        hits = s.search(query, k=3)
        assert all(h.id in {"a", "b"} for h in hits)
        assert query_terms(query) == [t for t in query_terms(query) if t]
    finally:
        s.close()


def test_hybrid_search_with_the_local_embedder(backend: str) -> None:
    store = open_store(backend, embedder="minilm")
    try:
        store.add_many(
            [
                rec("pet", "Nate: I adopted a small dog from the shelter last month.", session="a"),
                rec("job", "Nate: My new role at the bank starts on Monday.", session="b"),
                rec("food", "Nate: I have been experimenting with coconut milk ice cream.", session="c"),
            ]
        )
        # no shared words with the answer: only the vectors can find it
        assert store.search("puppy", k=1)[0].id == "pet"
        assert store.stats()["vectors"] == 3
    finally:
        store.close()
    with pytest.raises(RuntimeError, match="embedder"):
        open_store(backend, embedder="openai:text-embedding-3-small")


# -- an OpenAI-compatible embeddings endpoint, and reindexing ------------------------------------------

STOPWORD_QUERY = "what did they do there"  # no lexical terms: anything found came through the vectors


@pytest.fixture
def embeddings_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    server = FakeLLMServer({"steps": []})
    server.start_background()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-for-tests")
    embed._CACHE.clear()
    yield server
    server.shutdown()
    embed._CACHE.clear()


def test_openai_embedder_speaks_the_sdk_wire_format(embeddings_endpoint: FakeLLMServer) -> None:
    embedder = embed.OpenAIEmbedder("fake-embed")
    vectors = embedder.embed(["the staging database", "a sunrise painting"] * 200)  # two requests of <= 256
    assert len(vectors) == 400 and embedder.dim == 64
    assert [len(r["input"]) for r in embeddings_endpoint.embedding_requests] == [256, 144]
    assert embeddings_endpoint.embedding_requests[0]["encoding_format"] == "base64"  # the SDK's default
    expected = fake_embedding("the staging database")
    assert max(abs(a - b) for a, b in zip(vectors[0], expected, strict=True)) < 1e-6


def test_an_unreachable_endpoint_is_one_clear_error() -> None:
    embedder = embed.OpenAIEmbedder("fake-embed", base_url="http://127.0.0.1:9/v1", api_key="sk-fake")
    embedder._connect().max_retries = 0
    with pytest.raises(embed.EmbedderError, match=r"embeddings endpoint http://127.0.0.1:9/v1 failed"):
        embedder.embed(["x"])


@pytest.fixture
def endpoint_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[subprocess.Popen[str]]:
    """``keel dev fake-llm`` in its own process, so a test can take the endpoint down for real."""
    script = tmp_path / "script.json"
    script.write_text('{"steps": []}')
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("keel")), "dev", "fake-llm", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().split()[-1]
    monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-for-tests")
    embed._CACHE.clear()
    yield proc
    proc.kill()
    proc.wait()
    embed._CACHE.clear()


def test_reindex_adds_vectors_and_an_outage_loses_no_entry(
    backend: str, endpoint_process: subprocess.Popen[str]
) -> None:
    plain = open_store(backend, embedder="none")
    plain.add_many(
        [
            rec("t1", "Tim: what did they do there at the memorial?"),
            rec("t2", "John: the kids laid flowers"),
            rec("t3", "unrelated: the build is green", session="s2"),
        ]
    )
    assert plain.search(STOPWORD_QUERY) == []
    plain.close()
    with pytest.raises(RuntimeError, match="reindex"):  # vectors from another embedder would mislead
        _indexed_with_other(backend)

    store = open_store(backend, embedder="none")
    assert store.reindex(embed.get_embedder("openai:fake-embed")) == 3  # type: ignore[arg-type]
    store.close()
    store = open_store(backend, embedder="openai:fake-embed")
    assert store.stats()["vectors"] == 3
    assert store.search(STOPWORD_QUERY, k=1)[0].id == "t1"

    endpoint_process.kill()  # the endpoint goes away mid-session
    endpoint_process.wait()
    assert store.add_many([rec("t4", "Tim: the flowers were tulips")]) == 1
    assert store.search("tulips")[0].id == "t4"  # lexical still answers
    assert store.stats()["vectors"] == 3
    store.close()


def _indexed_with_other(path: str) -> None:
    """A store whose vectors came from another embedder refuses to open with this one."""
    store = open_store(path, embedder="openai:fake-embed")
    store.close()
    open_store(path, embedder="openai:other-model")


def test_common_terms_and_narrow_filters_rank_like_a_plain_query(store: MemoryStore) -> None:
    """Words in most entries add nothing to BM25; filters keep exactly the right entries."""
    store.add_many(
        [
            rec(
                f"n{i}",
                f"alpha note {i}" + (" zulu" if i < 6 else ""),
                project="a" if i % 2 == 0 else "b",
                type="lesson" if i == 7 else "fact",
                session=f"s{i}",
            )
            for i in range(40)
        ]
    )
    hits = store.search("alpha zulu", k=10, project="a")
    ids = [h.id for h in hits]
    assert ids[:3] and set(ids[:3]) == {"n0", "n2", "n4"}  # the informative word decides
    assert len(ids) == 10 and all(int(i[1:]) % 2 == 0 for i in ids)  # then entries with only "alpha"
    assert [h.id for h in store.search("alpha zulu", k=5, type="lesson")] == ["n7"]  # a narrow filter
    in_b = store.search("alpha", k=30, project="b")  # a single word found everywhere still finds
    assert len(in_b) == 20 and all(int(h.id[1:]) % 2 == 1 for h in in_b)


def test_a_rare_word_outranks_a_repeated_common_one_on_both_backends(store: MemoryStore) -> None:
    """BM25's idf: one mention of a word few entries hold beats many mentions of a word most
    entries hold (PostgreSQL's ts_rank has no idf and ranked the repetitions first)."""
    store.add_many(
        [rec(f"c{i}", f"deploy deploy deploy notes {i}", session=f"s{i}") for i in range(12)]
        + [rec("rare", "the kubernetes notes", session="s99")]
    )
    assert store.search("deploy kubernetes", k=3)[0].id == "rare"
    store.add_many([rec(f"x{i}", f"other words {i}", session=f"t{i}") for i in range(20)])
    # now "deploy" is in fewer than half of the entries: it counts, below the rarer word
    ids = [h.id for h in store.search("deploy kubernetes", k=5)]
    assert ids[0] == "rare" and len(ids) == 5 and all(i.startswith("c") for i in ids[1:])
    assert store.forget(["rare"]) == 1
    assert "rare" not in [h.id for h in store.search("deploy kubernetes", k=5)]


class _ForgetsWhileEmbedding:
    """An embedder during whose call another connection forgets an entry (what a concurrent
    `keel mem forget` does to an embedding pass)."""

    name = "test-forgets"
    dim = 8

    def __init__(self, backend: str, victim: str) -> None:
        self.backend = backend
        self.victim: str | None = victim

    def embed(self, texts: Any) -> list[list[float]]:
        if self.victim is not None:
            other = open_store(self.backend, embedder="none")
            assert other.forget([self.victim]) == 1
            other.close()
            self.victim = None
        return [[1.0] + [0.0] * 7 for _ in texts]


def test_an_entry_forgotten_while_its_vector_is_made_keeps_no_vector(backend: str) -> None:
    """`forget` erases for good: a vector (a trace of the erased text) must not land after it."""
    plain = open_store(backend, embedder="none")
    plain.add_many([rec(f"f{i}", f"entry {i} about the release") for i in range(5)])
    plain.close()
    embedder = _ForgetsWhileEmbedding(backend, victim="f2")
    store = open_location(backend, embedder, DEFAULT_MASKER)
    assert store.embed_pending(100) == 5  # read five, one forgotten meanwhile
    assert store.stats()["vectors"] == 4
    assert store.pending_vectors() == 0
    assert [h.id for h in store.search("entry 2 about the release", k=5)].count("f2") == 0
    store.close()


class _Direction:
    """Texts ``big N`` point almost at the query, ``small N`` a little further away."""

    name = "test-direction"
    dim = 8

    def embed(self, texts: Any) -> list[list[float]]:
        out = []
        for text in texts:
            word, _, n = str(text).partition(" ")
            tilt = 0.3 if word == "small" else 0.001 * int(n or 0) if word == "big" else 0.0
            norm = (1.0 + tilt * tilt) ** 0.5
            out.append([1.0 / norm, tilt / norm] + [0.0] * 6)
        return out


def test_a_filtered_vector_search_finds_the_filtered_entries(backend: str) -> None:
    """A project's entries are found by their vectors even when hundreds of other projects'
    entries lie nearer (an approximate index searched first and filtered after would lose them)."""
    embedder = _Direction()
    store = open_location(backend, embedder, DEFAULT_MASKER)
    store.add_many([rec(f"b{i}", f"big {i}", project="big", session=f"s{i % 7}") for i in range(400)])
    store.add_many([rec(f"s{i}", f"small {i}", project="small", session="t") for i in range(3)])
    hits = store.search("query", k=5, project="small")
    assert sorted(h.id for h in hits) == ["s0", "s1", "s2"]
    store.close()
