"""The embedded memory store's word search: BM25 over its FTS5 index, joined with the filters.

Which FTS5 query to run for a question's words (a word most entries hold is left out, a
common one matches the entry's own text and date only), and when FTS5 ranks alone before
the filters are applied; ``SQLiteStore`` inherits it (``memory/sqlite.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from agentkeel.memory.pg_terms import tokenizer
from agentkeel.memory.retrieval import Tuning
from agentkeel.memory.sql import Filters
from agentkeel.memory.sqlite_lib import sqlite3

# the filter columns by entry: checking a filter reads one small index entry, not the entry's
# row, whose later columns sit behind its text (an overflow page for a long one)
FILTERED = "INDEXED BY events_filter"
FAST_SHARE = 0.5  # the filters' share of entries from which FTS5 ranks before they are applied


class SQLiteLexical:
    """``Backend._lexical`` for the SQLite store; the store gives its connection, lock, tuning,
    the filters' SQL (``_where``) and the filters FTS5's own ranking did not serve (``_joined``)."""

    _db: sqlite3.Connection
    _lock: threading.RLock
    _joined: set[tuple[Any, ...]]
    tuning: Tuning
    _where: Callable[[Filters], tuple[str, list[Any]]]

    def _lexical(self, terms: list[str], filters: Filters, limit: int) -> list[int]:
        """BM25 over the FTS index, joined with the filters.

        SQLite scores every entry the MATCH finds before it sorts, so the work is the number of
        entries matched, and the session context (the text of four neighbours) makes common
        words match most of the store. Hence, by each term's document frequency:

        - a term in more than half of all entries is left out of the MATCH: FTS5's bm25 clamps
          its idf to 1e-6, so it adds nothing to any score (100k bench: p50 80 -> 62 ms, top-10
          unchanged for 99.95 % of results);
        - a term in more than ``Tuning.common`` of them matches the entry's own text and date
          words only, not its session context (an idf of at most ~1.7 on a 0.4-weight field):
          fewer entries to score, and chosen by cross-validation for its recall
          (``bench/locomo_cv.py --grid common``).

        Should that match fewer than ``limit`` entries while a term was left out, the terms left
        out are added back (still matched outside the session context); should it still match
        fewer, the list is filled up with what every term matches anywhere (the context too). A
        search filtered by type or session that no live entry passes scans nothing.
        """
        where, params = self._where(filters)
        with self._lock:
            if (filters.types or filters.session) and not self._db.execute(
                f"SELECT 1 FROM events e WHERE {where} LIMIT 1", params
            ).fetchone():
                return []
            most = self._most(filters)
            every = " OR ".join(_quoted(t) for t in terms)
            tries = list(dict.fromkeys(self._matches(terms)))
            for match in tries:
                found = self._ranked(match, where, params, limit, most)
                if len(found) >= limit:
                    break
            if len(found) < limit and every not in tries:  # then what matched only in the context
                seen = set(found)
                more = self._ranked(every, where, params, limit, most)
                found += [rid for rid in more if rid not in seen][: limit - len(found)]
        return found

    def _ranked(self, match: str, where: str, params: list[Any], limit: int, most: bool) -> list[int]:
        """The first ``limit`` entries by BM25 (ties by entry) that ``match`` finds and pass ``where``.

        FTS5 scores every entry the match finds, and joining each one with ``events`` for the
        filters costs as much again. When the filters pass ``most`` entries (none but the usual
        ones, or a project holding at least half the store), FTS5 ranks alone and only its first
        few hundred are looked up; if fewer than ``limit`` of them pass, the joined query answers
        (and the next searches with these filters go straight to it). Both give the same list:
        the filtered prefix of one order is the prefix of the filtered order.
        """
        weights = ", ".join(f"{float(w):g}" for w in self.tuning.fields)  # own text, session context, date words
        order = f"ORDER BY bm25(fts, {weights}), fts.rowid"
        key = (where, *params)
        if most and key not in self._joined:
            n = int(max(limit, 32) * 2 / FAST_SHARE)  # room for what the filters drop, cheap to look up
            top = (
                f"SELECT rowid, bm25(fts, {weights}) AS score FROM fts WHERE fts MATCH ? ORDER BY score, rowid LIMIT ?"
            )
            sql = (
                f"SELECT t.rowid FROM ({top}) t JOIN events e {FILTERED} ON e.rid = t.rowid"
                f" WHERE {where} ORDER BY t.score, t.rowid LIMIT ?"
            )
            kept = [int(r[0]) for r in self._db.execute(sql, [match, n, *params, limit])]
            if len(kept) >= limit or self._fewer(match, n):
                return kept
            self._joined.add(key)
        sql = (
            f"SELECT e.rid FROM fts JOIN events e {FILTERED} ON e.rid = fts.rowid"
            f" WHERE fts MATCH ? AND {where} {order} LIMIT ?"
        )
        return [int(r[0]) for r in self._db.execute(sql, [match, *params, limit])]

    def _fewer(self, match: str, n: int) -> bool:
        """Whether ``match`` finds fewer than ``n`` entries (counted up to ``n``, unranked)."""
        sql = "SELECT COUNT(*) FROM (SELECT 1 FROM fts WHERE fts MATCH ? LIMIT ?)"
        return int(self._db.execute(sql, [match, n]).fetchone()[0]) < n

    def _most(self, filters: Filters) -> bool:
        """Whether the filters pass at least ``FAST_SHARE`` of the entries: without filters (but
        the usual live and current ones), or with a project alone that holds that many, counted
        on its index up to that many; any other filter is taken as selective."""
        if filters.session or filters.types or filters.since is not None or filters.until is not None or filters.file:
            return False
        total = int(self._db.execute("SELECT COALESCE(MAX(rid), 0) FROM events").fetchone()[0])
        if filters.project is None or total == 0:
            return total > 0
        others = "SELECT 1 FROM events INDEXED BY events_session WHERE project {} ? LIMIT 1"
        if not any(self._db.execute(others.format(op), [filters.project]).fetchone() for op in "<>"):
            return True  # the project holds every entry: two index seeks, not a count
        need = max(1, int(total * FAST_SHARE))
        sql = "SELECT COUNT(*) FROM (SELECT 1 FROM events INDEXED BY events_session WHERE project = ? LIMIT ?)"
        return int(self._db.execute(sql, [filters.project, need]).fetchone()[0]) >= need

    def _matches(self, terms: list[str]) -> list[str]:
        """The FTS5 queries to try for ``terms``, in order (see ``_lexical``)."""
        frequencies, total = self._frequencies(terms)
        if frequencies is None:
            return [" OR ".join(_quoted(t) for t in terms)]
        common = self.tuning.common * total

        def match(chosen: list[tuple[str, int]]) -> str:
            return " OR ".join(f"{{text whn}} : {_quoted(t)}" if n > common else _quoted(t) for t, n in chosen)

        every = list(zip(terms, frequencies, strict=True))
        informative = [(t, n) for t, n in every if n * 2 <= total]
        return [match(informative), match(every)] if informative else [match(every)]

    def _frequencies(self, terms: list[str]) -> tuple[list[int] | None, int]:
        """How many entries hold each term (by its porter stem), and how many entries there are;
        None when the tokenizer splits a term differently (then every term is used as is)."""
        # the stems come from the process's in-memory FTS5 tokenizer (the same ``porter
        # unicode61``), so a new connection creates one virtual table here, not three
        split = tokenizer().stems(terms)
        if any(len(s) != 1 for s in split):
            return None, 0
        stems = [s[0] for s in split]
        self._db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.keel_vocab USING fts5vocab(main, fts, 'row')")
        total = int(self._db.execute("SELECT COALESCE(MAX(rid), 0) FROM events").fetchone()[0])
        marks = ",".join("?" * len(stems))
        df = dict(self._db.execute(f"SELECT term, doc FROM temp.keel_vocab WHERE term IN ({marks})", stems).fetchall())
        return [int(df.get(stem, 0)) for stem in stems], total


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'
