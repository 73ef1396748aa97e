"""The team memory store: PostgreSQL with full-text search and pgvector, same Protocol as SQLite.

Lexical search ranks as SQLite's does: BM25 computed the way FTS5 computes it (idf, k1 = 1.2,
b = 0.75, the per-field weights of ``Tuning.fields`` on the term frequencies) over the same
words, cut by FTS5's own tokenizer (``pg_terms``), with the same rules for common words
(``_lexical``). The words are kept in a postings table (``keel_terms``: term, entry, its count
in the own text, the session context and the date words, the entry's length) with each term's
entry count (``keel_df``: anywhere, and in the own text or date words). ``ts_rank`` has no
idf, and scoring every match of an OR-query made a 100k-entry search take half a second; with
postings, terms found in more than half of the entries (idf 0 under BM25) are left out as
SQLite leaves them out, and only the postings of the others are read. The entry count and
token total BM25 needs are kept in ``keel_meta``.

Vectors live in pgvector columns with HNSW indexes (cosine); a filtered search (one project,
one session...) scans its entries exactly, since HNSW would find the nearest entries of the
whole store and then drop those outside the filter. Needs ``pip install 'agentkeel[postgres]'``
(psycopg) and the ``vector`` extension.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from typing import Any

from agentkeel.memory.backends import refuse_other_embedder
from agentkeel.memory.embed import Embedder
from agentkeel.memory.model import EVENT_TYPES, Record
from agentkeel.memory.pg_terms import impact, tokenizer
from agentkeel.memory.privacy import DEFAULT_MASKER, Masker
from agentkeel.memory.retrieval import TUNING
from agentkeel.memory.sql import (
    COLUMNS,
    EVENT_COLUMNS,
    Dialect,
    Filters,
    Row,
    SQLBackend,
    event_values,
    row_of,
    where_clause,
)
from agentkeel.memory.store import StoreBase

POSTGRES = Dialect(
    table="keel_events",
    vectors="keel_vectors",
    ph="%s",
    live="NOT e.forgotten",
    any_of=lambda n: "e.type = ANY(%s)",
    list_param=True,
    contains="strpos(e.files, %s) > 0",
)
# 2: postings carry their entry's project and their impact (the BM25 term factor);
# 3: FTS5's words (``pg_terms``) instead of a tsvector's, and each term's count outside the context
POSTINGS_VERSION = "3"
IMPACT_DEPTH = 2000  # postings read per query term, best impact first
RESCORE = 400  # best candidates given to the filters


class PostgresStore(SQLBackend, StoreBase):
    dialect = POSTGRES
    impact_depth = IMPACT_DEPTH  # postings read per query term (``_bm25``)
    rescore = RESCORE  # best candidates given to the filters

    def __init__(self, dsn: str, embedder: Embedder | None = None, masker: Masker | None = None) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise RuntimeError("the PostgreSQL memory store needs psycopg: pip install 'agentkeel[postgres]'") from exc
        self.dsn = dsn
        self.embedder = embedder
        self.masker = masker or DEFAULT_MASKER
        self._lock = threading.RLock()
        try:
            self._db = psycopg.connect(dsn, autocommit=False)
        except psycopg.Error as exc:
            raise RuntimeError(f"cannot connect to the memory database: {str(exc).strip().splitlines()[0]}") from exc
        self._setup()

    def _setup(self) -> None:
        with self._db.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(727274)")
            cur.execute(
                """
                CREATE TABLE IF NOT EXISTS keel_events (
                    rid BIGSERIAL PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    type TEXT NOT NULL,
                    project TEXT NOT NULL DEFAULT '',
                    session TEXT NOT NULL DEFAULT '',
                    ts DOUBLE PRECISION NOT NULL,
                    timestamp TEXT NOT NULL,
                    text TEXT NOT NULL,
                    metadata JSONB NOT NULL DEFAULT '{}',
                    files TEXT NOT NULL DEFAULT '',
                    superseded_by TEXT,
                    forgotten BOOLEAN NOT NULL DEFAULT FALSE
                );
                CREATE INDEX IF NOT EXISTS keel_events_session ON keel_events(project, session, rid);
                CREATE INDEX IF NOT EXISTS keel_events_type_ts ON keel_events(type, ts);
                CREATE TABLE IF NOT EXISTS keel_search (
                    rid BIGINT PRIMARY KEY REFERENCES keel_events(rid) ON DELETE CASCADE,
                    text TEXT, ctx TEXT, whn TEXT
                );
                ALTER TABLE keel_search ADD COLUMN IF NOT EXISTS len INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE IF NOT EXISTS keel_terms (
                    term TEXT NOT NULL, rid BIGINT NOT NULL,
                    own SMALLINT NOT NULL, ctx SMALLINT NOT NULL, whn SMALLINT NOT NULL, len INTEGER NOT NULL,
                    project TEXT NOT NULL DEFAULT '', imp REAL NOT NULL DEFAULT 0,
                    PRIMARY KEY (term, rid)
                );
                CREATE INDEX IF NOT EXISTS keel_terms_rid ON keel_terms(rid);
                CREATE TABLE IF NOT EXISTS keel_df (term TEXT PRIMARY KEY, df BIGINT NOT NULL);
                ALTER TABLE keel_df ADD COLUMN IF NOT EXISTS dfo BIGINT NOT NULL DEFAULT 0;
                CREATE TABLE IF NOT EXISTS keel_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                """
            )
            cur.execute("SELECT value FROM keel_meta WHERE key = 'postings'")
            version = cur.fetchone()
            if version is None or version[0] != POSTINGS_VERSION:
                _migrate_postings(cur, None if version is None else str(version[0]))
            if self.embedder is not None:
                cur.execute("SELECT value FROM keel_meta WHERE key = 'embedder'")
                row = cur.fetchone()
                try:
                    refuse_other_embedder(None if row is None else str(row[0]), self.embedder, "this memory database")
                except RuntimeError:
                    self._db.rollback()
                    raise
                if not self.embedder.dim:
                    try:
                        self.embedder.embed(["dimension probe"])  # an endpoint tells its dimension by answering
                    except BaseException:
                        self._db.rollback()
                        self._db.close()
                        raise
                _create_vectors(cur, self.embedder.dim)
                cur.execute(
                    "INSERT INTO keel_meta VALUES ('embedder', %s) ON CONFLICT (key) DO NOTHING", (self.embedder.name,)
                )
        self._db.commit()

    def _commit(self) -> None:
        self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- primitives ---------------------------------------------------------------------------------
    def _known_ids(self, ids: Sequence[str]) -> set[str]:
        rows = self._db.execute("SELECT id FROM keel_events WHERE id = ANY(%s)", (list(ids),)).fetchall()
        return {r[0] for r in rows}

    def _insert(self, prepared: list[tuple[Record, str, list[float] | None]]) -> list[int]:
        rids: list[int] = []
        with self._db.cursor() as cur:
            for record, _, _ in prepared:
                cur.execute(
                    f"INSERT INTO keel_events({EVENT_COLUMNS})"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING rid",
                    event_values(record),
                )
                row = cur.fetchone()
                assert row is not None
                rids.append(int(row[0]))
            cur.executemany(
                "INSERT INTO keel_search(rid, text, ctx, whn) VALUES (%s, %s, '', %s)",
                [(rid, r.text, when) for rid, (r, when, _) in zip(rids, prepared, strict=True)],
            )
            # an entry of a session gets its postings with its context, just after (``_set_contexts``)
            _index_terms(cur, [rid for rid, (r, _, _) in zip(rids, prepared, strict=True) if not r.session])
            _bump(cur, "docs", len(rids))
            with_vectors = [(rid, _vec(v)) for rid, (_, _, v) in zip(rids, prepared, strict=True) if v is not None]
            if with_vectors:
                cur.executemany("INSERT INTO keel_vectors(rid, own) VALUES (%s, %s::vector)", with_vectors)
        return rids

    def _session_tail(self, project: str, session: str, n: int) -> list[tuple[Row, list[float] | None]]:
        join = "LEFT JOIN keel_vectors v ON v.rid = e.rid" if self.embedder else ""
        own = "v.own::text" if self.embedder else "NULL"
        rows = self._db.execute(
            f"SELECT {COLUMNS}, {own} FROM keel_events e {join}"
            " WHERE e.project = %s AND e.session = %s AND NOT e.forgotten ORDER BY e.rid DESC LIMIT %s",
            (project, session, n),
        ).fetchall()
        return [(row_of(r), json.loads(r[-1]) if r[-1] else None) for r in reversed(rows)]

    def _reset_vectors(self, name: str, dim: int) -> None:
        with self._db.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(727274)")
            cur.execute("DROP TABLE IF EXISTS keel_vectors")
            _create_vectors(cur, dim)
            cur.execute(
                "INSERT INTO keel_meta VALUES ('embedder', %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (name,),
            )

    def _put_vectors(self, vectors: list[tuple[int, list[float]]]) -> None:
        with self._db.cursor() as cur:
            cur.executemany(
                "INSERT INTO keel_vectors(rid, own) SELECT %s, %s::vector"
                " WHERE EXISTS (SELECT 1 FROM keel_events WHERE rid = %s AND NOT forgotten)"
                " ON CONFLICT (rid) DO UPDATE SET own = EXCLUDED.own",
                [(rid, _vec(v), rid) for rid, v in vectors],
            )

    def _vector_mark(self) -> int:
        row = self._db.execute("SELECT value FROM keel_meta WHERE key = 'vector_mark'").fetchone()
        return int(row[0]) if row else 0

    def _set_vector_mark(self, rid: int) -> None:
        self._db.execute(
            "INSERT INTO keel_meta VALUES ('vector_mark', %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (str(rid),),
        )

    def _set_contexts(self, contexts: list[tuple[int, str, list[float] | None]]) -> None:
        if not contexts:
            return
        rids = [rid for rid, _, _ in contexts]
        with self._db.cursor() as cur:
            cur.executemany("UPDATE keel_search SET ctx = %s WHERE rid = %s", [(c, rid) for rid, c, _ in contexts])
            _index_terms(cur, rids)
            vectors = [(_vec(v), rid) for rid, _, v in contexts if v is not None]
            if vectors:
                cur.executemany("UPDATE keel_vectors SET ctx = %s::vector WHERE rid = %s", vectors)

    def _mark_superseded(self, old_id: str, new_id: str) -> None:
        with self._lock:
            self._db.execute("UPDATE keel_events SET superseded_by = %s WHERE id = %s", (new_id, old_id))

    def forget(self, ids: Sequence[str]) -> int:
        with self._lock:
            rows = self._db.execute(
                "UPDATE keel_events SET text = '', metadata = '{}', files = '', forgotten = TRUE"
                " WHERE id = ANY(%s) AND NOT forgotten RETURNING rid",
                (list(ids),),
            ).fetchall()
            rids = [r[0] for r in rows]
            with self._db.cursor() as cur:
                _index_terms(cur, rids, gone=True)
                _bump(cur, "docs", -len(rids))
            self._db.execute("DELETE FROM keel_search WHERE rid = ANY(%s)", (rids,))
            if self.embedder is not None:
                self._db.execute("DELETE FROM keel_vectors WHERE rid = ANY(%s)", (rids,))
            self._db.commit()
            return len(rids)

    @staticmethod
    def _where(filters: Filters) -> tuple[str, list[Any]]:
        return where_clause(filters, POSTGRES)

    def _query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return list(self._db.execute(sql, list(params)).fetchall())

    def _end_read(self) -> None:
        self._db.rollback()

    def _rollback(self) -> None:
        self._db.rollback()

    def _lexical(self, terms: list[str], filters: Filters, limit: int) -> list[int]:
        """BM25 as FTS5 computes it (see the module doc), over the postings of the query's terms,
        with SQLite's rules (``SQLiteStore._lexical``): a term in more than half of the entries
        is left out while the others find ``limit`` entries; a term in more than
        ``Tuning.common`` of them is matched in an entry's own text and date words only (its
        context weight is 0 and its idf is that of its entries outside the context), and what
        the query's words match in the session context alone comes after, to fill the list.
        A word FTS5 reads as several tokens (``foo_bar``) makes the query a plain one, as on
        SQLite. Postings are still read in an impact order that counts the context (``_bm25``)."""
        split = tokenizer().stems(terms)
        flat = [t for tokens in split for t in tokens]  # a repeated stem counts twice, as in FTS5's OR-query
        if not flat:
            return []
        with self._lock:
            if (filters.types or filters.session) and not self._fetch_one_live(filters):
                self._db.rollback()
                return []
            stats = self._db.execute(
                "SELECT term, df, dfo FROM keel_df WHERE term = ANY(%s) AND df > 0", (sorted(set(flat)),)
            ).fetchall()
            docs, tokens = self._totals()
            held = {str(t): (int(df), int(dfo)) for t, df, dfo in stats}
            every = [(t, *held[t]) for t in flat if t in held]
            if not every or not docs:
                self._db.rollback()
                return []
            avgdl = max(tokens / docs, 1e-9)
            plain = any(len(tokens) != 1 for tokens in split)
            common = float("inf") if plain else self.tuning.common * docs

            def bm25(chosen: list[tuple[str, int, int]], rule: bool) -> list[tuple[Any, ...]]:
                narrow = [rule and df > common for _, df, _ in chosen]
                idf = [_idf(docs, dfo if n else df) for (_, df, dfo), n in zip(chosen, narrow, strict=True)]
                deep = max(df for _, df, _ in chosen) > self.impact_depth
                return self._bm25([t for t, _, _ in chosen], idf, narrow, filters, limit, avgdl, deep)

            informative = every if plain else [x for x in every if x[1] * 2 <= docs]
            rows: list[tuple[Any, ...]] = []
            for chosen in [informative, every] if informative and informative != every else [every]:
                rows = bm25(chosen, True)
                if len(rows) >= limit:
                    break
            found = [int(r[0]) for r in rows]
            if len(found) < limit and any(df > common for _, df, _ in every):  # then what matched in the context only
                seen = set(found)
                found += [r for r in (int(x[0]) for x in bm25(every, False)) if r not in seen][: limit - len(found)]
            self._db.rollback()
        return found

    def _fetch_one_live(self, filters: Filters) -> bool:
        """Whether a live entry passes ``filters`` (a search no entry can pass reads no postings)."""
        where, params = self._where(filters)
        return self._db.execute(f"SELECT 1 FROM keel_events e WHERE {where} LIMIT 1", params).fetchone() is not None

    def _bm25(
        self,
        terms: list[str],
        idf: list[float],
        narrow: list[bool],
        filters: Filters,
        limit: int,
        avgdl: float,
        truncated: bool,
    ) -> list[tuple[Any, ...]]:
        """The ``limit`` best entries by BM25 (a ``narrow`` term counts outside the context only,
        and an entry holding it only there is not matched by it). Each term's postings are read
        in impact order (the default field weights, the context counted), and only the first
        ``impact_depth`` of them (of the filter's project, when it names one), from an index
        that holds their counts (no table access), so a term held by 50,000 entries costs what
        one held by 2,000 does. An entry's score sums the postings read: a posting cut off is
        one of a common word's weakest, so the top of the ranking is that of every posting (the
        100k bench measures how close). The ``rescore`` best are then filtered; should that
        leave fewer than ``limit`` while a list was cut short, every posting is scored. Equal
        scores (to float4: FTS5 sums in another order, a last-bit difference) rank by entry, as on SQLite."""
        where, params = self._where(filters)
        own, ctx, when = (float(w) for w in self.tuning.fields)
        tf = "p.own * %s::float8 + CASE WHEN q.narrow THEN 0 ELSE p.ctx * %s::float8 END + p.whn * %s::float8"
        score = f"SUM(q.idf * ({tf}) * 2.2 / (({tf}) + 1.2 * (0.25 + p.len * %s::float8)))"
        weights = [own, ctx, when, own, ctx, when, 0.75 / avgdl]
        matched = "(NOT q.narrow OR p.own + p.whn > 0)"
        q = "unnest(%s::text[], %s::float8[], %s::bool[]) AS q(term, idf, narrow)"
        in_project = " AND p.project = %s" if filters.project is not None else ""
        rows = self._db.execute(
            f"WITH c AS (SELECT p.rid, {score} AS score FROM {q} CROSS JOIN LATERAL"
            " (SELECT p.rid, p.own, p.ctx, p.whn, p.len FROM keel_terms p"
            f" WHERE p.term = q.term AND {matched}{in_project} ORDER BY p.imp DESC LIMIT %s) p"
            " GROUP BY p.rid ORDER BY score DESC LIMIT %s)"
            f" SELECT c.rid, c.score FROM c JOIN keel_events e ON e.rid = c.rid WHERE {where}"
            " ORDER BY c.score::float4 DESC, c.rid LIMIT %s",
            [
                *weights,
                terms,
                idf,
                narrow,
                *([filters.project] if in_project else []),
                self.impact_depth,
                self.rescore,
                *params,
                limit,
            ],
        ).fetchall()
        if len(rows) < limit and truncated:
            rows = self._db.execute(
                f"SELECT rid, score FROM (SELECT p.rid, {score} AS score FROM {q} JOIN keel_terms p"
                f" ON p.term = q.term AND {matched} JOIN keel_events e ON e.rid = p.rid WHERE {where} GROUP BY p.rid) x"
                " ORDER BY score::float4 DESC, rid LIMIT %s",
                [*weights, terms, idf, narrow, *params, limit],
            ).fetchall()
        return list(rows)

    def _totals(self) -> tuple[int, int]:
        """How many entries the word index holds, and their tokens (BM25's N and average length)."""
        found: dict[str, str] = dict(
            self._db.execute("SELECT key, value FROM keel_meta WHERE key IN ('docs', 'tokens')").fetchall()
        )
        return int(found.get("docs", 0)), int(found.get("tokens", 0))

    def _vector(self, vector: list[float], column: str, filters: Filters, limit: int) -> list[int]:
        col = "own" if column == "own" else "ctx"
        where, params = self._where(filters)
        exact = filters != Filters()  # HNSW would drop what lies outside the filter after the fact
        with self._lock:
            if exact:
                rows = self._db.execute(
                    f"SELECT rid FROM (SELECT e.rid, v.{col} <=> %s::vector AS d FROM keel_vectors v"
                    f" JOIN keel_events e ON e.rid = v.rid WHERE v.{col} IS NOT NULL AND {where} OFFSET 0) x"
                    " ORDER BY d, rid LIMIT %s",
                    [_vec(vector), *params, limit],
                ).fetchall()
            else:
                self._db.execute("SET LOCAL hnsw.ef_search = 200")
                rows = self._db.execute(
                    f"SELECT e.rid FROM keel_vectors v JOIN keel_events e ON e.rid = v.rid"
                    f" WHERE v.{col} IS NOT NULL AND {where} ORDER BY v.{col} <=> %s::vector LIMIT %s",
                    [*params, _vec(vector), limit],
                ).fetchall()
            self._db.rollback()
        return [int(r[0]) for r in rows]

    def _own_vectors(self, rids: Sequence[int]) -> dict[int, list[float]]:
        import json

        with self._lock:
            rows = self._db.execute(
                "SELECT rid, own::text FROM keel_vectors WHERE rid = ANY(%s) AND own IS NOT NULL", (list(rids),)
            ).fetchall()
            self._db.rollback()
        return {int(rid): [float(x) for x in json.loads(text)] for rid, text in rows}

    def _rows_by_rid(self, rids: Sequence[int]) -> dict[int, Row]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {COLUMNS} FROM keel_events e WHERE e.rid = ANY(%s)", (list(rids),)
            ).fetchall()
            self._db.rollback()
        return {int(r[0]): row_of(r) for r in rows}

    def _rows_by_id(self, ids: Sequence[str]) -> list[Row]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {COLUMNS} FROM keel_events e WHERE e.id = ANY(%s) AND NOT e.forgotten", (list(ids),)
            ).fetchall()
            self._db.rollback()
        return [row_of(r) for r in rows]

    def pending_vectors(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT to_regclass('keel_vectors') IS NOT NULL").fetchone()
            self._db.rollback()
        if row is not None and row[0]:
            return super().pending_vectors()
        found = self._fetch("SELECT COUNT(*) FROM keel_events e WHERE NOT e.forgotten", ())
        return int(found[0][0])

    def check(self, full: bool = False) -> list[str]:
        """The search index against the entries (the server itself guards its pages)."""
        rows = self._fetch(
            "SELECT (SELECT COUNT(*) FROM keel_search), (SELECT COUNT(*) FROM keel_events WHERE NOT forgotten)", ()
        )
        indexed, live = int(rows[0][0]), int(rows[0][1])
        return [] if indexed == live else [f"the word index holds {indexed} rows for {live} entries"]

    def stats(self) -> dict[str, Any]:
        with self._lock:
            by_type: dict[str, int] = dict(
                self._db.execute("SELECT type, COUNT(*) FROM keel_events WHERE NOT forgotten GROUP BY type").fetchall()
            )
            counts = self._db.execute(
                "SELECT COUNT(DISTINCT project), COUNT(DISTINCT session), COUNT(superseded_by)"
                " FROM keel_events WHERE NOT forgotten"
            ).fetchone()
            vectors = (
                self._db.execute("SELECT COUNT(*) FROM keel_vectors").fetchone() if self.embedder is not None else (0,)
            )
            self._db.rollback()
        assert counts is not None and vectors is not None
        return {
            "backend": "postgresql",
            "location": self.dsn.split("@")[-1],
            "entries": sum(by_type.values()),
            "by_type": {t: by_type.get(t, 0) for t in EVENT_TYPES if by_type.get(t)},
            "projects": counts[0],
            "sessions": counts[1],
            "vectors": vectors[0],
            "superseded": counts[2],
            "embedder": self.embedder.name if self.embedder else None,
        }


def _idf(docs: int, n: int) -> float:
    """FTS5's idf: log((N - n + 0.5) / (n + 0.5)), at least 1e-6."""
    return max(math.log((docs - n + 0.5) / (n + 0.5)), 1e-6)


def _index_terms(cur: Any, rids: list[int], gone: bool = False) -> None:
    """Rewrite the postings of some entries from their words (after an insert, a context change,
    or before a forget), keeping the token total BM25's average length needs."""
    if not rids:
        return
    cur.execute("SELECT pg_advisory_xact_lock(727275)")  # one postings writer at a time: df rows never deadlock
    cur.execute("SELECT COALESCE(SUM(len), 0) FROM keel_search WHERE rid = ANY(%s)", (rids,))
    before = int(cur.fetchone()[0])
    cur.execute(
        "UPDATE keel_df d SET df = d.df - o.n, dfo = d.dfo - o.o FROM (SELECT term, count(*) AS n,"
        " count(*) FILTER (WHERE own + whn > 0) AS o FROM keel_terms WHERE rid = ANY(%s) GROUP BY term) o"
        " WHERE d.term = o.term",
        (rids,),
    )
    cur.execute("DELETE FROM keel_terms WHERE rid = ANY(%s)", (rids,))
    after = 0
    if not gone:
        cur.execute(
            "SELECT s.rid, coalesce(s.text, ''), coalesce(s.ctx, ''), coalesce(s.whn, ''), e.project"
            " FROM keel_search s JOIN keel_events e ON e.rid = s.rid WHERE s.rid = ANY(%s)",
            (rids,),
        )
        found = cur.fetchall()
        lengths, postings = tokenizer().postings([(int(r[0]), r[1], r[2], r[3]) for r in found])
        project = {int(r[0]): str(r[4]) for r in found}
        after = sum(lengths.values())
        cur.execute(
            "UPDATE keel_search s SET len = v.len FROM unnest(%s::bigint[], %s::int[]) AS v(rid, len)"
            " WHERE s.rid = v.rid",
            (list(lengths), list(lengths.values())),
        )
        avgdl = _avgdl(cur)
        with cur.copy("COPY keel_terms(term, rid, own, ctx, whn, len, project, imp) FROM STDIN") as copy:
            for term, rid, own, ctx, whn in postings:
                imp = impact(own, ctx, whn, lengths[rid], TUNING.fields, avgdl)
                copy.write_row((term, rid, own, ctx, whn, lengths[rid], project[rid], imp))
        cur.execute(
            "INSERT INTO keel_df(term, df, dfo) SELECT term, count(*), count(*) FILTER (WHERE own + whn > 0)"
            " FROM keel_terms WHERE rid = ANY(%s) GROUP BY term"
            " ON CONFLICT (term) DO UPDATE SET df = keel_df.df + EXCLUDED.df, dfo = keel_df.dfo + EXCLUDED.dfo",
            (rids,),
        )
    _bump(cur, "tokens", after - before)


def _avgdl(cur: Any) -> float:
    """The entries' mean length in tokens (20 in an empty store): the impact order's, at the
    time a posting is written (scores use the current one)."""
    cur.execute("SELECT key, value FROM keel_meta WHERE key IN ('docs', 'tokens')")
    found = {str(k): int(v) for k, v in cur.fetchall()}
    docs, tokens = found.get("docs", 0), found.get("tokens", 0)
    return tokens / docs if docs and tokens > 0 else 20.0


def _migrate_postings(cur: Any, version: str | None) -> None:
    """Bring the postings to ``POSTINGS_VERSION``: every entry's words are indexed again from its
    stored text, context and date words (a store made before the postings, or with a
    tsvector's words), in batches, the impact indexes made once at the end."""
    cur.execute(
        "ALTER TABLE keel_terms ADD COLUMN IF NOT EXISTS project TEXT NOT NULL DEFAULT '',"
        " ADD COLUMN IF NOT EXISTS imp REAL NOT NULL DEFAULT 0;"
        " DROP INDEX IF EXISTS keel_terms_impact; DROP INDEX IF EXISTS keel_terms_project_impact;"
        " DROP INDEX IF EXISTS keel_search_tsv; ALTER TABLE keel_search DROP COLUMN IF EXISTS tsv;"
        " TRUNCATE keel_terms, keel_df; UPDATE keel_search SET len = 0 WHERE len <> 0;"
        " DELETE FROM keel_meta WHERE key IN ('docs', 'tokens')"
    )
    cur.execute("SELECT rid FROM keel_search ORDER BY rid")
    held = [int(r[0]) for r in cur.fetchall()]
    _bump(cur, "docs", len(held))
    for start in range(0, len(held), 2000):
        _index_terms(cur, held[start : start + 2000])
    cur.execute(
        "CREATE INDEX IF NOT EXISTS keel_terms_impact ON keel_terms(term, imp DESC) INCLUDE (rid, own, ctx, whn, len);"
        " CREATE INDEX IF NOT EXISTS keel_terms_project_impact ON keel_terms(term, project, imp DESC)"
        " INCLUDE (rid, own, ctx, whn, len)"
    )
    cur.execute(
        "INSERT INTO keel_meta VALUES ('postings', %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (POSTINGS_VERSION,),
    )


def _bump(cur: Any, key: str, delta: int) -> None:
    """Add to a counter in ``keel_meta`` (the entry count and token total of the word index)."""
    if delta:
        cur.execute(
            "INSERT INTO keel_meta VALUES (%s, %s) ON CONFLICT (key)"
            " DO UPDATE SET value = (keel_meta.value::bigint + EXCLUDED.value::bigint)::text",
            (key, str(delta)),
        )


def _create_vectors(cur: Any, dim: int) -> None:
    cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
    cur.execute(
        f"""
        CREATE TABLE IF NOT EXISTS keel_vectors (
            rid BIGINT PRIMARY KEY REFERENCES keel_events(rid) ON DELETE CASCADE,
            own vector({int(dim)}), ctx vector({int(dim)})
        );
        CREATE INDEX IF NOT EXISTS keel_vectors_own ON keel_vectors USING hnsw (own vector_cosine_ops);
        CREATE INDEX IF NOT EXISTS keel_vectors_ctx ON keel_vectors USING hnsw (ctx vector_cosine_ops);
        """
    )


def _vec(vector: list[float]) -> str:
    return "[" + ",".join(f"{v:.7g}" for v in vector) + "]"
