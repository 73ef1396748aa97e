"""The team memory store: PostgreSQL with full-text search and pgvector, same Protocol as SQLite.

Lexical search is BM25 computed the way SQLite's FTS5 computes it (idf, k1 = 1.2, b = 0.75,
the per-field weights of ``Tuning.fields`` on the term frequencies), over a postings table
(``keel_terms``: term, entry, its count in the own text, the session context and the date
words, the entry's length) and each term's entry count (``keel_df``), both derived from a
weighted ``tsvector`` (own text A, date words B, session context C).
``ts_rank`` has no idf, and scoring every match of an OR-query made a 100k-entry search take
half a second; with postings, terms found in more than half of the entries (idf 0 under
BM25) are left out as SQLite leaves them out, and only the postings of the others are read.
The entry count and token total BM25 needs are kept in ``keel_meta``.

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

from agentkeel.memory.embed import Embedder
from agentkeel.memory.model import EVENT_TYPES, Record
from agentkeel.memory.privacy import DEFAULT_MASKER, Masker
from agentkeel.memory.retrieval import TUNING
from agentkeel.memory.sql import COLUMNS, EVENT_COLUMNS, Dialect, Filters, Row, event_values, row_of, where_clause
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
_TSV = (
    "setweight(to_tsvector('english', coalesce(s.text, '')), 'A') || "
    "setweight(to_tsvector('simple', coalesce(s.whn, '')), 'B') || "
    "setweight(to_tsvector('english', coalesce(s.ctx, '')), 'C')"
)


POSTINGS_VERSION = "2"  # 2: postings carry their entry's project and their impact (the BM25 term factor)
IMPACT_DEPTH = 2000  # postings read per query term, best impact first
RESCORE = 400  # best candidates given to the filters
_IMPACT = (
    "({a}.own * {own} + {a}.ctx * {ctx} + {a}.whn * {whn}) / ({a}.own * {own} + {a}.ctx * {ctx} + {a}.whn * {whn}"
    " + 1.2 * (0.25 + 0.75 * s.len / {avgdl}))"
)


def rank_weights(fields: tuple[float, float, float]) -> str:
    """ts_rank's {D, C, B, A} weights from the store's (own text, context, date words) field weights."""
    own, ctx, when = (max(0.0, float(w)) for w in fields)
    top = max(own, ctx, when) or 1.0
    return "{" + ", ".join(f"{w / top:.4g}" for w in (0.0, ctx, when, own)) + "}"


class PostgresStore(StoreBase):
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
                    text TEXT, ctx TEXT, whn TEXT, tsv TSVECTOR
                );
                CREATE INDEX IF NOT EXISTS keel_search_tsv ON keel_search USING GIN (tsv);
                ALTER TABLE keel_search ADD COLUMN IF NOT EXISTS len INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE IF NOT EXISTS keel_terms (
                    term TEXT NOT NULL, rid BIGINT NOT NULL,
                    own SMALLINT NOT NULL, ctx SMALLINT NOT NULL, whn SMALLINT NOT NULL, len INTEGER NOT NULL,
                    project TEXT NOT NULL DEFAULT '', imp REAL NOT NULL DEFAULT 0,
                    PRIMARY KEY (term, rid)
                );
                CREATE INDEX IF NOT EXISTS keel_terms_rid ON keel_terms(rid);
                CREATE TABLE IF NOT EXISTS keel_df (term TEXT PRIMARY KEY, df BIGINT NOT NULL);
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
                if row is not None and row[0] != self.embedder.name:
                    self._db.rollback()
                    raise RuntimeError(
                        f"this memory database was indexed with embedder {row[0]!r}, not {self.embedder.name!r}: "
                        f"set memory.embedder to {row[0]!r} or run `keel mem reindex`"
                    )
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
                "INSERT INTO keel_search(rid, text, ctx, whn, tsv) VALUES (%s, %s, '', %s,"
                " setweight(to_tsvector('english', %s), 'A') || setweight(to_tsvector('simple', %s), 'B'))",
                [(rid, r.text, when, r.text, when) for rid, (r, when, _) in zip(rids, prepared, strict=True)],
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

    def _set_context(self, rid: int, context: str, vector: list[float] | None) -> None:
        self._set_contexts([(rid, context, vector)])

    def _set_contexts(self, contexts: list[tuple[int, str, list[float] | None]]) -> None:
        if not contexts:
            return
        rids = [rid for rid, _, _ in contexts]
        with self._db.cursor() as cur:
            cur.executemany("UPDATE keel_search SET ctx = %s WHERE rid = %s", [(c, rid) for rid, c, _ in contexts])
            cur.execute(f"UPDATE keel_search s SET tsv = {_TSV} WHERE s.rid = ANY(%s)", (rids,))
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
        """BM25 as FTS5 computes it (see the module doc), over the postings of the query's terms.

        ``Tuning.common`` (SQLite matches a common word outside the session context only) is not
        applied: each word's postings are read in an impact order that counts the context, and
        that cut already bounds what a common word costs here."""
        words = " ".join(terms)
        if not words.strip():
            return []
        with self._lock:
            stats = self._db.execute(
                "WITH q AS (SELECT DISTINCT lexeme FROM"
                " unnest(to_tsvector('english', %s) || to_tsvector('simple', %s)))"
                " SELECT q.lexeme, d.df FROM q JOIN keel_df d ON d.term = q.lexeme",
                (words, words),
            ).fetchall()
            docs, tokens = self._totals()
            df = {str(term): int(n) for term, n in stats if n}
            if not df or not docs:
                self._db.rollback()
                return []
            avgdl = max(tokens / docs, 1e-9)
            informative = {t: n for t, n in df.items() if n * 2 <= docs}
            rows: list[tuple[Any, ...]] = []
            for chosen in [informative, df] if informative and informative != df else [df]:
                idf = [max(math.log((docs - n + 0.5) / (n + 0.5)), 1e-6) for n in chosen.values()]
                rows = self._bm25(list(chosen), idf, filters, limit, avgdl, max(chosen.values()) > self.impact_depth)
                if len(rows) >= limit:
                    break
            self._db.rollback()
        return [int(r[0]) for r in rows]

    def _bm25(
        self, terms: list[str], idf: list[float], filters: Filters, limit: int, avgdl: float, truncated: bool
    ) -> list[tuple[Any, ...]]:
        """The ``limit`` best entries by BM25. Each term's postings are read in impact order, and
        only the first ``impact_depth`` of them (of the filter's project, when it names one), from
        an index that holds their counts (no table access), so a term held by 50,000 entries
        costs what one held by 2,000 does. An entry's score sums the postings read: a posting cut
        off is one of a common word's weakest, so the top of the ranking is that of every posting
        (the 100k bench measures how close). The ``rescore`` best are then filtered; should that
        leave fewer than ``limit`` while a list was cut short, every posting is scored."""
        where, params = self._where(filters)
        own, ctx, when = (float(w) for w in self.tuning.fields)
        exact = (
            "SUM(q.idf * w.tf * 2.2 / (w.tf + 1.2 * (0.25 + t.len * %s::float8))) AS score"
            " FROM {source} JOIN keel_terms t ON {on}"
            " CROSS JOIN LATERAL (SELECT t.own * %s::float8 + t.ctx * %s::float8 + t.whn * %s::float8 AS tf) w"
            " JOIN keel_events e ON e.rid = t.rid"
            f" WHERE {where} GROUP BY t.rid ORDER BY score DESC, t.rid LIMIT %s"
        )
        in_project = " AND p.project = %s" if filters.project is not None else ""
        rows = self._db.execute(
            "WITH q AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS q(term, idf)),"
            " c AS (SELECT p.rid, SUM(q.idf * w.tf * 2.2 / (w.tf + 1.2 * (0.25 + p.len * %s::float8))) AS score"
            " FROM q CROSS JOIN LATERAL (SELECT p.rid, p.own, p.ctx, p.whn, p.len FROM keel_terms p"
            f" WHERE p.term = q.term{in_project} ORDER BY p.imp DESC LIMIT %s) p"
            " CROSS JOIN LATERAL (SELECT p.own * %s::float8 + p.ctx * %s::float8 + p.whn * %s::float8 AS tf) w"
            " GROUP BY p.rid ORDER BY score DESC LIMIT %s)"
            f" SELECT c.rid, c.score FROM c JOIN keel_events e ON e.rid = c.rid WHERE {where}"
            " ORDER BY c.score DESC, c.rid LIMIT %s",
            [
                terms,
                idf,
                0.75 / avgdl,
                *([filters.project] if in_project else []),
                self.impact_depth,
                own,
                ctx,
                when,
                self.rescore,
                *params,
                limit,
            ],
        ).fetchall()
        if len(rows) < limit and truncated:
            rows = self._db.execute(
                "SELECT t.rid, "
                + exact.format(source="unnest(%s::text[], %s::float8[]) AS q(term, idf)", on="t.term = q.term"),
                [0.75 / avgdl, terms, idf, own, ctx, when, *params, limit],
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


def _index_terms(cur: Any, rids: list[int], gone: bool = False) -> None:
    """Rewrite the postings of some entries from their tsvector (after an insert, a context
    change, or before a forget), keeping the token total BM25's average length needs."""
    if not rids:
        return
    cur.execute("SELECT pg_advisory_xact_lock(727275)")  # one postings writer at a time: df rows never deadlock
    cur.execute("SELECT COALESCE(SUM(len), 0) FROM keel_search WHERE rid = ANY(%s)", (rids,))
    before = int(cur.fetchone()[0])
    cur.execute(
        "UPDATE keel_df d SET df = d.df - o.n FROM (SELECT term, count(*) AS n FROM keel_terms"
        " WHERE rid = ANY(%s) GROUP BY term) o WHERE d.term = o.term",
        (rids,),
    )
    cur.execute("DELETE FROM keel_terms WHERE rid = ANY(%s)", (rids,))
    after = 0
    if not gone:
        cur.execute(
            "UPDATE keel_search s SET len = (SELECT COALESCE(SUM(cardinality(u.positions)), 0) FROM unnest(s.tsv) u)"
            " WHERE s.rid = ANY(%s) RETURNING len",
            (rids,),
        )
        after = sum(int(r[0]) for r in cur.fetchall())
        cur.execute(
            "INSERT INTO keel_terms(term, rid, own, ctx, whn, len, project, imp)"
            f" SELECT a.lexeme, s.rid, a.own, a.ctx, a.whn, s.len, e.project, {_impact(cur)}"
            " FROM keel_search s JOIN keel_events e ON e.rid = s.rid CROSS JOIN LATERAL (SELECT u.lexeme,"
            " cardinality(array_positions(u.weights, 'A')) AS own, cardinality(array_positions(u.weights, 'C')) AS ctx,"
            " cardinality(array_positions(u.weights, 'B')) AS whn FROM unnest(s.tsv) u) a WHERE s.rid = ANY(%s)",
            (rids,),
        )
        cur.execute(
            "INSERT INTO keel_df(term, df) SELECT term, count(*) FROM keel_terms WHERE rid = ANY(%s) GROUP BY term"
            " ON CONFLICT (term) DO UPDATE SET df = keel_df.df + EXCLUDED.df",
            (rids,),
        )
    _bump(cur, "tokens", after - before)


def _impact(cur: Any, counts: str = "a") -> str:
    """The SQL of a posting's impact (over ``counts``: its field counts, ``s``: its entry), BM25's term
    factor with the default field weights and the current average length: the order in which a
    search reads a term's postings. Scores themselves are computed exactly (``_bm25``)."""
    cur.execute("SELECT key, value FROM keel_meta WHERE key IN ('docs', 'tokens')")
    found = {str(k): int(v) for k, v in cur.fetchall()}
    docs, tokens = found.get("docs", 0), found.get("tokens", 0)
    own, ctx, whn = (float(w) for w in TUNING.fields)
    avgdl = tokens / docs if docs and tokens > 0 else 20.0
    return _IMPACT.format(a=counts, own=own, ctx=ctx, whn=whn, avgdl=f"{avgdl:.6g}::float8")


def _migrate_postings(cur: Any, version: str | None) -> None:
    """Bring the postings to ``POSTINGS_VERSION``: a store made before the postings table gets
    them from its tsvectors; one with version 1 postings gets their project and impact."""
    cur.execute(
        "ALTER TABLE keel_terms ADD COLUMN IF NOT EXISTS project TEXT NOT NULL DEFAULT '',"
        " ADD COLUMN IF NOT EXISTS imp REAL NOT NULL DEFAULT 0"
    )
    if version is None:
        cur.execute("SELECT rid FROM keel_search")
        held = [int(r[0]) for r in cur.fetchall()]
        _index_terms(cur, held)
        _bump(cur, "docs", len(held))
    else:
        cur.execute(
            f"UPDATE keel_terms t SET project = e.project, imp = {_impact(cur, 't')}"
            " FROM keel_events e, keel_search s WHERE e.rid = t.rid AND s.rid = t.rid"
        )
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
