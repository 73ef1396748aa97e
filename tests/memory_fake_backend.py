"""A memory backend held in the process's memory: what adding a backend takes (issue #32).

This module is the whole backend: a ``StoreBase`` implementing ``store.Backend``'s primitives
over Python dicts, and its one registration line at the bottom. ``memory_fixtures`` imports it,
so the shared store suite (every test taking the ``backend`` or ``store`` fixture) runs on it
beside SQLite and PostgreSQL. Its word ranking is BM25 with the store's field weights and
common-word rule, over FTS5's own words (``pg_terms``, as PostgreSQL's); its vector search is
exact. A location (``fake://<name>``) is one database shared by every store opened on it, as a
file or a server is; a write batch is undone by restoring the copy taken at its first write.
"""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from agentkeel.memory.backends import refuse_other_embedder, register
from agentkeel.memory.embed import Embedder
from agentkeel.memory.model import EVENT_TYPES, Record
from agentkeel.memory.pg_terms import K1, B, tokenizer
from agentkeel.memory.privacy import Masker
from agentkeel.memory.sql import Filters, Row, files_of
from agentkeel.memory.store import StoreBase


class Database:
    """What one location holds."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.rows: dict[int, Row] = {}  # every entry by rid, forgotten ones erased but kept
        self.files: dict[int, str] = {}
        self.forgotten: set[int] = set()
        self.ids: dict[str, int] = {}
        self.fields: dict[int, list[str]] = {}  # the word index: own text, session context, date words
        self.own: dict[int, list[float]] = {}
        self.ctx: dict[int, list[float]] = {}
        self.meta: dict[str, str] = {}


DATABASES: dict[str, Database] = {}


class FakeStore(StoreBase):
    def __init__(self, location: str, embedder: Embedder | None, masker: Masker) -> None:
        self.location = location
        self.embedder = embedder
        self.masker = masker
        self.db = DATABASES.setdefault(location, Database())
        self._lock = self.db.lock
        self._undo: Database | None = None
        refuse_other_embedder(self.db.meta.get("embedder"), embedder, location)
        if embedder is not None:
            self.db.meta.setdefault("embedder", embedder.name)

    # -- transactions ----------------------------------------------------------------------------
    def _write(self) -> Database:
        if self._undo is None:
            self._undo = copy.deepcopy(self.db, {id(self.db.lock): self.db.lock})
        return self.db

    def _commit(self) -> None:
        self._undo = None

    def _rollback(self) -> None:
        if self._undo is not None:
            undo, self._undo = self._undo, None
            self.db.__dict__.update(undo.__dict__)  # the same object: every store on it sees the undo

    # -- writes ------------------------------------------------------------------------------------
    def _known_ids(self, ids: Sequence[str]) -> set[str]:
        return {i for i in ids if i in self.db.ids}

    def _insert(self, prepared: list[tuple[Record, str, list[float] | None]]) -> list[int]:
        db = self._write()
        rids = []
        for record, when, vector in prepared:
            rid = max(db.rows, default=0) + 1
            db.rows[rid] = Row(
                rid,
                record.id,
                record.type,
                record.project,
                record.session,
                record.ts,
                record.timestamp,
                record.text,
                dict(record.metadata),
            )
            db.files[rid] = files_of(record.metadata)
            db.ids[record.id] = rid
            db.fields[rid] = [record.text, "", when]
            if vector is not None:
                db.own[rid] = vector
            rids.append(rid)
        return rids

    def _set_contexts(self, contexts: list[tuple[int, str, list[float] | None]]) -> None:
        db = self._write()
        for rid, context, vector in contexts:
            if rid in db.fields:
                db.fields[rid][1] = context
            if vector is not None and rid in db.own:
                db.ctx[rid] = vector

    def _mark_superseded(self, old_id: str, new_id: str) -> None:
        db = self._write()
        if old_id in db.ids:
            db.rows[db.ids[old_id]].superseded_by = new_id

    def forget(self, ids: Sequence[str]) -> int:
        with self._writing():
            db = self._write()
            gone = [db.ids[i] for i in ids if i in db.ids and db.ids[i] not in db.forgotten]
            for rid in gone:
                row = db.rows[rid]
                row.text, row.metadata = "", {}
                db.files[rid] = ""
                db.forgotten.add(rid)
                for index in (db.fields, db.own, db.ctx):
                    index.pop(rid, None)
            self._commit()
        return len(gone)

    # -- vectors -------------------------------------------------------------------------------------
    def _reset_vectors(self, name: str, dim: int) -> None:
        db = self._write()
        db.own.clear()
        db.ctx.clear()
        db.meta["embedder"] = name

    def _put_vectors(self, vectors: list[tuple[int, list[float]]]) -> None:
        db = self._write()
        for rid, vector in vectors:
            if rid in db.rows and rid not in db.forgotten:
                db.own[rid] = vector

    def _vector_mark(self) -> int:
        return int(self.db.meta.get("vector_mark", 0))

    def _set_vector_mark(self, rid: int) -> None:
        self._write().meta["vector_mark"] = str(rid)

    def _unembedded(self, after_rid: int, limit: int) -> tuple[list[Row], int]:
        rows = [r for r in self._live() if r.rid > after_rid and r.rid not in self.db.own][:limit]
        return rows, max(self.db.rows, default=0)

    def _pending(self, after_rid: int) -> int:
        return sum(1 for r in self._live() if r.rid > after_rid and r.rid not in self.db.own)

    # -- reads -------------------------------------------------------------------------------------------
    def _live(self) -> list[Row]:
        return [row for rid, row in sorted(self.db.rows.items()) if rid not in self.db.forgotten]

    def _passes(self, row: Row, flt: Filters) -> bool:
        return (
            (flt.include_superseded or row.superseded_by is None)
            and flt.project in (None, row.project)
            and flt.session in (None, row.session)
            and (not flt.types or row.type in flt.types)
            and (flt.since is None or row.ts >= flt.since)
            and (flt.until is None or row.ts <= flt.until)
            and (flt.file is None or flt.file in self.db.files[row.rid])
        )

    def _scan(self, flt: Filters, after_rid: int, limit: int) -> list[Row]:
        return [r for r in self._live() if r.rid > after_rid and self._passes(r, flt)][:limit]

    def _session_tail(self, project: str, session: str, n: int) -> list[tuple[Row, list[float] | None]]:
        rows = [r for r in self._live() if (r.project, r.session) == (project, session)][-n:]
        return [(r, self.db.own.get(r.rid)) for r in rows]

    def _sessions(self) -> list[tuple[str, str]]:
        return list(dict.fromkeys((r.project, r.session) for r in self._live() if r.session))

    def _rows_by_rid(self, rids: Sequence[int]) -> dict[int, Row]:
        return {rid: self.db.rows[rid] for rid in rids if rid in self.db.rows}

    def _rows_by_id(self, ids: Sequence[str]) -> list[Row]:
        rids = [self.db.ids[i] for i in ids if i in self.db.ids]
        return [self.db.rows[rid] for rid in rids if rid not in self.db.forgotten]

    def _neighbours(self, row: Row, before: int, after: int) -> list[Row]:
        if not row.session:
            return [row]
        same = [r for r in self._live() if (r.project, r.session) == (row.project, row.session)]
        earlier = [r for r in same if r.rid < row.rid][-before:] if before else []
        return [*earlier, row, *[r for r in same if r.rid > row.rid][:after]]

    def _latest(self, flt: Filters, limit: int) -> list[Row]:
        rows = [r for r in self._live() if self._passes(r, flt)]
        return sorted(rows, key=lambda r: (r.ts, r.rid), reverse=True)[:limit]

    def _session_list(self, project: str | None, limit: int) -> list[tuple[str, str, str, str, int, Row | None]]:
        groups: dict[tuple[str, str], list[Row]] = {}
        for row in self._live():
            if row.session and project in (None, row.project):
                groups.setdefault((row.project, row.session), []).append(row)
        newest = sorted(groups.items(), key=lambda kv: max(r.ts for r in kv[1]), reverse=True)[:limit]
        return [
            (
                proj,
                session,
                min(r.timestamp for r in rows),
                max(r.timestamp for r in rows),
                len(rows),
                next((r for r in rows if r.type == "user_prompt"), None),
            )
            for (proj, session), rows in newest
        ]

    def _newest(self, rids: Sequence[int]) -> float:
        return max((self.db.rows[rid].ts for rid in rids if rid in self.db.rows), default=0.0)

    # -- search ------------------------------------------------------------------------------------------
    def _lexical(self, terms: list[str], filters: Filters, limit: int) -> list[int]:
        """BM25 as FTS5 computes it over the three fields; a term held by more than
        ``Tuning.common`` of the entries counts in the own text and date words only, and what
        the query matches in the session context alone comes after (as on both SQL backends)."""
        split = tokenizer().stems(terms)
        query = [t for tokens in split for t in tokens]
        indexed = sorted(self.db.fields.items())
        if not query or not indexed:
            return []
        lengths, postings = tokenizer().postings([(rid, own, ctx, whn) for rid, (own, ctx, whn) in indexed])
        held: dict[str, dict[int, tuple[int, int, int]]] = {}
        for term, rid, own, ctx, whn in postings:
            held.setdefault(term, {})[rid] = (own, ctx, whn)
        docs = len(indexed)
        avgdl = max(sum(lengths.values()) / docs, 1e-9)
        plain = any(len(tokens) != 1 for tokens in split)
        common = math.inf if plain else self.tuning.common * docs
        w_own, w_ctx, w_whn = self.tuning.fields

        def ranked(rule: bool) -> list[int]:
            scores: dict[int, float] = {}
            for term in query:
                found = held.get(term, {})
                narrow = rule and len(found) > common
                n = sum(1 for own, _, whn in found.values() if own + whn > 0) if narrow else len(found)
                idf = max(math.log((docs - n + 0.5) / (n + 0.5)), 1e-6)
                for rid, (own, ctx, whn) in found.items():
                    tf = own * w_own + (0 if narrow else ctx * w_ctx) + whn * w_whn
                    if tf > 0:
                        scores[rid] = scores.get(rid, 0.0) + idf * tf * (K1 + 1) / (
                            tf + K1 * (1 - B + B * lengths[rid] / avgdl)
                        )
            passing = [rid for rid in scores if self._passes(self.db.rows[rid], filters)]
            return sorted(passing, key=lambda rid: (-np.float32(scores[rid]), rid))[:limit]

        with self._lock:
            found = ranked(True)
            if len(found) < limit and any(len(held.get(t, {})) > common for t in query):
                seen = set(found)
                found += [rid for rid in ranked(False) if rid not in seen][: limit - len(found)]
        return found

    def _vector(self, vector: list[float], column: str, filters: Filters, limit: int) -> list[int]:
        stored = self.db.own if column == "own" else self.db.ctx
        with self._lock:
            rids = [rid for rid in sorted(stored) if self._passes(self.db.rows[rid], filters)]
            if not rids:
                return []
            matrix = np.asarray([stored[rid] for rid in rids], dtype=np.float32)
        query = np.asarray(vector, dtype=np.float32)
        cosine = (matrix @ query) / np.maximum(np.linalg.norm(matrix, axis=1) * np.linalg.norm(query), 1e-12)
        order = sorted(range(len(rids)), key=lambda i: (-float(cosine[i]), rids[i]))
        return [rids[i] for i in order[:limit]]

    def _own_vectors(self, rids: Sequence[int]) -> dict[int, list[float]]:
        return {rid: self.db.own[rid] for rid in rids if rid in self.db.own}

    # -- whole store -------------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        live = self._live()
        by_type = {t: sum(1 for r in live if r.type == t) for t in EVENT_TYPES}
        return {
            "backend": "fake",
            "location": self.location,
            "entries": len(live),
            "by_type": {t: n for t, n in by_type.items() if n},
            "projects": len({r.project for r in live}),
            "sessions": len({r.session for r in live}),
            "vectors": len(self.db.own),
            "superseded": sum(1 for r in live if r.superseded_by is not None),
            "embedder": self.embedder.name if self.embedder else None,
        }

    def close(self) -> None:
        self._rollback()


register("fake", FakeStore)
