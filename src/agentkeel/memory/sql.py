"""What the SQL backends share: query filters, the row shape, and how each dialect spells them."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from agentkeel.memory.model import Entry, Record, dumps, parse_time
from agentkeel.memory.privacy import Masker


class Filters(msgspec.Struct, frozen=True):
    project: str | None = None
    session: str | None = None
    types: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None
    file: str | None = None
    include_superseded: bool = False

    @classmethod
    def build(
        cls,
        project: str | None = None,
        session: str | None = None,
        type: str | Sequence[str] | None = None,
        since: str | float | None = None,
        until: str | float | None = None,
        file: str | None = None,
        include_superseded: bool = False,
    ) -> Filters:
        types: tuple[str, ...] = ()
        if isinstance(type, str):
            types = tuple(t for t in type.split(",") if t)
        elif type:
            types = tuple(type)
        return cls(
            project=project or None,
            session=session or None,
            types=types,
            since=_when(since),
            until=_when(until),
            file=file or None,
            include_superseded=include_superseded,
        )


COLUMNS = "e.rid, e.id, e.type, e.project, e.session, e.ts, e.timestamp, e.text, e.metadata, e.superseded_by"


def row_of(r: Sequence[Any]) -> Row:
    """A ``COLUMNS`` result row (metadata as JSON text on SQLite, already a dict from PostgreSQL's JSONB)."""
    metadata: Any = r[8]
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata) if metadata else {}
        except ValueError:
            metadata = {}
    return Row(
        rid=int(r[0]),
        id=r[1],
        type=r[2],
        project=r[3],
        session=r[4],
        ts=float(r[5]),
        timestamp=r[6],
        text=r[7],
        metadata=metadata if isinstance(metadata, dict) else {},
        superseded_by=r[9],
    )


class Dialect(msgspec.Struct, frozen=True):
    """How one SQL backend spells the filter clauses (values are always bound parameters)."""

    table: str  # the events table
    vectors: str  # the vectors table
    ph: str  # the parameter placeholder: ? or %s
    live: str  # an entry not forgotten
    any_of: Callable[[int], str]  # "e.type IN (?,?)" / "e.type = ANY(%s)"; gets the number of values
    list_param: bool  # True: the values go as one list parameter
    contains: str  # files column contains a path


def where_clause(filters: Filters, dialect: Dialect) -> tuple[str, list[Any]]:
    """The WHERE clause (over alias ``e``) and its parameters for a set of filters."""
    ph = dialect.ph
    clauses = [dialect.live]
    params: list[Any] = []
    if not filters.include_superseded:
        clauses.append("e.superseded_by IS NULL")
    for column, value in (("e.project", filters.project), ("e.session", filters.session)):
        if value is not None:
            clauses.append(f"{column} = {ph}")
            params.append(value)
    if filters.types:
        clauses.append(dialect.any_of(len(filters.types)))
        params.extend([list(filters.types)] if dialect.list_param else filters.types)
    if filters.since is not None:
        clauses.append(f"e.ts >= {ph}")
        params.append(filters.since)
    if filters.until is not None:
        clauses.append(f"e.ts <= {ph}")
        params.append(filters.until)
    if filters.file is not None:
        clauses.append(dialect.contains)
        params.append(filters.file)
    return " AND ".join(clauses), params


def _when(value: str | float | None) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return float(value)
    return parse_time(value)


class Row(msgspec.Struct):
    """A stored entry as the backends hand it back (text already masked on write)."""

    rid: int
    id: str
    type: str
    project: str
    session: str
    ts: float
    timestamp: str
    text: str
    metadata: dict[str, Any]
    superseded_by: str | None = None

    def entry(self, masker: Masker) -> Entry:
        return Entry(
            id=self.id,
            type=self.type,
            project=self.project,
            session=self.session,
            timestamp=self.timestamp,
            text=masker.text(self.text),
            metadata=masker.obj(self.metadata),
            superseded_by=self.superseded_by,
        )


EVENT_COLUMNS = "id, type, project, session, ts, timestamp, text, metadata, files"


def event_values(record: Record) -> tuple[Any, ...]:
    """The values of one new event row, in ``EVENT_COLUMNS`` order."""
    return (
        record.id,
        record.type,
        record.project,
        record.session,
        record.ts,
        record.timestamp,
        record.text,
        dumps(record.metadata),
        files_of(record.metadata),
    )


def files_of(metadata: dict[str, Any]) -> str:
    found: list[str] = []
    for key in ("file_path", "path", "notebook_path"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            found.append(value)
    files = metadata.get("files")
    if isinstance(files, list):
        found.extend(str(f) for f in files[:50])
    return "\n".join(found)


class SQLBackend:
    """The ``store.Backend`` primitives whose SQL both SQL backends share, spelled by their
    ``dialect``; a backend gives ``_query`` (one statement on the open transaction), ``_lock``
    and ``_end_read``."""

    dialect: Dialect
    _lock: threading.RLock

    def _query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run one statement on the open transaction and return its rows (the caller holds the lock)."""
        raise NotImplementedError

    def _end_read(self) -> None:
        pass

    def _fetch(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """One read query on its own, under the backend's lock."""
        with self._lock:
            rows = self._query(sql, params)
            self._end_read()
        return rows

    def _scan(self, flt: Filters, after_rid: int, limit: int) -> list[Row]:
        d = self.dialect
        where, params = where_clause(flt, d)
        rows = self._query(
            f"SELECT {COLUMNS} FROM {d.table} e WHERE {where} AND e.rid > {d.ph} ORDER BY e.rid LIMIT {d.ph}",
            [*params, after_rid, limit],
        )
        return [row_of(r) for r in rows]

    def _unembedded(self, after_rid: int, limit: int) -> tuple[list[Row], int]:
        d = self.dialect
        rows = self._query(
            f"SELECT {COLUMNS} FROM {d.table} e WHERE e.rid > {d.ph} AND {d.live}"
            f" AND NOT EXISTS (SELECT 1 FROM {d.vectors} v WHERE v.rid = e.rid) ORDER BY e.rid LIMIT {d.ph}",
            (after_rid, limit),
        )
        top = self._query(f"SELECT COALESCE(MAX(rid), 0) FROM {d.table}", ())
        return [row_of(r) for r in rows], int(top[0][0])

    def _pending(self, after_rid: int) -> int:
        d = self.dialect
        rows = self._query(
            f"SELECT COUNT(*) FROM {d.table} e WHERE e.rid > {d.ph} AND {d.live}"
            f" AND NOT EXISTS (SELECT 1 FROM {d.vectors} v WHERE v.rid = e.rid)",
            (after_rid,),
        )
        return int(rows[0][0])

    def _sessions(self) -> list[tuple[str, str]]:
        d = self.dialect
        rows = self._query(
            f"SELECT DISTINCT e.project, e.session FROM {d.table} e WHERE {d.live} AND e.session != ''", ()
        )
        return [(str(r[0]), str(r[1])) for r in rows]

    def _neighbours(self, row: Row, before: int, after: int) -> list[Row]:
        if not row.session:
            return [row]
        d = self.dialect
        same = f"SELECT {COLUMNS} FROM {d.table} e WHERE e.project = {d.ph} AND e.session = {d.ph} AND {d.live}"
        earlier = self._fetch(
            f"{same} AND e.rid < {d.ph} ORDER BY e.rid DESC LIMIT {d.ph}", (row.project, row.session, row.rid, before)
        )
        later = self._fetch(
            f"{same} AND e.rid > {d.ph} ORDER BY e.rid LIMIT {d.ph}", (row.project, row.session, row.rid, after)
        )
        return [row_of(r) for r in reversed(earlier)] + [row] + [row_of(r) for r in later]

    def _latest(self, flt: Filters, limit: int) -> list[Row]:
        d = self.dialect
        where, params = where_clause(flt, d)
        rows = self._fetch(
            f"SELECT {COLUMNS} FROM {d.table} e WHERE {where} ORDER BY e.ts DESC, e.rid DESC LIMIT {d.ph}",
            [*params, limit],
        )
        return [row_of(r) for r in rows]

    def _session_list(self, project: str | None, limit: int) -> list[tuple[str, str, str, str, int, Row | None]]:
        d = self.dialect
        where, params = where_clause(Filters.build(project=project, include_superseded=True), d)
        rows = self._fetch(
            f"SELECT e.project, e.session, MIN(e.timestamp), MAX(e.timestamp), COUNT(*), MAX(e.ts)"
            f" FROM {d.table} e WHERE {where} AND e.session != '' GROUP BY e.project, e.session"
            f" ORDER BY MAX(e.ts) DESC LIMIT {d.ph}",
            [*params, limit],
        )
        out: list[tuple[str, str, str, str, int, Row | None]] = []
        for proj, session, first, last, count, _ in rows:
            prompt = self._fetch(
                f"SELECT {COLUMNS} FROM {d.table} e WHERE e.project = {d.ph} AND e.session = {d.ph} AND {d.live}"
                f" AND e.type = 'user_prompt' ORDER BY e.rid LIMIT 1",
                (proj, session),
            )
            out.append((proj, session, first, last, int(count), row_of(prompt[0]) if prompt else None))
        return out

    def _newest(self, rids: Sequence[int]) -> float:
        d = self.dialect
        where = f"e.rid = ANY({d.ph})" if d.list_param else f"e.rid IN ({','.join([d.ph] * len(rids))})"
        params: list[Any] = [list(rids)] if d.list_param else list(rids)
        rows = self._fetch(f"SELECT MAX(e.ts) FROM {d.table} e WHERE {where}", params)
        return float(rows[0][0]) if rows and rows[0][0] is not None else 0.0
