"""SQLite's vectors in process memory: every live entry's own and context vector in two float32
matrices, refreshed by row version (``meta.ver``) and compared with numpy, so a vector search
reads no rows. ``SQLiteStore`` keeps one per connection."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkeel.memory.sqlite_lib import sqlite3

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


class VectorCache:
    """Every live vector of the file in two float32 matrices, refreshed by row version."""

    def __init__(self) -> None:
        self.epoch = ""
        self.clear()

    def clear(self) -> None:
        self.ver = 0
        self.index: dict[int, int] = {}
        self.rids: npt.NDArray[np.int64] | None = None
        self.own: npt.NDArray[np.float32] | None = None
        self.ctx: npt.NDArray[np.float32] | None = None
        self.live: npt.NDArray[np.bool_] | None = None
        self.projects: dict[str, int] = {}  # project -> its code in ``project``
        self.project: npt.NDArray[np.int32] | None = None

    def refresh(self, db: sqlite3.Connection) -> None:
        import numpy as np

        meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('ver', 'epoch')").fetchall())
        current = int(meta.get("ver") or 0)
        if meta.get("epoch", "") != self.epoch:  # the vectors were rebuilt (`keel mem reindex`)
            self.clear()
            self.epoch = meta.get("epoch", "")
        if current == self.ver:
            return
        changed = db.execute(
            "SELECT v.rid, v.own, v.ctx, e.superseded_by IS NULL AND e.forgotten = 0, e.project"
            " FROM vectors v JOIN events e ON e.rid = v.rid WHERE v.ver > ?",
            (self.ver,),
        ).fetchall()
        if changed:
            dim = next((len(r[1]) // 4 for r in changed if r[1] is not None), 0)
            if self.own is not None:
                dim = self.own.shape[1]
            new = [r for r in changed if int(r[0]) not in self.index]
            if new and dim:
                start = 0 if self.rids is None else len(self.rids)
                add_rids = np.array([int(r[0]) for r in new], dtype=np.int64)
                zeros = np.zeros((len(new), dim), dtype=np.float32)
                self.rids = add_rids if self.rids is None else np.concatenate([self.rids, add_rids])
                self.own = zeros.copy() if self.own is None else np.concatenate([self.own, zeros])
                self.ctx = zeros.copy() if self.ctx is None else np.concatenate([self.ctx, zeros])
                live = np.zeros(len(new), dtype=np.bool_)
                self.live = live if self.live is None else np.concatenate([self.live, live])
                codes = np.array([self.projects.setdefault(r[4], len(self.projects)) for r in new], dtype=np.int32)
                self.project = codes if self.project is None else np.concatenate([self.project, codes])
                for offset, r in enumerate(new):
                    self.index[int(r[0])] = start + offset
            if self.own is not None and self.ctx is not None and self.live is not None:
                for rid, own, ctx, live_flag, _ in changed:
                    i = self.index.get(int(rid))
                    if i is None:
                        continue
                    self.own[i] = np.frombuffer(own, dtype=np.float32) if own is not None else 0.0
                    self.ctx[i] = np.frombuffer(ctx, dtype=np.float32) if ctx is not None else 0.0
                    self.live[i] = bool(live_flag) and own is not None
        self.ver = current

    def nearest(
        self, vector: list[float], column: str, limit: int, allowed: set[int] | None, project: str | None = None
    ) -> list[int]:
        """The ``limit`` live entries nearest ``vector``: among ``allowed`` rids, or of ``project``
        (compared in the cache, not looked up: a search filtered by project alone is the usual one)."""
        import numpy as np

        matrix = self.own if column == "own" else self.ctx
        if matrix is None or self.rids is None or self.live is None or not len(self.rids):
            return []
        from agentkeel.memory.embed import one_blas_thread

        with one_blas_thread():  # a worker thread per core spins on a loaded machine (see embed)
            scores = matrix @ np.asarray(vector, dtype=np.float32)
        mask = self.live.copy()
        if project is not None and self.project is not None:
            mask &= self.project == self.projects.get(project, -1)
        if allowed is not None:
            mask &= np.isin(self.rids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
        scores = np.where(mask, scores, -np.inf)
        n = min(limit, int(mask.sum()))
        if n <= 0:
            return []
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.argsort(-scores[top])]
        return [int(self.rids[i]) for i in top if scores[i] > 0]
