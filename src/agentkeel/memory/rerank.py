"""A learned reordering of the fused candidates: a linear model over features of each
(query, candidate) pair, with weights trained offline and shipped here as constants.

No model call and nothing backend-specific: the features come from the ranked lists a store
already produced (``StoreBase.candidates``), their fusion, and the candidates' own rows (text,
session, timestamp), so SQLite and PostgreSQL rerank the same way. Pure Python (the pool is
a few dozen entries; numpy is not needed here).

The weights are fitted by ``bench/locomo_rerank.py`` (listwise softmax loss, L2) and chosen by
its cross-validation: trained on three LoCoMo conversations, scored on the other two, for all
ten splits. Every feature is generic: list ranks, the fused score, how much of the query's
words an entry's text holds (plain, idf-weighted over the pool, close together), numbers,
capitalised words, time words for a "when" question, the entry's length, and its session
neighbours' fused scores. No feature reads a speaker label or any other LoCoMo convention.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from agentkeel.memory.retrieval import STOPWORDS

if TYPE_CHECKING:
    from agentkeel.memory.sql import Row

DEPTH = 30  # candidates reordered (the fused top DEPTH); the rest keep their fused order
LISTS = ("lexical", "vector", "context")
# each feature's weight: trained on all five dev conversations, their turns with and without the
# speaker label together (keel's own entries have none), pool 30, L2 1e-4: bench/locomo_rerank.py --mixed
TRAINED = {
    "lexical_rank": 0.7643,
    "lexical_log_rank": 0.8926,
    "vector_rank": 0.0527,
    "vector_log_rank": 0.8642,
    "context_rank": 0.0612,
    "context_log_rank": 0.2569,
    "fused": 0.9473,
    "fused_log_rank": 0.5142,
    "coverage": 0.0584,
    "idf_coverage": 2.5994,
    "all_terms": -0.0107,
    "proximity": 0.0049,
    "capitalised": -0.9227,
    "numbers": 1.5896,
    "when_time": 2.6034,
    "length": 4.5619,
    "previous_fused": -0.6529,
    "next_fused": 1.0808,
    "question": -0.6209,
    "previous_coverage": -2.2071,
    "previous_question_coverage": 4.8498,
    "next_coverage": -0.7953,
    "second_previous_coverage": 1.0995,
    "previous_vector_rank": 2.1574,
    "previous_lexical_rank": 1.318,
    "session_share": 3.4623,
    "when_lexical": 1.6353,
    "when_vector": 0.3425,
}
FEATURES = tuple(TRAINED)
WEIGHTS: tuple[float, ...] = tuple(TRAINED.values())

_WORD = re.compile(r"\w+", re.UNICODE)
_STEMS = re.compile(r"(\w{1,5})\w*", re.UNICODE)  # each word's first five letters: ``stem`` of each ``_WORD``
_CAPITALISED = re.compile(r"\b[A-Z][a-z]\w*")
_NUMBER = re.compile(r"\d+")
_TIME_WORDS = frozenset(
    "yesterday today tomorrow tonight ago last next week weeks weekend month months year years day days "
    "morning evening night since recently january february march april may june july august september "
    "october november december monday tuesday wednesday thursday friday saturday sunday".split()
)
_WINDOW = 8  # words: how close query words must sit to count as together
_CHARS = 400  # of an entry's text read for its words (a long tool output costs no more than a dialog turn)


def stem(word: str) -> str:
    """A crude stem shared by query and entry: its first five letters."""
    return word[:5]


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _log_rank(rank: int, size: int) -> float:
    return 1.0 - math.log(rank) / math.log(size + 1) if rank else 0.0


def features(
    query: str,
    lists: Mapping[str, Sequence[int]],
    fused: Mapping[int, float],
    pool: Sequence[int],
    texts: Mapping[int, str],
    sessions: Mapping[int, tuple[str, str]],
) -> list[list[float]]:
    """One row of ``FEATURES`` per rid of ``pool`` (the fused order's first entries)."""
    terms = [stem(w) for w in dict.fromkeys(_words(query)) if w not in STOPWORDS]
    first_word = query.strip().split(" ", 1)[0] if query.strip() else ""
    capitalised = {w.lower() for w in _CAPITALISED.findall(query) if w != first_word}
    numbers = set(_NUMBER.findall(query))
    asks_when = bool(re.match(r"\s*when\b", query, re.IGNORECASE))
    ranks = {name: {rid: i for i, rid in enumerate(lists.get(name, ()), start=1)} for name in LISTS}
    sizes = {name: max(1, len(lists.get(name, ()))) for name in LISTS}
    position = {rid: i for i, rid in enumerate(pool, start=1)}
    top = max((fused.get(rid, 0.0) for rid in pool), default=0.0) or 1.0
    wanted = set(terms)
    parsed: dict[int, tuple[list[str], set[str]]] = {}
    stemmed: dict[int, set[str]] = {}

    def words_of(rid: int) -> tuple[list[str], set[str]]:
        """An entry's words and their stems (``stem(w)`` is ``w[:5]``), parsed once per search."""
        got = parsed.get(rid)
        if got is None:
            words = _words(texts.get(rid, "")[:_CHARS])
            got = parsed[rid] = (words, {w[:5] for w in words})
            stemmed[rid] = got[1]
        return got

    def stems_of(rid: int) -> set[str]:
        """An entry's stems alone (its neighbours' words are only looked up)."""
        got = stemmed.get(rid)
        if got is None:
            got = stemmed[rid] = set(_STEMS.findall(texts.get(rid, "")[:_CHARS].lower()))
        return got

    held = {rid: words_of(rid)[1] for rid in pool}
    df = {t: sum(t in held[rid] for rid in pool) for t in terms}
    idf = {t: math.log(1.0 + len(pool) / (1.0 + df[t])) for t in terms}
    idf_total = sum(idf.values()) or 1.0

    def neighbour(rid: int, step: int) -> float:
        other = rid + step
        if other in sessions and sessions[other] == sessions.get(rid):
            return fused.get(other, 0.0) / top
        return 0.0

    shares: dict[int, float] = {}

    def beside(rid: int, step: int) -> float:
        """The idf-weighted share of the query's words in the session neighbour's text."""
        other = rid + step
        if not terms or other not in texts or sessions.get(other) != sessions.get(rid):
            return 0.0
        share = shares.get(other)
        if share is None:
            have = stems_of(other)
            share = shares[other] = sum(idf[t] for t in terms if t in have) / idf_total
        return share

    mass: dict[tuple[str, str] | None, float] = {}
    for rid in pool:
        mass[sessions.get(rid)] = mass.get(sessions.get(rid), 0.0) + fused.get(rid, 0.0)
    total_mass = sum(mass.values()) or 1.0

    rows = []
    for rid in pool:
        row: list[float] = []
        for name in LISTS:
            rank = ranks[name].get(rid, 0)
            row += [1.0 / (1.0 + rank) if rank else 0.0, _log_rank(rank, sizes[name])]
        row += [fused.get(rid, 0.0) / top, _log_rank(position[rid], len(pool))]
        have = held[rid]
        matched = [t for t in terms if t in have]
        row.append(len(matched) / len(terms) if terms else 0.0)
        row.append(sum(idf[t] for t in matched) / idf_total if terms else 0.0)
        row.append(1.0 if terms and len(matched) == len(terms) else 0.0)
        tokens = parsed[rid][0]
        row.append(_proximity(tokens, wanted) / len(terms) if len(terms) > 1 and len(matched) > 1 else 0.0)
        words = set(tokens)
        row.append(len(capitalised & words) / len(capitalised) if capitalised else 0.0)
        row.append(len(numbers & words) / len(numbers) if numbers else 0.0)
        row.append(1.0 if asks_when and (_TIME_WORDS & words or any(w.isdigit() for w in words)) else 0.0)
        row.append(math.log1p(len(tokens)) / 5.0)
        row += [neighbour(rid, -1), neighbour(rid, 1)]
        row.append(1.0 if "?" in texts.get(rid, "") else 0.0)
        before, after = beside(rid, -1), beside(rid, 1)
        row.append(before)
        row.append(before if "?" in texts.get(rid - 1, "") else 0.0)
        row.append(after)
        row.append(beside(rid, -2) if sessions.get(rid - 1) == sessions.get(rid) else 0.0)
        same = sessions.get(rid - 1) == sessions.get(rid)
        for name in ("vector", "lexical"):
            rank = ranks[name].get(rid - 1, 0) if same else 0
            row.append(1.0 / (1.0 + rank) if rank else 0.0)
        row.append(mass.get(sessions.get(rid), 0.0) / total_mass)
        row += [row[1] if asks_when else 0.0, row[3] if asks_when else 0.0]
        rows.append(row)
    return rows


def _proximity(words: list[str], terms: set[str]) -> int:
    """The most distinct query terms found within any ``_WINDOW`` consecutive words (0 or >= 2)."""
    best = 0
    hits = [(i, w[:5]) for i, w in enumerate(words) if w[:5] in terms]
    for start, (i, _) in enumerate(hits):
        seen = {s for j, s in hits[start:] if j - i < _WINDOW}
        best = max(best, len(seen))
    return best if best >= 2 else 0


def rerank(
    query: str,
    lists: Mapping[str, Sequence[int]],
    fused: Mapping[int, float],
    pool: Sequence[int],
    texts: Mapping[int, str],
    sessions: Mapping[int, tuple[str, str]],
    weights: Sequence[float] = WEIGHTS,
) -> list[tuple[int, float]]:
    """``pool`` reordered by the linear model: (rid, score), best first (ties keep fused order)."""
    if len(weights) != len(FEATURES):
        raise ValueError(f"the reranker takes {len(FEATURES)} weights, not {len(weights)}")
    rows = features(query, lists, fused, pool, texts, sessions)
    scored = [
        (sum(map(operator.mul, weights, row)), -i, rid) for i, (rid, row) in enumerate(zip(pool, rows, strict=True))
    ]
    scored.sort(reverse=True)
    return [(rid, score) for score, _, rid in scored]


def reorder(
    query: str,
    lists: Mapping[str, Sequence[int]],
    fused: dict[int, float],
    ranked: list[int],
    rows_of: Callable[[Sequence[int]], Mapping[int, Row]],
    depth: int = DEPTH,
    weights: Sequence[float] = WEIGHTS,
) -> tuple[list[int], dict[int, float], dict[int, Row]]:
    """The fused order with its first ``depth`` entries reordered by the model.

    Returns the new order, its scores (the pool's softmax probabilities under the model, the
    rest their fused scores scaled below the pool's lowest, so every score stays positive and a
    recency decay still multiplies them), and the rows read: the pool's and their session
    neighbours' (rid - 2 to rid + 1), one read for all.
    """
    pool = ranked[:depth]
    around = {r + step for r in pool for step in (-2, -1, 1)} - set(pool)
    rows = dict(rows_of([*pool, *sorted(r for r in around if r > 0)]))
    pool = [r for r in pool if r in rows]
    if len(pool) < 2:
        return ranked, fused, rows
    texts = {rid: row.text for rid, row in rows.items()}
    sessions = {rid: (row.project, row.session) for rid, row in rows.items()}
    order = rerank(query, lists, fused, pool, texts, sessions, weights)
    top = order[0][1]
    mass = [math.exp(score - top) for _, score in order]
    total = sum(mass)
    scores = {rid: m / total for (rid, _), m in zip(order, mass, strict=True)}
    rest = [r for r in ranked[depth:] if r not in scores]
    if rest:
        floor = min(scores.values()) * 0.5
        best = fused[rest[0]] or 1.0
        scores.update({rid: floor * fused[rid] / best for rid in rest})
    return [rid for rid, _ in order] + rest, scores, rows
