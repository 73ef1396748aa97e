"""Retrieval ideas measured with the cross-validation of ``locomo_cv.py`` and not adopted.

    python bench/locomo_experiments.py [--only propagation,window,scores,categories]

Each idea is a family of settings scored once per question; ``locomo_cv.cross_validate``
then picks the best on three conversations and scores it on the other two, for all ten
splits, beside the shipped defaults. SQLite and MiniLM (vectors cached as in locomo_cv.py).

- ``propagation``: after fusion, each entry also gets ``a`` times the fused score of the entry
  before it in its session and ``b`` times that of the one after (the answer often follows
  the turn whose words match the question), fusion k 5 or 10;
- ``window``: a fourth ranked list, cosine against the vector of the turn embedded together
  with the turn before it;
- ``scores``: a convex combination of scores instead of ranks (BM25 divided by the query's
  best, or z-scored, plus the two cosines);
- ``categories``: recall of the defaults per LoCoMo question category, and of each list alone.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from msgspec.structs import replace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from agentkeel.memory.embed import get_embedder  # noqa: E402
from agentkeel.memory.retrieval import TUNING, query_terms, rrf  # noqa: E402
from agentkeel.memory.sql import Filters  # noqa: E402
from agentkeel.memory.sqlite import SQLiteStore  # noqa: E402
from locomo_bench import DATA, baseline_hits, load  # noqa: E402
from locomo_cv import CachedEmbedder, cross_validate  # noqa: E402

Hits = list[tuple[bool, bool]]


def hits(evidence: set[str], ids: list[str]) -> tuple[bool, bool]:
    return bool(evidence & set(ids[:5])), bool(evidence & set(ids[:10]))


def top(scores: dict[int, float], names: dict[int, str]) -> list[str]:
    return [names[r] for r in sorted(scores, key=lambda r: -scores[r])[:10]]


def summary(table: dict[Any, Hits], questions: list[Any], records: list[Any]) -> dict[str, Any]:
    projects = sorted({q[0] for q in questions})
    result = cross_validate(projects, questions, table, baseline_hits(records, questions))
    keys = ("held_out@5", "held_out@10", "defaults_held_out@5", "defaults_held_out@10", "best_on_all_five")
    return {k: result[k] for k in keys} | {"settings": len(table)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="propagation,window,scores,categories")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "keel-bench"))
    args = parser.parse_args()
    import numpy as np

    records, questions = load(DATA)
    cached = CachedEmbedder(get_embedder("minilm"), Path(args.cache))  # type: ignore[arg-type]
    qv = cached.embed([q[1] for q in questions])
    store = SQLiteStore(Path(tempfile.mkdtemp()) / "x.db", embedder=cached)
    for i in range(0, len(records), 256):
        store.add_many(records[i : i + 256])
    rows = store._fetch("SELECT rid, id, project, session FROM events ORDER BY rid", ())
    names = {int(r[0]): str(r[1]) for r in rows}
    before, after = {}, {}
    for first, second in itertools.pairwise(rows):
        if (first[2], first[3]) == (second[2], second[3]):
            before[second[0]], after[first[0]] = first[0], second[0]
    lists = [
        store.candidates(q, Filters.build(project=p), vector=v) for (p, q, _), v in zip(questions, qv, strict=True)
    ]
    defaults = [hits(ev, top(store.fuse(L), names)) for (_, _, ev), L in zip(questions, lists, strict=True)]
    report: dict[str, Any] = {}
    only = set(args.only.split(","))

    if "categories" in only:
        data = json.loads(DATA.read_text())
        cats = [qa["category"] for s in data for qa in s["qa"] if qa.get("category") in (1, 2, 3, 4)]
        per: dict[str, list[float]] = {}
        for c in sorted(set(cats)):
            chosen = [h for h, cat in zip(defaults, cats, strict=True) if cat == c]
            per[str(c)] = [len(chosen), *(round(sum(h[i] for h in chosen) / len(chosen), 3) for i in (0, 1))]
        alone = {}
        for name in ("lexical", "vector", "context"):
            got = [
                hits(ev, [names[r] for r in L.get(name, [])]) for (_, _, ev), L in zip(questions, lists, strict=True)
            ]
            alone[name] = [round(sum(h[i] for h in got) / len(got), 3) for i in (0, 1)]
        union = sum(
            bool(ev & {names[r] for ranked in L.values() for r in ranked[:100]})
            for (_, _, ev), L in zip(questions, lists, strict=True)
        )
        report["categories"] = {
            "per_category (n, @5, @10)": per,
            "each_list_alone": alone,
            "union_of_lists@100": round(union / len(questions), 3),
        }

    if "propagation" in only:
        table: dict[Any, Hits] = {TUNING: defaults}
        for a, b, k in itertools.product((0.0, 0.1, 0.2, 0.3, 0.5), (0.0, 0.1, 0.2, 0.3), (5.0, 10.0)):
            if (a, b, k) == (0.0, 0.0, 5.0):
                continue
            out = []
            for (_, _, ev), L in zip(questions, lists, strict=True):
                fused = store.fuse(L, replace(TUNING, rrf_k=k))
                spread = dict(fused)
                for rid, score in fused.items():
                    if rid in after:
                        spread[after[rid]] = spread.get(after[rid], 0.0) + a * score
                    if rid in before:
                        spread[before[rid]] = spread.get(before[rid], 0.0) + b * score
                out.append(hits(ev, top(spread, names)))
            table[("propagation", a, b, k)] = out
        report["propagation"] = summary(table, questions, records)

    if "window" in only:
        by_id = {str(r["id"]): str(r["text"]) for r in records}
        texts = []
        for i, r in enumerate(rows):
            same = i > 0 and rows[i - 1][2:] == r[2:]
            texts.append((by_id[rows[i - 1][1]] + "\n" if same else "") + by_id[r[1]])
        window = np.asarray(cached.embed(texts), dtype=np.float32)
        cached.save()
        project = np.array([r[2] for r in rows])
        rids = np.array([r[0] for r in rows])
        for (p, _, _), L, v in zip(questions, lists, qv, strict=True):
            inside = project == p
            order = np.argsort(-(window[inside] @ np.asarray(v, dtype=np.float32)))[:100]
            L["window"] = [int(x) for x in rids[inside][order]]
        table = {TUNING: defaults}
        mixes = [(0.55, 0.15, 0.15, 0.15), (0.55, 0.2, 0.1, 0.15), (0.5, 0.2, 0.1, 0.2), (0.45, 0.2, 0.1, 0.25)]
        mixes += [(0.55, 0.3, 0.15, 0.15), (0.5, 0.15, 0.05, 0.3), (0.55, 0.0, 0.15, 0.3)]
        for k, (wl, wv, wc, ww) in itertools.product((5.0, 10.0), mixes):
            table[("window", k, wl, wv, wc, ww)] = [
                hits(
                    ev,
                    top(
                        rrf([(wl, L.get("lexical", [])), (wv, L["vector"]), (wc, L["context"]), (ww, L["window"])], k),
                        names,
                    ),
                )
                for (_, _, ev), L in zip(questions, lists, strict=True)
            ]
        report["window"] = summary(table, questions, records)

    if "scores" in only:
        store._cache.refresh(store._db)
        cache = store._cache
        of_project = {int(r[0]): r[2] for r in rows}
        prepared = []
        for (p, q, ev), v in zip(questions, qv, strict=True):
            match = " OR ".join('"' + t + '"' for t in query_terms(q))
            found = (
                store._db.execute(
                    "SELECT e.rid, -bm25(fts, 1, 0.4, 2) FROM fts JOIN events e ON e.rid = fts.rowid"
                    " WHERE fts MATCH ? AND e.project = ? ORDER BY bm25(fts, 1, 0.4, 2) LIMIT 200",
                    (match, p),
                ).fetchall()
                if match
                else []
            )
            inside = [r for r in cache.index if of_project.get(r) == p]
            rows_at = [cache.index[r] for r in inside]
            vector = np.asarray(v, dtype=np.float32)
            assert cache.own is not None and cache.ctx is not None
            prepared.append((ev, dict(found), inside, cache.own[rows_at] @ vector, cache.ctx[rows_at] @ vector))
        table = {TUNING: defaults}
        for wl, wv, wc, norm in itertools.product(
            (0.3, 0.4, 0.5, 0.6), (0.3, 0.4, 0.5), (0.0, 0.15, 0.3), ("max", "z")
        ):
            out = []
            for ev, lexical, inside, own, ctx in prepared:
                values = np.array(list(lexical.values()) or [0.0])
                if norm == "max":
                    scaled = {r: s / (values.max() or 1.0) for r, s in lexical.items()}
                    floor = 0.0
                else:
                    scaled = {r: (s - values.mean()) / (values.std() + 1e-9) / 4 for r, s in lexical.items()}
                    floor = min(scaled.values(), default=0.0)
                fused = {
                    r: wl * scaled.get(r, floor) + wv * float(o) + wc * float(c)
                    for r, o, c in zip(inside, own, ctx, strict=True)
                }
                out.append(hits(ev, top(fused, names)))
            table[("scores", wl, wv, wc, norm)] = out
        report["scores"] = summary(table, questions, records)

    text = json.dumps(report, indent=2, default=str)
    print(text)
    (ROOT / "bench" / "results" / "locomo_experiments.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
