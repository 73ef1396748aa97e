"""The team memory store: PostgreSQL with full-text search and pgvector, same Protocol as SQLite.

Lexical search is a weighted ``tsvector`` (own text A, date words B, session context C)
ranked with ``ts_rank``; vectors live in pgvector columns with HNSW indexes (cosine).
Needs ``pip install 'agentkeel[postgres]'`` (psycopg) and the ``vector`` extension.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from agentkeel.memory.embed import Embedder
from agentkeel.memory.model import EVENT_TYPES, Record
from agentkeel.memory.privacy import DEFAULT_MASKER, Masker
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


def rank_weights(fields: tuple[float, float, float]) -> str:
    """ts_rank's {D, C, B, A} weights from the store's (own text, context, date words) field weights."""
    own, ctx, when = (max(0.0, float(w)) for w in fields)
    top = max(own, ctx, when) or 1.0
    return "{" + ", ".join(f"{w / top:.4g}" for w in (0.0, ctx, when, own)) + "}"


class PostgresStore(StoreBase):
    dialect = POSTGRES

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
                CREATE TABLE IF NOT EXISTS keel_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                """
            )
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
        self._db.execute("UPDATE keel_search SET ctx = %s WHERE rid = %s", (context, rid))
        self._db.execute(f"UPDATE keel_search s SET tsv = {_TSV} WHERE s.rid = %s", (rid,))
        if vector is not None:
            self._db.execute("UPDATE keel_vectors SET ctx = %s::vector WHERE rid = %s", (_vec(vector), rid))

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
        words = " | ".join(t.replace("'", "") for t in terms if t.replace("'", ""))
        if not words:
            return []
        where, params = self._where(filters)
        with self._lock:
            rows = self._db.execute(
                "WITH q AS (SELECT to_tsquery('english', %s) || to_tsquery('simple', %s) AS query)"
                f" SELECT e.rid FROM keel_search s JOIN keel_events e ON e.rid = s.rid, q"
                f" WHERE s.tsv @@ q.query AND {where}"
                f" ORDER BY ts_rank('{rank_weights(self.tuning.fields)}', s.tsv, q.query, 1) DESC LIMIT %s",
                [words, words, *params, limit],
            ).fetchall()
            self._db.rollback()
        return [int(r[0]) for r in rows]

    def _vector(self, vector: list[float], column: str, filters: Filters, limit: int) -> list[int]:
        col = "own" if column == "own" else "ctx"
        where, params = self._where(filters)
        with self._lock:
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
