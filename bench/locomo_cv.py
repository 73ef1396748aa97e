"""Cross-validated LoCoMo retrieval: are keel's search constants fitted to the data they are scored on?

    python bench/locomo_cv.py [--backend sqlite|postgres] [--embedder minilm|none]
                              [--grid full|quick|defaults|feedback|common]

Records and questions are those of ``bench/locomo_bench.py`` (every dialog turn a record,
each category 1-4 question searched inside its conversation). Every candidate setting of the
store's ``Tuning`` (fusion k, list weights, lexical field weights) is scored once per question;
then, for each of the ten ways to split the five dev conversations into three to tune on and
two to report on, the setting best on the three (mean of recall_any@5 and @10) is scored on
the two. Reported: in-sample (the chosen setting on its own three) and held-out (on the two)
recall_any@5/@10 averaged over the folds, the shipped defaults and the plain FTS5 OR-query on
the same folds, and search p50/p95 (query embedding included) with the defaults.

Vectors are cached in ``$XDG_CACHE_HOME/keel-bench`` (the embedder's own output, keyed by the
text), so rerunning the grid does not re-embed 2,760 turns; latency is measured with the real
embedder on every query.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from msgspec.structs import asdict, replace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from agentkeel.memory.embed import Embedder, get_embedder  # noqa: E402
from agentkeel.memory.sql import Filters  # noqa: E402
from agentkeel.memory.sqlite import SQLiteStore  # noqa: E402
from agentkeel.memory.store import TUNING, Tuning  # noqa: E402
from locomo_bench import DATA, baseline_hits, load  # noqa: E402

Question = tuple[str, str, set[str]]


class CachedEmbedder:
    """The real embedder's vectors, remembered on disk by text (the bench embeds 2,760 turns once)."""

    def __init__(self, inner: Embedder, cache: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.path = cache / f"{inner.name.replace(':', '_')}.json"
        self.known: dict[str, list[float]] = json.loads(self.path.read_text()) if self.path.is_file() else {}
        self.dirty = False

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        missing = sorted({t for t in texts if self.key(t) not in self.known})
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing), strict=True):
                self.known[self.key(text)] = [round(v, 6) for v in vector]
            self.dirty = True
        return [self.known[self.key(t)] for t in texts]

    def save(self) -> None:
        if self.dirty:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.known))
            self.dirty = False


def grid(size: str) -> list[Tuning]:
    """The settings tried: every combination of these values (no setting names a conversation)."""
    if size == "defaults":
        return [TUNING]
    if size == "common":  # when a query term counts as common (matched outside the session context only)
        return [replace(TUNING, common=c) for c in (0.05, 0.1, 0.15, 0.2, 0.3, 1.0)]
    quick = size == "quick"
    ks = [5.0, 60.0] if quick else [2.0, 5.0, 10.0, 20.0, 60.0]
    mixes = [(0.55, 0.30, 0.15), (0.4, 0.4, 0.2), (0.7, 0.2, 0.1)]
    if not quick:
        mixes += [(0.5, 0.5, 0.0), (1 / 3, 1 / 3, 1 / 3), (0.45, 0.35, 0.2), (0.6, 0.25, 0.15), (0.3, 0.5, 0.2)]
    fields = [(1.0, 0.4, 2.0), (1.0, 0.0, 0.0)]
    if not quick:
        fields += [(1.0, 0.2, 1.0), (1.0, 0.4, 0.0), (1.0, 0.8, 2.0), (1.0, 0.4, 4.0), (1.0, 0.1, 2.0)]
    return [
        Tuning(rrf_k=k, lexical=m[0], vector=m[1], context=m[2], fields=f)
        for k, m, f in itertools.product(ks, mixes, fields)
    ]


def score_grid(
    store: Any,
    rid_to_id: dict[int, str],
    questions: list[Question],
    vectors: list[list[float] | None],
    settings: list[Tuning],
) -> dict[Tuning, list[tuple[bool, bool]]]:
    """(hit@5, hit@10) of every question under every setting, through the store's own fusion."""
    out: dict[Tuning, list[tuple[bool, bool]]] = {t: [] for t in settings}
    by_lexical: dict[tuple[tuple[float, float, float], float], list[Tuning]] = {}
    for t in settings:
        by_lexical.setdefault((t.fields, t.common), []).append(t)
    for (fields, common), group in by_lexical.items():
        store.tuning = replace(TUNING, fields=fields, common=common)
        for (project, question, evidence), vector in zip(questions, vectors, strict=True):
            lists = store.candidates(question, Filters.build(project=project), vector=vector)
            for t in group:
                scores = store.fuse(lists, t)
                ids = [rid_to_id[r] for r in sorted(scores, key=lambda r: -scores[r])[:10]]
                out[t].append((bool(evidence & set(ids[:5])), bool(evidence & set(ids))))
    store.tuning = TUNING
    return out


def feedback_grid(
    store: Any, rid_to_id: dict[int, str], questions: list[Question], vectors: list[list[float] | None]
) -> dict[Any, list[tuple[bool, bool]]]:
    """An experiment (SQLite only): pseudo-relevance feedback on the query vector. The query
    vector moves toward the mean vector of the first ``depth`` fused results (weight ``beta``),
    and the two vector lists are searched again with it; no model call."""
    import numpy as np

    settings = [(beta, depth) for beta in (0.3, 0.6, 1.0) for depth in (3, 5)]
    out: dict[Any, list[tuple[bool, bool]]] = {TUNING: [], **{("feedback", *s): [] for s in settings}}
    for (project, question, evidence), vector in zip(questions, vectors, strict=True):
        flt = Filters.build(project=project)
        lists = store.candidates(question, flt, vector=vector)
        scores = store.fuse(lists)
        ranked = sorted(scores, key=lambda r: -scores[r])
        ids = [rid_to_id[r] for r in ranked[:10]]
        out[TUNING].append((bool(evidence & set(ids[:5])), bool(evidence & set(ids))))
        cache = store._cache
        for beta, depth in settings:
            rows = [cache.index[r] for r in ranked[:depth] if r in cache.index]
            moved = np.asarray(vector, dtype=np.float32)
            if rows:
                moved = moved + beta * cache.own[rows].mean(0)
                moved = moved / (np.linalg.norm(moved) or 1.0)
            again = dict(lists)
            again["vector"] = store._vector(moved.tolist(), "own", flt, 100)
            again["context"] = store._vector(moved.tolist(), "context", flt, 100)
            fused = store.fuse(again)
            ids = [rid_to_id[r] for r in sorted(fused, key=lambda r: -fused[r])[:10]]
            out[("feedback", beta, depth)].append((bool(evidence & set(ids[:5])), bool(evidence & set(ids))))
    return out


def describe(setting: Any) -> Any:
    return asdict(setting) if isinstance(setting, Tuning) else list(setting)


def mean(hits: Sequence[tuple[bool, bool]], which: int) -> float:
    return sum(h[which] for h in hits) / len(hits) if hits else 0.0


def cross_validate(
    projects: list[str],
    questions: list[Question],
    table: dict[Any, list[tuple[bool, bool]]],
    baseline: list[tuple[bool, bool]],
) -> dict[str, Any]:
    def part(hits: Sequence[tuple[bool, bool]], chosen: set[str]) -> list[tuple[bool, bool]]:
        return [h for h, q in zip(hits, questions, strict=True) if q[0] in chosen]

    folds = []
    for test in itertools.combinations(projects, 2):
        train = set(projects) - set(test)
        best = max(table, key=lambda t: (mean(part(table[t], train), 0) + mean(part(table[t], train), 1), t == TUNING))
        folds.append(
            {
                "test": list(test),
                "chosen": describe(best),
                "in_sample": [mean(part(table[best], train), 0), mean(part(table[best], train), 1)],
                "held_out": [mean(part(table[best], set(test)), 0), mean(part(table[best], set(test)), 1)],
                "defaults_held_out": [mean(part(table[TUNING], set(test)), 0), mean(part(table[TUNING], set(test)), 1)],
                "baseline_held_out": [mean(part(baseline, set(test)), 0), mean(part(baseline, set(test)), 1)],
            }
        )

    def avg(key: str, i: int) -> float:
        return round(statistics.fmean(f[key][i] for f in folds), 3)

    overall = max(table, key=lambda t: (mean(table[t], 0) + mean(table[t], 1), t == TUNING))
    return {
        "folds": folds,
        "in_sample@5": avg("in_sample", 0),
        "in_sample@10": avg("in_sample", 1),
        "held_out@5": avg("held_out", 0),
        "held_out@10": avg("held_out", 1),
        "defaults_held_out@5": avg("defaults_held_out", 0),
        "defaults_held_out@10": avg("defaults_held_out", 1),
        "baseline@5": avg("baseline_held_out", 0),
        "baseline@10": avg("baseline_held_out", 1),
        "best_on_all_five": describe(overall),
        "best_on_all_five_recall": [round(mean(table[overall], 0), 3), round(mean(table[overall], 1), 3)],
        "defaults_on_all_five": [round(mean(table[TUNING], 0), 3), round(mean(table[TUNING], 1), 3)],
        "settings_tried": len(table),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument(
        "--grid",
        choices=["full", "quick", "defaults", "feedback", "common"],
        default="full",
        help="quick: 12 settings; defaults: only them; feedback: the query-vector feedback experiment (SQLite);"
        " common: the share of entries above which a query term is common (Tuning.common)",
    )
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument(
        "--cache", default=str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "keel-bench")
    )
    args = parser.parse_args()
    data = Path(args.data)
    if not data.is_file():
        sys.exit(f"locomo_cv: no LoCoMo data at {data}: pass --data PATH")
    records, questions = load(data)
    projects = sorted({q[0] for q in questions})
    real = get_embedder(args.embedder)
    cached = CachedEmbedder(real, Path(args.cache)) if real is not None else None
    vectors: list[list[float] | None] = [None] * len(questions)
    if cached is not None:
        vectors = list(cached.embed([q[1] for q in questions]))

    with tempfile.TemporaryDirectory() as tmp:
        server = None
        if args.backend == "postgres":
            import pgserver  # type: ignore[import-untyped]

            server = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
            dsn = server.get_uri()
        else:
            dsn = str(Path(tmp) / "locomo.db")
        store: Any
        if args.backend == "postgres":
            from agentkeel.memory.postgres import PostgresStore

            store = PostgresStore(dsn, embedder=cached)
        else:
            store = SQLiteStore(Path(dsn), embedder=cached)
        for i in range(0, len(records), 256):
            store.add_many(records[i : i + 256])
        if cached is not None:
            cached.save()
        rid_to_id = {int(r[0]): str(r[1]) for r in store._fetch(f"SELECT rid, id FROM {store.dialect.table}", ())}
        started = time.perf_counter()
        table: dict[Any, list[tuple[bool, bool]]]
        if args.grid == "feedback":
            table = feedback_grid(store, rid_to_id, questions, vectors)
        else:
            table = dict(score_grid(store, rid_to_id, questions, vectors, grid(args.grid)))
        grid_s = time.perf_counter() - started
        result = cross_validate(projects, questions, table, baseline_hits(records, questions))
        # latency: the shipped defaults, the real embedder on every query
        store.embedder = real
        store.search("warm up", k=10, project=projects[0])
        latencies = [0.0]
        for project, question, _ in questions if args.grid != "feedback" else []:
            t0 = time.perf_counter()
            store.search(question, k=10, project=project)
            latencies.append((time.perf_counter() - t0) * 1000)
        store.close()
        if server is not None:
            server.cleanup()
    latencies.sort()
    result.update(
        {
            "backend": args.backend,
            "embedder": args.embedder,
            "records": len(records),
            "questions": len(questions),
            "grid_s": round(grid_s, 1),
            "search_ms_p50": round(statistics.median(latencies), 2),
            "search_ms_p95": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
        }
    )
    summary = {k: v for k, v in result.items() if k != "folds"}
    print(json.dumps(summary, indent=2))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.grid == "full" else f"_{args.grid}"
    (out / f"locomo_cv_{args.backend}_{args.embedder}{suffix}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
