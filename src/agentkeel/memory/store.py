"""The memory store: its public Protocol, the ``Backend`` primitives a database gives it, and the
retrieval recipe written once over them (``StoreBase``) for every backend (``memory.backends``).

The log is append-only: records are inserted, never rewritten, except that consolidation
marks an entry ``superseded_by`` a newer one and ``forget`` (the user's explicit request)
erases an entry's text. The indexes beside the log are derived and can be rebuilt.

Retrieval (the same on every backend; tuned once on LoCoMo, never per question):

1. Lexical: BM25 over three fields: the entry's own text (weight 1), its context (the
   text of up to two entries before and after it in the same session, weight 0.4), and
   the words of its date (``8 May 2023 Monday``, weight 2), so a question whose words sit
   in the turn before the answer still finds the answer, and "in May 2023" finds May. On
   both backends a word held by more than ``Tuning.common`` of the entries counts in the
   entry's own text and date only (``SQLiteStore._lexical``, ``PostgresStore._bm25``).
2. Vectors, when an embedder is configured: cosine against the entry's own vector and
   against the mean of its neighbours' vectors (the query is embedded on a second thread
   while step 1 reads the word index).
3. Weighted reciprocal rank fusion of those lists, then optional recency decay and the
   filters (project, session, type, time, file).
4. A learned reordering of the fused first ``Tuning.rerank`` entries (``memory.rerank``: a
   linear model over the lists' ranks and the entries' own and session neighbours' words;
   weights trained offline, no model call), before the recency decay; the same on both backends.

The constants (``Tuning``: the fusion's k and list weights, the three lexical field weights)
are chosen by cross-validation on LoCoMo dev conversations (``bench/locomo_cv.py``: tuned on
three conversations, scored on the other two, every fold), never per conversation or question.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agentkeel.memory.backends import Backend
from agentkeel.memory.backends import MemoryStore as MemoryStore  # where its callers import it from
from agentkeel.memory.embed import Embedder, EmbedderError, QueryEmbedder
from agentkeel.memory.model import Entry, Hit, Record, date_words, estimate_tokens
from agentkeel.memory.privacy import Masker
from agentkeel.memory.retrieval import (  # noqa: F401  (query_terms, rrf, TUNING: the store's public recipe)
    CANDIDATES,
    CONTEXT_SPAN,
    RELEVANCE_FLOORS,
    RRF_K,
    STOPWORDS,
    TUNING,
    Tuning,
    _Background,
    _contexts,
    query_terms,
    rrf,
    summarise,
    to_hit,
    within_budget,
)
from agentkeel.memory.sql import Filters, Row

log = logging.getLogger(__name__)


class StoreBase(Backend):
    """The parts of a store that do not depend on the database: masking, context, fusion,
    budgets; written against ``Backend``, whose primitives a backend implements."""

    masker: Masker
    embedder: Embedder | None
    tuning: Tuning = TUNING

    # -- defaults of the optional primitives ---------------------------------------------------------
    def _begin_batch(self) -> None:
        pass

    def _end_read(self) -> None:
        pass

    def _nearest_soon(self, filters: Filters) -> Callable[[list[float], str, int], list[int]] | None:
        """``_vector`` with its database reads done now: a call that needs no connection, so a
        search runs it on the query's thread right after the embedding, beside the word search.
        None (this default) leaves ``_vector`` to run after the word search."""
        return None

    def check(self, full: bool = False) -> list[str]:
        """What is wrong with the store, one short phrase per problem; [] when healthy."""
        return []

    def _live_rows(self, after_rid: int, limit: int) -> list[Row]:
        """Live entries past ``after_rid`` (superseded ones included), in rid order (in the open transaction)."""
        return self._scan(Filters(include_superseded=True), after_rid, limit)

    # -- views ---------------------------------------------------------------------------------------
    def has_entries(self, project: str | None = None) -> bool:
        """Whether any live entry exists (of ``project`` when given): one indexed row read."""
        return bool(self._latest(Filters.build(project=project), 1))

    def recent(self, types: Sequence[str], project: str | None = None, limit: int = 5) -> list[Entry]:
        """The newest entries of some types (session summaries at session start, the dashboard's feed)."""
        return [row.entry(self.masker) for row in self._latest(Filters.build(project=project, type=list(types)), limit)]

    def export(self, **filters: Any) -> Iterator[Entry]:
        """Every entry passing the filters (superseded ones included), masked, in insertion order."""
        flt = Filters.build(include_superseded=True, **filters)
        last = 0
        while True:
            with self._lock:
                rows = self._scan(flt, last, 500)
                self._end_read()
            if not rows:
                return
            for row in rows:
                yield row.entry(self.masker)
            last = rows[-1].rid

    def sessions(self, project: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Sessions, newest first: id, project, first and last timestamp, entry count, first prompt."""
        return [
            {
                "session": session,
                "project": proj,
                "first": first,
                "last": last,
                "entries": int(count),
                "prompt": summarise(prompt, self.masker) if prompt is not None else "",
            }
            for proj, session, first, last, count, prompt in self._session_list(project, limit)
        ]

    def _set_context(self, rid: int, context: str, vector: list[float] | None) -> None:
        self._set_contexts([(rid, context, vector)])

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the store's lock for a write; undo the open transaction if it fails."""
        with self._lock:
            try:
                yield
            except BaseException:
                self._rollback()
                raise

    def add_many(self, records: Iterable[dict[str, Any] | Record]) -> int:
        with self._writing():
            return self._add_many(records)

    def embed_pending(self, limit: int = 512) -> int:
        with self._writing():
            count = self._embed_pending(limit)
            self._end_read()  # a no-op leaves a read transaction open on PostgreSQL
            return count

    def reindex(self, embedder: Embedder, batch: int = 256, progress: Callable[[int], None] | None = None) -> int:
        with self._writing():
            return self._reindex(embedder, batch, progress)

    def pending_vectors(self) -> int:
        """How many live entries wait for a vector (no embedding model needed to count them)."""
        with self._lock:
            count = self._pending(self._vector_mark())
            self._end_read()
        return count

    # -- writing -----------------------------------------------------------------------------------
    def _add_many(self, records: Iterable[dict[str, Any] | Record]) -> int:
        """Append records (masked), index them, and refresh the context of their session neighbours.

        Records whose id is already stored are skipped (re-importing is safe); the count of new
        records is returned.
        """
        batch = [Record.from_dict(r) for r in records]
        if not batch:
            return 0
        known = self._known_ids([r.id for r in batch])
        fresh: list[Record] = []
        seen: set[str] = set()
        for record in batch:
            if record.id in known or record.id in seen:
                continue
            seen.add(record.id)
            fresh.append(
                Record(
                    id=record.id,
                    type=record.type,
                    text=self.masker.text(record.text),
                    project=record.project,
                    session=record.session,
                    timestamp=record.timestamp,
                    metadata=self.masker.obj(record.metadata),
                )
            )
        if not fresh:
            return 0
        vectors: list[list[float] | None] = [None] * len(fresh)
        if self.embedder is not None:
            try:
                vectors = list(self.embedder.embed([r.text for r in fresh]))
            except EmbedderError as exc:  # the entries matter more than their vectors
                log.warning("memory: %s; stored without vectors (`keel mem reindex` fills them in)", exc)
        rids = self._insert([(r, date_words(r.ts), v) for r, v in zip(fresh, vectors, strict=True)])
        self._refresh_contexts(fresh, rids, vectors)
        self._commit()
        return len(fresh)

    def _refresh_contexts(self, fresh: list[Record], rids: list[int], vectors: list[list[float] | None]) -> None:
        groups: dict[tuple[str, str], list[tuple[int, str, list[float] | None]]] = {}
        for record, rid, vector in zip(fresh, rids, vectors, strict=True):
            if record.session:
                groups.setdefault((record.project, record.session), []).append((rid, record.text, vector))
        contexts: list[tuple[int, str, list[float] | None]] = []
        for (project, session), new in groups.items():
            new_rids = {rid for rid, _, _ in new}
            tail = [
                (row.rid, row.text, vector)
                for row, vector in self._session_tail(project, session, 2 * CONTEXT_SPAN + len(new))
                if row.rid not in new_rids
            ]
            contexts += _contexts(tail + new, first=max(0, len(tail) - CONTEXT_SPAN))
        self._set_contexts(contexts)

    def _write_contexts(
        self, sequence: list[tuple[int, str, list[float] | None]], first: int = 0, last: int | None = None
    ) -> None:
        """Each entry's context: the text and mean vector of its ±CONTEXT_SPAN session neighbours."""
        self._set_contexts(_contexts(sequence, first, last))

    def _embed_pending(self, limit: int) -> int:
        """Give vectors to entries stored without one: those a session captured (sessions index
        lexically so that no session pays for loading an embedding model) or that arrived while
        an endpoint was down. A search never does this (it would wait on the model); entries
        still waiting are found by their words until an idle session's background pass
        (``background.EmbeddingPass``) or `keel mem embed` gives them vectors."""
        if self.embedder is None:
            return 0
        mark = self._vector_mark()
        rows, top = self._unembedded(mark, limit)
        if not rows:
            if top > mark:
                self._begin_batch()
                self._set_vector_mark(top)
                self._commit()
            return 0
        try:
            vectors = self.embedder.embed([r.text for r in rows])
        except EmbedderError as exc:
            log.warning("memory: %s; %d entries wait for their vectors", exc, len(rows))
            return 0
        self._begin_batch()
        self._put_vectors([(r.rid, v) for r, v in zip(rows, vectors, strict=True)])
        fresh = {r.rid for r in rows}
        for project, session in {(r.project, r.session) for r in rows if r.session}:
            sequence = [(row.rid, row.text, v) for row, v in self._session_tail(project, session, 1 << 30)]
            near = {
                j
                for i, (rid, _, _) in enumerate(sequence)
                if rid in fresh
                for j in range(i - CONTEXT_SPAN, i + CONTEXT_SPAN + 1)
            }
            for i in sorted(j for j in near if 0 <= j < len(sequence)):
                self._write_contexts(sequence, first=i, last=i + 1)
        self._set_vector_mark(top if len(rows) < limit else rows[-1].rid)
        self._commit()
        return len(rows)

    def _reindex(self, embedder: Embedder, batch: int, progress: Callable[[int], None] | None) -> int:
        """Rebuild every vector with ``embedder``: after switching embedders, or to fill in the
        vectors an unreachable endpoint left out. Entries and the lexical index are untouched."""
        if not embedder.dim:
            embedder.embed(["dimension probe"])  # an endpoint tells its dimension by answering
        self._reset_vectors(embedder.name, embedder.dim)
        self._set_vector_mark(0)
        self._commit()
        self.embedder = embedder
        done, last = 0, 0
        while rows := self._live_rows(last, batch):
            vectors = embedder.embed([r.text for r in rows])
            self._begin_batch()
            self._put_vectors([(r.rid, v) for r, v in zip(rows, vectors, strict=True)])
            self._commit()
            done += len(rows)
            last = rows[-1].rid
            if progress is not None:
                progress(done)
        for project, session in self._sessions():
            self._begin_batch()
            self._write_contexts([(row.rid, row.text, v) for row, v in self._session_tail(project, session, 1 << 30)])
            self._commit()
        return done

    def supersede(self, old_id: str, new_record: dict[str, Any] | Record) -> str:
        """Add the new record and mark the old one superseded (kept, hidden from search)."""
        record = Record.from_dict(new_record)
        metadata = {**record.metadata, "supersedes": old_id}
        record = Record(record.id, record.type, record.text, record.project, record.session, record.timestamp, metadata)
        with self._writing():  # an id already stored is skipped: a re-run after a kill adds nothing twice
            self._add_many([record])
            self._mark_superseded(old_id, record.id)
            self._commit()
        return record.id

    # -- reading -----------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        k: int = 10,
        budget_tokens: int | None = None,
        recency_half_life_days: float | None = None,
        **filters: Any,
    ) -> list[Hit]:
        """Layer 1: the k best entries as ids + one-line summaries, within budget_tokens if given."""
        flt = Filters.build(**filters)
        lists = self.candidates(query, flt)
        scores = self.fuse(lists)
        if not scores:
            return []
        ranked = sorted(scores, key=lambda rid: -scores[rid])
        rows: dict[int, Row] = {}
        newest: float | None = None
        if self.tuning.rerank > 1 and len(ranked) > 1:
            from agentkeel.memory.rerank import reorder

            candidates = ranked
            ranked, scores, rows = reorder(query, lists, scores, ranked, self._rows_by_rid, self.tuning.rerank)
            pool = sum(1 for rid in candidates[: self.tuning.rerank] if rid in rows)
            if recency_half_life_days and pool >= max(k, 2):
                # the rest scores below half the pool's lowest, and a decay of at most a half
                # cannot lift it past any pool entry: only the pool's rows are read (and the
                # newest time among all the candidates, which the decay is measured from)
                newest = self._newest(candidates)
                ranked = ranked[:pool]
        if recency_half_life_days is None:
            ranked = ranked[:k]
        if missing := [rid for rid in ranked if rid not in rows]:
            rows.update(self._rows_by_rid(missing))
        if recency_half_life_days:
            found = [rid for rid in ranked if rid in rows]
            if newest is None:
                newest = max((rows[rid].ts for rid in found), default=0.0)
            half_life = recency_half_life_days * 86400.0
            for rid in found:
                scores[rid] *= 0.5 + 0.5 * 0.5 ** (max(0.0, newest - rows[rid].ts) / half_life)
            ranked = sorted(found, key=lambda rid: -scores[rid])[:k]
        hits = [to_hit(rows[rid], scores[rid], self.masker) for rid in ranked if rid in rows]
        return within_budget(hits, budget_tokens, lambda h: h.tokens)

    def candidates(self, query: str, flt: Filters, vector: list[float] | None = None) -> dict[str, Sequence[int]]:
        """The ranked candidate lists a search fuses: ``lexical`` (BM25 with the field weights of
        ``tuning``) and, with an embedder, ``vector`` and ``context`` (cosine against the entry's
        own and its neighbours' mean vector). ``vector`` is the query's, when already known."""
        lists: dict[str, Sequence[int]] = {}
        terms = query_terms(query)
        embedding: _Background[tuple[list[float] | None, dict[str, list[int]]]] | None = None
        if vector is None and terms and self.embedder is not None and query.strip():
            # the query's vector is computed on another thread while the word index is searched
            # (both release the GIL: onnxruntime's and numpy's products, SQLite's and psycopg's
            # calls), and compared there too when the store can do it off its connection
            nearest = self._nearest_soon(flt)

            def embed_and_compare() -> tuple[list[float] | None, dict[str, list[int]]]:
                found = self._embed_query(query)
                if found is None or nearest is None:
                    return found, {}
                return found, {column: nearest(found, column, CANDIDATES) for column in ("own", "context")}

            embedding = _Background(embed_and_compare)
        if terms:
            lists["lexical"] = self._lexical(terms, flt, CANDIDATES)
        compared: dict[str, list[int]] = {}
        if embedding is not None:
            vector, compared = embedding.result()
        elif vector is None:
            vector = self._embed_query(query)
        if vector is not None:
            for name, column in (("vector", "own"), ("context", "context")):
                got = compared.get(column)
                lists[name] = got if got is not None else self._vector(vector, column, flt, CANDIDATES)
            floor = RELEVANCE_FLOORS.get(self.embedder.name) if self.embedder is not None else None
            if floor is not None and not lists.get("lexical"):  # no word matched: only what means the same
                close = self._relevant(vector, {rid for name in ("vector", "context") for rid in lists[name]}, floor)
                for name in ("vector", "context"):
                    lists[name] = [rid for rid in lists[name] if rid in close]
        return lists

    def _relevant(self, vector: list[float], rids: set[int], floor: float) -> set[int]:
        """The entries among ``rids`` whose own vector's cosine with ``vector`` reaches ``floor``."""
        if not rids:
            return set()
        import numpy as np

        found = self._own_vectors(sorted(rids))
        if not found:
            return set()
        keys = list(found)
        matrix = np.asarray([found[k] for k in keys], dtype=np.float32)
        query = np.asarray(vector, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(query)) or 1.0)
        cosines = (matrix @ query) / np.where(norms > 0, norms, 1.0)
        return {k for k, c in zip(keys, cosines.tolist(), strict=True) if c >= floor}

    def fuse(self, lists: dict[str, Sequence[int]], tuning: Tuning | None = None) -> dict[int, float]:
        """Weighted reciprocal rank fusion of ``candidates`` with the weights of ``tuning``."""
        t = tuning or self.tuning
        weights = {"lexical": t.lexical, "vector": t.vector, "context": t.context}
        return rrf([(weights[name], ranked) for name, ranked in lists.items()], t.rrf_k)

    def _embed_query(self, query: str) -> list[float] | None:
        if self.embedder is None or not query.strip():
            return None
        try:
            if isinstance(self.embedder, QueryEmbedder):
                return self.embedder.embed_query(query)
            return self.embedder.embed([query])[0]
        except EmbedderError as exc:  # lexical results still answer
            log.warning("memory: %s; searching without vectors", exc)
            return None

    def timeline(self, anchor: str, before: int = 3, after: int = 3, budget_tokens: int | None = None) -> list[Hit]:
        """Layer 2: the entries around ``anchor`` in its session, in order, as one-line summaries."""
        rows = self._rows_by_id([anchor])
        if not rows:
            return []
        around = self._neighbours(rows[0], before, after)
        hits = [to_hit(row, 1.0 if row.id == anchor else 0.0, self.masker) for row in around]
        if budget_tokens is None:
            return hits
        # keep the anchor, then grow outwards while the budget lasts
        index = next(i for i, h in enumerate(hits) if h.id == anchor)
        kept = {index}
        spent = hits[index].tokens
        for distance in range(1, len(hits)):
            for j in (index - distance, index + distance):
                if 0 <= j < len(hits) and spent + hits[j].tokens <= budget_tokens:
                    kept.add(j)
                    spent += hits[j].tokens
        return [hits[i] for i in sorted(kept)]

    def get(self, ids: Sequence[str], budget_tokens: int | None = None) -> list[Entry]:
        """Layer 3: full entries, masked, in the order asked; the last one is cut to fit the budget."""
        by_id = {row.id: row for row in self._rows_by_id(list(ids))}
        entries = [by_id[i].entry(self.masker) for i in ids if i in by_id]
        if budget_tokens is None:
            return entries
        kept: list[Entry] = []
        spent = 0
        for entry in entries:
            tokens = estimate_tokens(entry.text)
            if spent + tokens > budget_tokens:
                room = (budget_tokens - spent) * 4
                if room > 80 or not kept:
                    kept.append(
                        Entry(
                            entry.id,
                            entry.type,
                            entry.project,
                            entry.session,
                            entry.timestamp,
                            entry.text[: max(room, 80)] + "… [truncated: ask for this id alone to read the rest]",
                            entry.metadata,
                            entry.superseded_by,
                        )
                    )
                break
            kept.append(entry)
            spent += tokens
        return kept
