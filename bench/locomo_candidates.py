"""Round 7 (#20 item 2): the candidate stage. Can a new ranked list, or a learned first stage,
bring the evidence into the fused top 30 that the reranker reorders?

    python bench/locomo_candidates.py [--misses 20] [--reach] [--nested] [--only NAMES]

Candidates: ``prf_*`` (lexical pseudo-relevance feedback as a fourth list), ``session_*`` (the
entries of the sessions with the most fused mass), ``reply_*`` (the entry after each of a list's
first entries), ``stage_*`` (a learned first stage over the three lists' union), ``fusion_*``
(other RRF k and list weights), ``combo_*``. ``--misses N`` lists N questions whose evidence is
below the fused top 30, ``--reach`` where those sit in the new lists and each list's extra CPU,
``--nested`` chooses each family's setting (or none) per split inside the tuning conversations.
Runs merge into ``bench/results/locomo_candidates_round7.json``.

Everything as ``bench/locomo_rerank.py --mixed``: SQLite + MiniLM (vectors cached), the category
1-4 questions of the five dev conversations, the turns with and without their ``Speaker:`` label.
For each candidate the fused scores change (a fourth list fused in, or a learned first stage),
the shipped reranker's 28 features are recomputed over the new fused top 30 and the reranker is
**retrained** on both formats of three conversations (D 30, L2 1e-4, the shipped setting) and
scored held out on each format of the other two, all ten splits. Reported per candidate:
held-out recall_any@5/@10 on labelled and unlabelled turns (means over the splits, per-fold
min/max), the fused order's own held-out figures, and the ceiling: the share of questions with
an evidence turn in the fused top 30.

Every new list is one the stores can already answer for both backends (``_lexical`` with other
terms, ``_vector`` / ``_lexical`` restricted to one session by ``Filters(session=...)``), or is
computed from the three lists' ranks and the candidates' sessions. No constant names a
conversation, a speaker or a question; each list's constants are chosen per fold where said.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from agentkeel.memory import rerank  # noqa: E402
from agentkeel.memory.embed import get_embedder  # noqa: E402
from agentkeel.memory.retrieval import CANDIDATES, Tuning, query_terms, rrf  # noqa: E402
from agentkeel.memory.sql import Filters  # noqa: E402
from agentkeel.memory.sqlite import SQLiteStore  # noqa: E402
from locomo_bench import DATA, load  # noqa: E402
from locomo_cv import CachedEmbedder  # noqa: E402
from locomo_rerank import Pools, recall, score, train  # noqa: E402

DEPTH = 30
PENALTY = 1e-4
RESULTS = ROOT / "bench" / "results" / "locomo_candidates_round7.json"


class World:
    """One format's store (kept open for extra queries), its questions' lists and the rows' facts."""

    def __init__(self, records: list[Any], questions: list[Any], cache: Path) -> None:
        cached = CachedEmbedder(get_embedder("minilm"), cache)  # type: ignore[arg-type]
        self.qvec = cached.embed([q[1] for q in questions])
        self.store = SQLiteStore(Path(tempfile.mkdtemp()) / "x.db", embedder=cached)
        for i in range(0, len(records), 256):
            self.store.add_many(records[i : i + 256])
        cached.save()
        rows = self.store._fetch("SELECT rid, id, project, session, text FROM events", ())
        self.names = {int(r[0]): str(r[1]) for r in rows}
        self.texts = {int(r[0]): str(r[4]) for r in rows}
        self.sessions = {int(r[0]): (str(r[2]), str(r[3])) for r in rows}
        self.questions = questions
        self.lists = [
            self.store.candidates(q, Filters.build(project=p), vector=v)
            for (p, q, _), v in zip(questions, self.qvec, strict=True)
        ]
        self.evidence = [{r for r in self.names if self.names[r] in ev} for _, _, ev in questions]
        # document frequency of each word per project (own text), for feedback term weights
        self.df: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.size: collections.Counter[str] = collections.Counter()
        for rid, text in self.texts.items():
            project = self.sessions[rid][0]
            self.size[project] += 1
            self.df[project].update(set(query_terms(text)))

    def prepared(self, fused: list[dict[int, float]]) -> list[Any]:
        """``locomo_rerank.Pools`` input for these fused scores."""
        out = []
        for lists, f in zip(self.lists, fused, strict=True):
            ids = sorted(f, key=lambda r: (-f[r], r))[:100]
            out.append((lists, f, ids, self.texts, self.sessions, self.names))
        return out


# -- candidate lists ----------------------------------------------------------------------------------
def feedback_terms(world: World, q: int, seeds: list[int], count: int) -> list[str]:
    """RM3-style expansion: the words of the seed entries weighted by (sum over seeds of the word's
    share of the seed's words, the seed weighted by 1/rank) x idf, the first ``count`` not in the query."""
    project = world.questions[q][0]
    asked = set(query_terms(world.questions[q][1]))
    weight: collections.Counter[str] = collections.Counter()
    for rank, rid in enumerate(seeds, start=1):
        words = query_terms(world.texts[rid])
        words = [w for w in words if not w.isdigit() or len(w) == 4]
        for w in words:
            weight[w] += 1.0 / rank / max(1, len(words))
    n = world.size[project]
    scored = {
        w: v * math.log(1 + n / (1 + world.df[project][w]))
        for w, v in weight.items()
        if w not in asked and len(w) > 2 and world.df[project][w] * 10 <= n
    }
    return [w for w, _ in sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:count]]


def prf_lists(world: World, seeds_from: str, m: int, e: int) -> list[list[int]]:
    """A second lexical list: the query's words plus ``e`` feedback words of the first ``m``
    entries of the lexical list (or of the fused order)."""
    out = []
    for q, lists in enumerate(world.lists):
        if seeds_from == "lexical":
            seeds = list(lists.get("lexical", ()))[:m]
        else:
            f = world.store.fuse(lists)
            seeds = sorted(f, key=lambda r: (-f[r], r))[:m]
        terms = query_terms(world.questions[q][1]) + feedback_terms(world, q, seeds, e)
        flt = Filters.build(project=world.questions[q][0])
        out.append(world.store._lexical(terms, flt, CANDIDATES) if terms else [])
    return out


def session_lists(world: World, top: int, column: str) -> list[list[int]]:
    """The ``top`` sessions by fused mass over the three lists; their entries ranked by the
    query's vector (``own``) or BM25 (``lexical``) restricted to each session, interleaved."""
    out = []
    for q, lists in enumerate(world.lists):
        f = world.store.fuse(lists)
        mass: collections.Counter[str] = collections.Counter()
        for rid, s in f.items():
            mass[world.sessions[rid][1]] += s
        best = [s for s, _ in mass.most_common(top)]
        project, question, _ = world.questions[q]
        per = []
        for session in best:
            flt = Filters.build(project=project, session=session)
            if column == "lexical":
                terms = query_terms(question)
                per.append(world.store._lexical(terms, flt, 40) if terms else [])
            else:
                per.append(world.store._vector(world.qvec[q], "own", flt, 40))
        merged: list[int] = []
        for group in itertools.zip_longest(*per):
            merged += [r for r in group if r is not None]
        out.append(merged)
    return out


def reply_lists(world: World, source: str, depth: int) -> list[list[int]]:
    """The entry after each of the first ``depth`` entries of a list (``lexical``, ``vector``) or of
    the fused order, in its session, in that order: the replies to what matched the question's words."""
    out = []
    for lists in world.lists:
        if source != "fused":
            order = list(lists.get(source, ()))
        else:
            f = world.store.fuse(lists)
            order = sorted(f, key=lambda r: (-f[r], r))
        seen: dict[int, None] = {}
        for rid in order[:depth]:
            nxt = rid + 1
            if world.sessions.get(nxt) == world.sessions[rid]:
                seen.setdefault(nxt, None)
        out.append(list(seen))
    return out


def with_list(world: World, extra: list[list[int]], weight: float) -> list[dict[int, float]]:
    t = world.store.tuning
    weights = {"lexical": t.lexical, "vector": t.vector, "context": t.context}
    fused = []
    for lists, more in zip(world.lists, extra, strict=True):
        parts = [(weights[n], r) for n, r in lists.items()] + [(weight, more)]
        fused.append(rrf(parts, t.rrf_k))
    return fused


# -- the learned first stage --------------------------------------------------------------------------
STAGE_FEATURES = 14


def stage_rows(world: World, q: int) -> tuple[list[int], np.ndarray]:
    """Each candidate of the three lists' union: per list 1/(1+rank/10) and presence, the RRF score,
    the same list ranks of the entry before and after it in its session, and its session's share."""
    lists = world.lists[q]
    f = world.store.fuse(lists)
    ranks = {n: {r: i for i, r in enumerate(lists.get(n, ()), start=1)} for n in ("lexical", "vector", "context")}
    union = sorted(f, key=lambda r: (-f[r], r))
    top = max(f.values(), default=1.0) or 1.0
    mass: collections.Counter[str] = collections.Counter()
    for rid, s in f.items():
        mass[world.sessions[rid][1]] += s
    total = sum(mass.values()) or 1.0
    x = np.zeros((len(union), STAGE_FEATURES))
    for i, rid in enumerate(union):
        row: list[float] = []
        for n in ("lexical", "vector", "context"):
            rank = ranks[n].get(rid, 0)
            row += [1.0 / (1.0 + rank / 10) if rank else 0.0, 1.0 if rank else 0.0]
        row.append(f[rid] / top)
        for step in (-1, 1):
            other = rid + step
            same = world.sessions.get(other) == world.sessions[rid]
            row.append(f.get(other, 0.0) / top if same else 0.0)
            rank = ranks["lexical"].get(other, 0) if same else 0
            row.append(1.0 / (1.0 + rank / 10) if rank else 0.0)
        row.append(mass[world.sessions[rid][1]] / total)
        row.append(float(sum(1 for n in ranks if rid in ranks[n]) >= 2))
        x[i] = row[:STAGE_FEATURES] + [0.0] * (STAGE_FEATURES - len(row))
    return union, x


def stage_pools(world: World) -> Pools:
    width = max(len(stage_rows(world, q)[0]) for q in range(len(world.lists)))
    p = Pools(0, [], [])
    p.x = np.zeros((len(world.lists), width, STAGE_FEATURES))
    p.mask = np.zeros((len(world.lists), width), dtype=bool)
    p.pos = np.zeros((len(world.lists), width), dtype=bool)
    p.union = []  # type: ignore[attr-defined]
    for q in range(len(world.lists)):
        union, x = stage_rows(world, q)
        p.x[q, : len(union)] = x
        p.mask[q, : len(union)] = True
        p.pos[q, : len(union)] = [r in world.evidence[q] for r in union]
        p.union.append(union)  # type: ignore[attr-defined]
    return p


def stage_fused(world: World, pools: Pools, w: np.ndarray, blend: float) -> list[dict[int, float]]:
    """The fused scores reordered by the first stage: the RRF score plus ``blend`` x the stage's
    softmax-normalised score (so the reranker's fused features stay on the same scale)."""
    out = []
    for q, lists in enumerate(world.lists):
        f = world.store.fuse(lists)
        union = pools.union[q]  # type: ignore[attr-defined]
        s = pools.x[q, : len(union)] @ w
        s = np.exp(s - s.max())
        top = max(f.values(), default=1.0)
        out.append({r: f[r] + blend * top * float(v) for r, v in zip(union, s, strict=True)})
    return out


# -- evaluation ---------------------------------------------------------------------------------------
def splits(questions: list[Any]) -> list[tuple[np.ndarray, np.ndarray]]:
    project_of = np.array([q[0] for q in questions])
    projects = sorted(set(project_of.tolist()))
    out = []
    for test in itertools.combinations(projects, 2):
        out.append((np.isin(project_of, [p for p in projects if p not in test]), np.isin(project_of, list(test))))
    return out


def ceiling(fused: list[dict[int, float]], evidence: list[set[int]], chosen: np.ndarray, depth: int) -> float:
    got = []
    for q in np.flatnonzero(chosen):
        f = fused[q]
        top = sorted(f, key=lambda r: (-f[r], r))[:depth]
        got.append(any(r in evidence[q] for r in top))
    return sum(got) / len(got)


def evaluate(
    worlds: tuple[World, World],
    fused_of: Callable[[World, np.ndarray], list[dict[int, float]]],
    fixed: bool = True,
) -> dict[str, Any]:
    """The reranker retrained on both formats over the new fused top 30, held out per format.
    ``fused_of(world, fit)`` may use the tuning questions ``fit`` (a learned first stage)."""
    questions = worlds[0].questions
    keep = np.ones(len(rerank.FEATURES), dtype=bool)
    rows: list[list[float]] = []
    cached: list[Any] = []
    for fit, held in splits(questions):
        if not cached or not fixed:
            fused = [fused_of(w, fit) for w in worlds]
            pools = [Pools(DEPTH, questions, w.prepared(f)) for w, f in zip(worlds, fused, strict=True)]
            cached = [fused, pools]
        fused, pools = cached
        both = Pools(0, [], [])
        both.x = np.concatenate([p.x for p in pools])
        both.mask = np.concatenate([p.mask for p in pools])
        both.pos = np.concatenate([p.pos for p in pools])
        w = train(both, np.concatenate([fit, fit]), PENALTY, keep)
        row: list[float] = []
        for p in pools:
            row += recall(score(p, held, w, keep))
        for p in pools:
            row += recall(score(p, held, None, keep))
        row += [ceiling(f, wd.evidence, held, DEPTH) for f, wd in zip(fused, worlds, strict=True)]
        row += recall(score(pools[0], fit, w, keep)) + recall(score(pools[1], fit, w, keep))
        rows.append(row)
    a = np.array(rows)
    mean = [round(float(v), 4) for v in a.mean(0)]
    return {
        "held_out (labelled @5, @10, unlabelled @5, @10)": mean[0:4],
        "fused alone held_out (labelled @5, @10, unlabelled @5, @10)": mean[4:8],
        "ceiling: evidence in the fused top 30 (labelled, unlabelled)": mean[8:10],
        "in_sample (labelled @5, @10, unlabelled @5, @10)": mean[10:14],
        "per_fold_min": [round(float(v), 4) for v in a.min(0)[0:4]],
        "per_fold_max": [round(float(v), 4) for v in a.max(0)[0:4]],
        "per_fold_held_out": [[round(float(v), 4) for v in r[0:4]] for r in rows],
    }


def nested(worlds: tuple[World, World], settings: dict[str, list[list[dict[int, float]]]]) -> dict[str, Any]:
    """The setting (fused scores per format) chosen per split by leave-one-conversation-out inside
    the three tuning conversations (the reranker retrained each time, the sum of the four held-out
    figures), then the reranker trained on the three and scored on the other two."""
    questions = worlds[0].questions
    project_of = np.array([q[0] for q in questions])
    keep = np.ones(len(rerank.FEATURES), dtype=bool)
    pools = {
        name: [Pools(DEPTH, questions, w.prepared(f)) for w, f in zip(worlds, fused, strict=True)]
        for name, fused in settings.items()
    }

    def fit_score(name: str, fit: np.ndarray, held: np.ndarray) -> list[float]:
        lab, unl = pools[name]
        both = Pools(0, [], [])
        both.x, both.mask, both.pos = (
            np.concatenate([lab.x, unl.x]),
            np.concatenate([lab.mask, unl.mask]),
            np.concatenate([lab.pos, unl.pos]),
        )
        w = train(both, np.concatenate([fit, fit]), PENALTY, keep)
        return list(recall(score(lab, held, w, keep)) + recall(score(unl, held, w, keep)))

    rows, chosen = [], []
    for fit, held in splits(questions):
        inner_projects = sorted(set(project_of[fit].tolist()))
        best, best_sum = "", -1.0
        for name in settings:
            total = 0.0
            for left in inner_projects:
                inner_fit = np.isin(project_of, [p for p in inner_projects if p != left])
                got = fit_score(name, inner_fit, project_of == left)
                total += sum(got) * int((project_of == left).sum())
            if total > best_sum + 1e-9:
                best, best_sum = name, total
        chosen.append(best)
        rows.append(fit_score(best, fit, held))
    a = np.array(rows)
    return {
        "settings": list(settings),
        "chosen": collections.Counter(chosen).most_common(),
        "held_out (labelled @5, @10, unlabelled @5, @10)": [round(float(v), 4) for v in a.mean(0)],
        "per_fold_min": [round(float(v), 4) for v in a.min(0)],
        "per_fold_max": [round(float(v), 4) for v in a.max(0)],
    }


def reach(world: World, extras: dict[str, list[list[int]]]) -> dict[str, Any]:
    """For the questions whose evidence is below the shipped fused top 30: the share that each new
    list holds in its own first 30, and whose evidence session is among the 1 / 3 sessions with the
    most fused mass; and the extra CPU of building each list (median ms per question)."""
    deep = []
    for q, lists in enumerate(world.lists):
        f = world.store.fuse(lists)
        if world.evidence[q] and not world.evidence[q] & set(sorted(f, key=lambda r: (-f[r], r))[:DEPTH]):
            deep.append(q)
    out: dict[str, Any] = {"deep_misses": len(deep)}
    for name, extra in extras.items():
        out[f"{name}: holds one in its first 30"] = round(
            sum(bool(world.evidence[q] & set(extra[q][:DEPTH])) for q in deep) / max(1, len(deep)), 3
        )
    for top in (1, 3):
        got = 0
        for q in deep:
            mass: collections.Counter[str] = collections.Counter()
            for rid, s in world.store.fuse(world.lists[q]).items():
                mass[world.sessions[rid][1]] += s
            best = {s for s, _ in mass.most_common(top)}
            got += any(world.sessions[r][1] in best for r in world.evidence[q])
        out[f"evidence session among the top {top} sessions"] = round(got / max(1, len(deep)), 3)
    return out


def timed(call: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1000


def misses(world: World, cats: list[int], count: int) -> list[dict[str, Any]]:
    """Questions whose first evidence turn is below the fused top 30: where it ranks in each list."""
    out = []
    for q, lists in enumerate(world.lists):
        f = world.store.fuse(lists)
        order = sorted(f, key=lambda r: (-f[r], r))
        pos = {r: i for i, r in enumerate(order, start=1)}
        best = min((pos.get(r, 10**6) for r in world.evidence[q]), default=10**6)
        if best <= DEPTH or not world.evidence[q]:
            continue
        first = min(world.evidence[q], key=lambda r: pos.get(r, 10**6))
        ranks = {n: (list(v).index(first) + 1 if first in v else None) for n, v in lists.items()}
        top_sessions = collections.Counter(world.sessions[r][1] for r in order[:30]).most_common(3)
        out.append(
            {
                "category": cats[q],
                "question": world.questions[q][1],
                "evidence": world.texts[first][:160],
                "evidence_session": world.sessions[first][1],
                "fused_rank": best if best < 10**6 else None,
                "list_ranks": ranks,
                "top30_sessions": top_sessions,
            }
        )
    step = max(1, len(out) // count)
    return out[::step][:count]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "keel-bench"))
    parser.add_argument("--misses", type=int, default=0)
    parser.add_argument("--only", default="")
    parser.add_argument("--reach", action="store_true", help="where the deep misses sit in each new list; its CPU")
    parser.add_argument("--nested", action="store_true", help="choose each family's setting per split, nested")
    args = parser.parse_args()
    started = time.perf_counter()
    records, questions = load(DATA)
    bare = [{**r, "text": str(r["text"]).split(": ", 1)[1]} for r in records]
    worlds = (World(records, questions, Path(args.cache)), World(bare, questions, Path(args.cache)))
    samples = json.loads(DATA.read_text())
    cats = [qa["category"] for s in samples for qa in s["qa"] if qa.get("category") in (1, 2, 3, 4)]
    report: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    if args.misses:
        report["misses_unlabelled"] = misses(worlds[1], cats, args.misses)
        report["misses_labelled"] = misses(worlds[0], cats, args.misses)
        print(json.dumps(report["misses_unlabelled"], indent=1))
    wanted = set(args.only.split(",")) if args.only else None

    def run(name: str, fused_of: Callable[[World, np.ndarray], list[dict[int, float]]], fixed: bool = True) -> None:
        if wanted is not None and name not in wanted and not any(name.startswith(w) for w in wanted):
            return
        t0 = time.perf_counter()
        result = evaluate(worlds, fused_of, fixed)
        result["seconds"] = round(time.perf_counter() - t0, 1)
        report.setdefault("candidates", {})[name] = result
        print(name, json.dumps({k: v for k, v in result.items() if k != "per_fold_held_out"}), flush=True)
        RESULTS.write_text(json.dumps(report, indent=2) + "\n")

    base = {id(w): [w.store.fuse(lists) for lists in w.lists] for w in worlds}
    run("shipped", lambda w, fit: base[id(w)])
    replies = (("lexical", 10), ("lexical", 30), ("fused", 10), ("fused", 30), ("vector", 10), ("vector", 30))
    for source, depth in replies:
        extra = {id(w): reply_lists(w, source, depth) for w in worlds}
        for weight in (0.1, 0.2, 0.3):
            run(f"reply_{source}_d{depth}_w{weight}", lambda w, fit, x=extra, g=weight: with_list(w, x[id(w)], g))
    for source, m, e in (("lexical", 3, 5), ("lexical", 5, 10), ("fused", 3, 5), ("fused", 5, 10)):
        extra = {id(w): prf_lists(w, source, m, e) for w in worlds}
        for weight in (0.15, 0.3):
            run(f"prf_{source}_m{m}_e{e}_w{weight}", lambda w, fit, x=extra, g=weight: with_list(w, x[id(w)], g))
    for top, column in ((1, "own"), (2, "own"), (3, "own"), (2, "lexical")):
        extra = {id(w): session_lists(w, top, column) for w in worlds}
        for weight in (0.1, 0.2):
            run(f"session_{column}_top{top}_w{weight}", lambda w, fit, x=extra, g=weight: with_list(w, x[id(w)], g))
    mixes = ((0.55, 0.30, 0.15), (0.45, 0.30, 0.25), (0.40, 0.40, 0.20), (0.60, 0.20, 0.20), (0.35, 0.35, 0.30))
    fusions = {
        f"fusion_k{k:g}_w{'-'.join(f'{x:g}' for x in mix)}": Tuning(
            rrf_k=k, lexical=mix[0], vector=mix[1], context=mix[2]
        )
        for k in (2.0, 5.0, 15.0, 60.0)
        for mix in mixes
        if (k, mix) != (5.0, mixes[0])
    }
    for name, tuning in fusions.items():
        run(name, lambda w, fit, t=tuning: [w.store.fuse(lists, t) for lists in w.lists])
    combo = (
        [
            {id(w): prf_lists(w, "lexical", 3, 5) for w in worlds},
            {id(w): session_lists(w, 3, "own") for w in worlds},
            {id(w): reply_lists(w, "lexical", 30) for w in worlds},
        ]
        if wanted is None or any(w.startswith("combo") for w in wanted)
        else []
    )
    for weight in (0.1, 0.2):

        def combined(w: World, fit: np.ndarray, g: float = weight) -> list[dict[int, float]]:
            t = w.store.tuning
            weights = {"lexical": t.lexical, "vector": t.vector, "context": t.context}
            return [
                rrf([(weights[n], r) for n, r in lists.items()] + [(g, c[id(w)][q]) for c in combo], t.rrf_k)
                for q, lists in enumerate(w.lists)
            ]

        run(f"combo_prf_session_reply_w{weight}", combined)
    stages = {id(w): stage_pools(w) for w in worlds} if wanted is None or "stage" in args.only else {}
    for blend in (0.5, 1.0, 3.0):

        def learned(w: World, fit: np.ndarray, b: float = blend) -> list[dict[int, float]]:
            both = Pools(0, [], [])
            parts = [stages[id(v)] for v in worlds]
            width = max(p.x.shape[1] for p in parts)

            def pad(a: np.ndarray) -> np.ndarray:
                shape = list(a.shape)
                shape[1] = width - a.shape[1]
                return np.concatenate([a, np.zeros(shape, dtype=a.dtype)], axis=1)

            both.x = np.concatenate([pad(p.x) for p in parts])
            both.mask = np.concatenate([pad(p.mask) for p in parts])
            both.pos = np.concatenate([pad(p.pos) for p in parts])
            wt = train(both, np.concatenate([fit, fit]), PENALTY, np.ones(STAGE_FEATURES, dtype=bool))
            return stage_fused(w, stages[id(w)], wt, b)

        run(f"stage_blend{blend}", learned, fixed=False)
    if args.reach:
        for label, w in zip(("labelled", "unlabelled"), worlds, strict=True):
            extras = {
                "prf_lexical_m3_e5": prf_lists(w, "lexical", 3, 5),
                "session_own_top3": session_lists(w, 3, "own"),
                "reply_lexical_d30": reply_lists(w, "lexical", 30),
            }
            report.setdefault("reach", {})[label] = reach(w, extras)
        w = worlds[1]
        costs: dict[str, list[float]] = collections.defaultdict(list)
        for _ in range(3):
            for q in range(len(questions)):
                sub = World.__new__(World)
                sub.__dict__.update(w.__dict__)
                sub.lists, sub.questions, sub.qvec = [w.lists[q]], [w.questions[q]], [w.qvec[q]]
                costs["prf_lexical_m3_e5"].append(timed(lambda s=sub: prf_lists(s, "lexical", 3, 5)))
                costs["session_own_top3"].append(timed(lambda s=sub: session_lists(s, 3, "own")))
                costs["lexical list (shipped, for scale)"].append(
                    timed(
                        lambda s=sub, i=q: w.store._lexical(
                            query_terms(questions[i][1]), Filters.build(project=questions[i][0]), CANDIDATES
                        )
                    )
                )
        report["extra_cpu_ms_p50 (unlabelled, 3 x 762 questions)"] = {
            k: round(statistics.median(v), 3) for k, v in costs.items()
        }
        print(json.dumps({k: report[k] for k in ("reach", "extra_cpu_ms_p50 (unlabelled, 3 x 762 questions)")}))
        RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    if args.nested:
        shipped = [base[id(w)] for w in worlds]
        made: dict[str, dict[int, list[list[int]]]] = {}
        for source, m, e in (("lexical", 3, 5), ("lexical", 5, 10), ("fused", 3, 5), ("fused", 5, 10)):
            made[f"prf_{source}_m{m}_e{e}"] = {id(w): prf_lists(w, source, m, e) for w in worlds}
        for top in (1, 2, 3):
            made[f"session_own_top{top}"] = {id(w): session_lists(w, top, "own") for w in worlds}
        for source, depth in (("lexical", 10), ("lexical", 30), ("fused", 10), ("fused", 30)):
            made[f"reply_{source}_d{depth}"] = {id(w): reply_lists(w, source, depth) for w in worlds}
        if wanted is not None and "fusion" in wanted:
            settings = {"shipped": shipped}
            for name, tuning in fusions.items():
                settings[name] = [[w.store.fuse(lists, tuning) for lists in w.lists] for w in worlds]
            t0 = time.perf_counter()
            report.setdefault("nested", {})["fusion"] = result = nested(worlds, settings)
            result["seconds"] = round(time.perf_counter() - t0, 1)
            print("nested fusion", json.dumps(result), flush=True)
            RESULTS.write_text(json.dumps(report, indent=2) + "\n")
        for family in ("prf", "session", "reply") if wanted is None or "fusion" not in wanted else ():
            settings = {"shipped": shipped}
            for name, extra in made.items():
                if name.startswith(family):
                    for weight in (0.1, 0.2, 0.3):
                        settings[f"{name}_w{weight}"] = [with_list(w, extra[id(w)], weight) for w in worlds]
            t0 = time.perf_counter()
            report.setdefault("nested", {})[family] = result = nested(worlds, settings)
            result["seconds"] = round(time.perf_counter() - t0, 1)
            print("nested", family, json.dumps(result), flush=True)
            RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    report["seconds"] = round(time.perf_counter() - started, 1)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print("total", report["seconds"], "s")


if __name__ == "__main__":
    main()
