"""The words of PostgreSQL's word index, cut exactly as SQLite's FTS5 cuts them.

The two backends rank with the same BM25 only if they agree on what a word is: its stem, which
words count (FTS5 keeps "the" and "more", PostgreSQL's ``english`` configuration drops them)
and so an entry's length, and how a month name is stemmed in the text and in the date words
(``english`` made "januari" of one and ``simple`` "january" of the other: two terms, two idfs).
So the postings are not derived from a ``tsvector``: FTS5's own tokenizer (``porter
unicode61``, the one ``sqlite.py`` indexes with) runs here, in an in-memory SQLite database,
and its token instances become the postings. SQLite is part of Python; nothing is installed.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from agentkeel.memory.sqlite_lib import sqlite3

K1, B = 1.2, 0.75  # BM25's constants, as FTS5's bm25() has them

Posting = tuple[str, int, int, int, int]  # term, entry, its count in the own text, the context, the date words


class Tokenizer:
    """FTS5's ``porter unicode61`` over contentless in-memory tables, one caller at a time."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        for name, columns in (("d", "text, ctx, whn"), ("q", "x")):
            self._db.execute(
                f"CREATE VIRTUAL TABLE {name} USING fts5({columns}, content='', tokenize='porter unicode61')"
            )
            self._db.execute(f"CREATE VIRTUAL TABLE {name}_v USING fts5vocab({name}, 'instance')")

    def postings(self, entries: Sequence[tuple[int, str, str, str]]) -> tuple[dict[int, int], list[Posting]]:
        """For (entry, own text, session context, date words): each entry's length in tokens (all
        three fields, as FTS5 counts it) and its postings, one per term."""
        counts: dict[tuple[str, int], list[int]] = {}
        lengths = {rid: 0 for rid, _, _, _ in entries}
        column = {"text": 0, "ctx": 1, "whn": 2}
        with self._lock:
            self._db.execute("INSERT INTO d(d) VALUES ('delete-all')")
            self._db.executemany("INSERT INTO d(rowid, text, ctx, whn) VALUES (?, ?, ?, ?)", entries)
            for term, rid, col, n in self._db.execute("SELECT term, doc, col, COUNT(*) FROM d_v GROUP BY 1, 2, 3"):
                counts.setdefault((term, rid), [0, 0, 0])[column[col]] += n
                lengths[rid] += n
            self._db.execute("INSERT INTO d(d) VALUES ('delete-all')")
        return lengths, [(term, rid, c[0], c[1], c[2]) for (term, rid), c in counts.items()]

    def stems(self, words: Sequence[str]) -> list[list[str]]:
        """Each word's tokens (one stem for a plain word; none for punctuation; several for
        ``foo_bar``, which FTS5 reads as a phrase)."""
        out: list[list[str]] = [[] for _ in words]
        with self._lock:
            self._db.execute("INSERT INTO q(q) VALUES ('delete-all')")
            self._db.executemany("INSERT INTO q(rowid, x) VALUES (?, ?)", [(i + 1, w) for i, w in enumerate(words)])
            for term, doc in self._db.execute('SELECT term, doc FROM q_v ORDER BY doc, "offset"'):
                out[int(doc) - 1].append(str(term))
            self._db.execute("INSERT INTO q(q) VALUES ('delete-all')")
        return out


_TOKENIZER: list[Tokenizer] = []
_MADE = threading.Lock()


def tokenizer() -> Tokenizer:
    """The process's tokenizer, made on first use."""
    with _MADE:
        if not _TOKENIZER:
            _TOKENIZER.append(Tokenizer())
        return _TOKENIZER[0]


def impact(own: int, ctx: int, whn: int, length: int, fields: tuple[float, float, float], avgdl: float) -> float:
    """A posting's BM25 term factor with ``fields`` (the order in which a search reads a term's
    postings, best first; the scores themselves are computed at query time)."""
    tf = own * fields[0] + ctx * fields[1] + whn * fields[2]
    return tf / (tf + K1 * (1 - B + B * length / avgdl)) if tf > 0 else 0.0
