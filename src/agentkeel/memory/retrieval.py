"""The retrieval recipe's pieces that need no database: the constants (``Tuning``), query
terms, weighted reciprocal rank fusion, each entry's session context, and the hits a search
hands back (one masked line each, within a token budget)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, cast

import msgspec

from agentkeel.memory.model import Hit, one_line
from agentkeel.memory.privacy import Masker
from agentkeel.memory.sql import Row

T = TypeVar("T")
CONTEXT_SPAN = 2
CANDIDATES = 100
# With no lexical hit, vector neighbours are kept only from a cosine calibrated for the embedder:
# nearest neighbours always exist, so a search whose words match nothing would otherwise return
# unrelated entries. MiniLM on LoCoMo dev (bench/memory_relevance_floor.py): off-topic queries'
# best cosine is at most 0.33 (median 0.24); a question's best evidence turn is below 0.35 for
# 10 % of questions, which matters only when none of the question's words match anywhere. An
# embedder not calibrated here (another model's cosines sit on another scale) has no floor.
RELEVANCE_FLOORS = {"minilm": 0.35}
RELEVANCE_FLOOR = RELEVANCE_FLOORS["minilm"]


class Tuning(msgspec.Struct, frozen=True):
    """The retrieval constants: reciprocal rank fusion's k, the weight of each ranked list, the
    lexical weights of an entry's own text, its session context and its date words, and the
    share of entries above which a query term counts as common: it is then matched in an
    entry's own text and date words only, not in its session context (1.0: never); and how
    many of the fused first entries the learned reranker (``memory.rerank``) reorders (0: none)."""

    rrf_k: float = 5.0
    lexical: float = 0.55
    vector: float = 0.30
    context: float = 0.15
    fields: tuple[float, float, float] = (1.0, 0.4, 2.0)
    common: float = 0.15
    rerank: int = 30


TUNING = Tuning()
RRF_K = TUNING.rrf_k

STOPWORDS = frozenset(
    (
        "a an the is are was were be been to of in on at for and or but with what when where who whom which why how "
        "did do does has have had i you he she it they we my your his her their our me him them this that these those "
        "there as by from about into over after before not no so if then than too very can could would should will "
        "just also any some all"
    ).split()
)
_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(query: str) -> list[str]:
    """The content words of a query, lower-cased, without stopwords, deduplicated in order."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if word not in STOPWORDS and word not in seen:
            seen[word] = None
    return list(seen)


def rrf(lists: Sequence[tuple[float, Sequence[int]]], k: float = RRF_K) -> dict[int, float]:
    """Weighted reciprocal rank fusion: sum of weight / (k + rank) over the lists (rank from 1)."""
    scores: dict[int, float] = {}
    for weight, ranked in lists:
        for rank, rid in enumerate(ranked, start=1):
            scores[rid] = scores.get(rid, 0.0) + weight / (k + rank)
    return scores


def _contexts(
    sequence: list[tuple[int, str, list[float] | None]], first: int = 0, last: int | None = None
) -> list[tuple[int, str, list[float] | None]]:
    """(rid, context text, context vector) of the entries ``first:last`` of a session sequence."""
    out = []
    for i in range(first, len(sequence) if last is None else last):
        around = [
            sequence[j] for j in range(i - CONTEXT_SPAN, i + CONTEXT_SPAN + 1) if j != i and 0 <= j < len(sequence)
        ]
        out.append(
            (sequence[i][0], " ".join(t for _, t, _ in around), _mean([v for _, _, v in around if v is not None]))
        )
    return out


def _mean(vectors: list[list[float]]) -> list[float] | None:
    """The unit mean of some unit vectors (numpy is present whenever an embedder is)."""
    if not vectors:
        return None
    import numpy as np

    total = np.asarray(vectors, dtype=np.float32).sum(0)
    norm = float(np.linalg.norm(total)) or 1.0
    result: list[float] = (total / norm).tolist()
    return result


class _Background(Generic[T]):
    """A call run on its own thread; ``result()`` waits for it and returns or raises what it did."""

    def __init__(self, call: Callable[[], T]) -> None:
        self._call = call
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="keel-memory-query", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return cast(T, self._value)


def summarise(row: Row, masker: Masker, width: int = 140) -> str:
    title = row.metadata.get("summary") if isinstance(row.metadata.get("summary"), str) else None
    return one_line(masker.text(title or row.text), width)


def to_hit(row: Row, score: float, masker: Masker) -> Hit:
    return Hit(
        id=row.id,
        score=score,
        type=row.type,
        timestamp=row.timestamp,
        session=row.session,
        project=row.project,
        summary=summarise(row, masker),
    )


def within_budget(items: list[Any], budget_tokens: int | None, cost: Any) -> list[Any]:
    if budget_tokens is None:
        return items
    kept: list[Any] = []
    spent = 0
    for item in items:
        tokens = cost(item)
        if kept and spent + tokens > budget_tokens:
            break
        kept.append(item)
        spent += tokens
    return kept
