"""Round 6 (#20 item 2): a miss analysis of the shipped reranker and non-linear / pool-relative candidates.

    python bench/locomo_nonlinear.py [--steps 400] [--hidden 8]

Everything as ``bench/locomo_rerank.py --mixed``: SQLite + MiniLM (vectors cached), the
category 1-4 questions of the five dev conversations, the turns with and without their
``Speaker:`` label, trained on both formats of three conversations and scored held out on
each format of the other two, all ten splits. Reported per candidate: held-out recall_any@5/@10
on labelled and unlabelled turns (means and per-fold min/max), and in-sample.

Candidates (each one chosen by the held-out figure only; no constant depends on a conversation):

* ``linear``: the shipped model (28 features, D 30, L2 1e-4): the baseline;
* ``linear_d50``: the same over the fused top 50;
* ``pool_relative``: each feature also as its difference to the pool's maximum (84 -> 56 extra
  columns: ``x - max``; the rank within the pool is the second block);
* ``mlp``: a one-hidden-layer network (tanh, H units) added to the linear score, same loss;
* ``entity``: the question's capitalised words in the entry's session neighbours (no speaker label);
* ``dates``: for a question naming a month / year, the entry's session date in it or within a month;
* combinations of these, at depth 30 and 50. ``--only a,b`` runs some and merges into the results file.

The miss analysis: for the shipped setting, the questions still missed at @10 held out, by
LoCoMo category, and where their first evidence turn sits in the fused list.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from agentkeel.memory import rerank  # noqa: E402
from locomo_bench import DATA, load  # noqa: E402
from locomo_rerank import Pools, prepare  # noqa: E402


def categories() -> list[int]:
    out = []
    for sample in json.loads(DATA.read_text()):
        out += [qa["category"] for qa in sample["qa"] if qa.get("category") in (1, 2, 3, 4)]
    return out


def relative(pools: Pools) -> Pools:
    """Each feature plus its difference to the pool's maximum and its rank share within the pool."""
    x, mask = pools.x, pools.mask
    masked = np.where(mask[:, :, None], x, -np.inf)
    top = masked.max(1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    diff = np.where(mask[:, :, None], x - top, 0.0)
    order = (-masked).argsort(1, kind="stable").argsort(1, kind="stable")
    rank = np.where(mask[:, :, None], 1.0 / (1.0 + order), 0.0)
    out = Pools(0, [], [])
    out.x, out.mask, out.pos = np.concatenate([x, diff, rank], axis=2), mask, pools.pos
    return out


def with_entity(pools: Pools, questions: list[Any], prepared: list[Any]) -> Pools:
    """Three more columns: the share of the question's capitalised words (not its first word) in the
    entry before, the entry after, and anywhere in rid-2..rid+2 of the same session (the names a
    turn's neighbours hold, which needs no speaker label)."""
    depth = pools.x.shape[1]
    extra = np.zeros((len(questions), depth, 3))
    for q, ((_, question, _), (_, _, ids, texts, sessions, _)) in enumerate(zip(questions, prepared, strict=True)):
        first = question.strip().split(" ", 1)[0]
        caps = {w.lower() for w in rerank._CAPITALISED.findall(question) if w != first}
        if not caps:
            continue

        def share(rid: int, step: int, texts: Any = texts, sessions: Any = sessions, caps: set[str] = caps) -> float:
            other = rid + step
            if other not in texts or sessions.get(other) != sessions.get(rid):
                return 0.0
            return len(caps & set(rerank._words(texts[other][:400]))) / len(caps)

        for d, rid in enumerate(ids[:depth]):
            extra[q, d] = [share(rid, -1), share(rid, 1), max(share(rid, s) for s in (-2, -1, 0, 1, 2))]
    out = Pools(0, [], [])
    out.x, out.mask, out.pos = np.concatenate([pools.x, extra], axis=2), pools.mask, pools.pos
    return out


_MONTHS = "january february march april may june july august september october november december".split()


def with_dates(pools: Pools, questions: list[Any], prepared: list[Any], stamps: dict[str, str]) -> Pools:
    """Two more columns for a question naming a month (and maybe a year): the entry's session date
    is in that month (and year), or within a month of it (the turn may say "last week")."""
    depth = pools.x.shape[1]
    extra = np.zeros((len(questions), depth, 2))
    for q, ((_, question, _), (_, _, ids, _, _, names)) in enumerate(zip(questions, prepared, strict=True)):
        words = rerank._words(question)
        months = [i + 1 for i, m in enumerate(_MONTHS) if m in words and not (m == "may" and words[0] == "may")]
        years = [int(w) for w in words if w.isdigit() and len(w) == 4]
        if not months and not years:
            continue
        for d, rid in enumerate(ids[:depth]):
            stamp = stamps.get(names[rid], "")
            if not stamp:
                continue
            year, month = int(stamp[:4]), int(stamp[5:7])
            year_ok = not years or year in years
            exact = year_ok and (not months or month in months)
            near = any(abs((year * 12 + month) - ((years[0] if years else year) * 12 + m)) <= 1 for m in months)
            extra[q, d] = [float(exact), float(near or exact)]
    out = Pools(0, [], [])
    out.x, out.mask, out.pos = np.concatenate([pools.x, extra], axis=2), pools.mask, pools.pos
    return out


def stack(a: Pools, b: Pools) -> Pools:
    out = Pools(0, [], [])
    out.x, out.mask, out.pos = (
        np.concatenate([a.x, b.x]),
        np.concatenate([a.mask, b.mask]),
        np.concatenate([a.pos, b.pos]),
    )
    return out


def fit(
    pools: Pools, chosen: np.ndarray, penalty: float, hidden: int, steps: int, seed: int = 0
) -> dict[str, np.ndarray]:
    """Listwise loss (minus log softmax mass on the evidence) + L2; linear term plus ``hidden`` tanh units."""
    useful = chosen & pools.pos.any(1)
    x, mask, pos = pools.x[useful], pools.mask[useful], pools.pos[useful]
    f = x.shape[2]
    rng = np.random.default_rng(seed)
    params = {
        "w": np.zeros(f),
        "W": rng.normal(0.0, 0.3, (f, hidden)),
        "b": np.zeros(hidden),
        "v": rng.normal(0.0, 0.1, hidden),
    }
    m = {k: np.zeros_like(p) for k, p in params.items()}
    s2 = {k: np.zeros_like(p) for k, p in params.items()}
    for step in range(1, steps + 1):
        t = np.tanh(x @ params["W"] + params["b"]) if hidden else None
        s = x @ params["w"] + (t @ params["v"] if t is not None else 0.0)
        s = np.where(mask, s, -np.inf)
        s -= s.max(1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(1, keepdims=True)
        q = np.where(pos, p, 0.0)
        q /= q.sum(1, keepdims=True)
        g = (p - q) / len(x)
        grads = {"w": np.einsum("qd,qdf->f", g, x) + 2 * penalty * params["w"]}
        if t is not None:
            grads["v"] = np.einsum("qd,qdh->h", g, t) + 2 * penalty * params["v"]
            ga = g[:, :, None] * params["v"] * (1 - t**2)
            grads["W"] = np.einsum("qdh,qdf->fh", ga, x) + 2 * penalty * params["W"]
            grads["b"] = ga.sum((0, 1))
        for k, gr in grads.items():
            m[k] = 0.9 * m[k] + 0.1 * gr
            s2[k] = 0.999 * s2[k] + 0.001 * gr**2
            params[k] -= 0.05 * (m[k] / (1 - 0.9**step)) / (np.sqrt(s2[k] / (1 - 0.999**step)) + 1e-8)
    return params


def ranks(pools: Pools, chosen: np.ndarray, params: dict[str, np.ndarray] | None, hidden: int) -> dict[int, int]:
    """Per chosen question: the 1-based position of its first evidence turn after reordering (0: not in the pool)."""
    out = {}
    for q in np.flatnonzero(chosen):
        n = int(pools.mask[q].sum())
        if params is None:
            order = np.arange(n)
        else:
            x = pools.x[q, :n]
            s = x @ params["w"]
            if hidden:
                s = s + np.tanh(x @ params["W"] + params["b"]) @ params["v"]
            order = np.lexsort((np.arange(n), -s))
        hit = np.flatnonzero(pools.pos[q, :n][order])
        out[int(q)] = int(hit[0]) + 1 if len(hit) else 0
    return out


def recall(positions: dict[int, int]) -> tuple[float, float]:
    n = len(positions) or 1
    return (sum(0 < r <= 5 for r in positions.values()) / n, sum(0 < r <= 10 for r in positions.values()) / n)


def evaluate(
    name: str, labelled: Pools, unlabelled: Pools, project_of: np.ndarray, penalty: float, hidden: int, steps: int
) -> dict[str, Any]:
    projects = sorted(set(project_of.tolist()))
    both = stack(labelled, unlabelled)
    folds = []
    held_ranks: dict[str, dict[int, int]] = {"labelled": {}, "unlabelled": {}}
    for test in itertools.combinations(projects, 2):
        train_on = np.isin(project_of, [p for p in projects if p not in test])
        held = np.isin(project_of, list(test))
        params = fit(both, np.concatenate([train_on, train_on]), penalty, hidden, steps)
        row = {"test": list(test)}
        for fmt, pools in (("labelled", labelled), ("unlabelled", unlabelled)):
            got = ranks(pools, held, params, hidden)
            held_ranks[fmt].update(got)  # each question is held out in four splits: the last one stays
            row[fmt] = recall(got)
            row[fmt + "_in_sample"] = recall(ranks(pools, train_on, params, hidden))
        folds.append(row)
    out: dict[str, Any] = {"candidate": name, "penalty": penalty, "hidden": hidden, "features": labelled.x.shape[2]}
    for fmt in ("labelled", "unlabelled"):
        for i, at in enumerate((5, 10)):
            vals = [f[fmt][i] for f in folds]
            out[f"{fmt}@{at}"] = round(statistics.fmean(vals), 4)
            out[f"{fmt}@{at} folds (min, max)"] = [round(min(vals), 4), round(max(vals), 4)]
            out[f"{fmt}@{at} in-sample"] = round(statistics.fmean(f[fmt + "_in_sample"][i] for f in folds), 4)
    out["_ranks"] = held_ranks
    return out


def misses(result: dict[str, Any], fused: dict[str, dict[int, int]], cats: list[int]) -> dict[str, Any]:
    """The held-out misses at @10 by category, and the fused position of their first evidence turn."""
    out: dict[str, Any] = {}
    for fmt, got in result["_ranks"].items():
        by_cat: dict[int, list[int]] = collections.defaultdict(list)
        for q, r in got.items():
            by_cat[cats[q]].append(r)
        where = collections.Counter()
        for q, r in got.items():
            if not 0 < r <= 10:
                f = fused[fmt].get(q, 0)
                where[
                    "11-30"
                    if 10 < f <= 30
                    else "31-50"
                    if 30 < f <= 50
                    else "51-100"
                    if 50 < f <= 100
                    else "not in top 100"
                    if f == 0
                    else "1-10 (pushed out)"
                ] += 1
        out[fmt] = {
            "recall@10 by category (n)": {
                c: [round(sum(0 < r <= 10 for r in v) / len(v), 3), len(v)] for c, v in sorted(by_cat.items())
            },
            "misses@10": sum(not 0 < r <= 10 for r in got.values()),
            "misses' first evidence in the fused list": dict(where),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--hidden", type=int, default=8)
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "keel-bench"))
    parser.add_argument("--only", default="", help="comma-separated candidate names")
    args = parser.parse_args()
    records, questions = load(DATA)
    cats = categories()
    stamps = {str(r["id"]): str(r["timestamp"]) for r in records}
    bare = [{**r, "text": str(r["text"]).split(": ", 1)[1]} for r in records]
    prep = {
        "labelled": prepare(records, questions, Path(args.cache)),
        "unlabelled": prepare(bare, questions, Path(args.cache)),
    }
    pools = {(fmt, d): Pools(d, questions, p) for fmt, p in prep.items() for d in (30, 50, 100)}
    project_of = np.array([q[0] for q in questions])
    fused = {fmt: ranks(pools[(fmt, 100)], np.ones(len(questions), dtype=bool), None, 0) for fmt in prep}
    candidates = {
        "linear": lambda: evaluate(
            "linear", pools[("labelled", 30)], pools[("unlabelled", 30)], project_of, 1e-4, 0, args.steps
        ),
        "linear_d50": lambda: evaluate(
            "linear_d50", pools[("labelled", 50)], pools[("unlabelled", 50)], project_of, 1e-4, 0, args.steps
        ),
        "pool_relative": lambda: evaluate(
            "pool_relative",
            relative(pools[("labelled", 30)]),
            relative(pools[("unlabelled", 30)]),
            project_of,
            1e-4,
            0,
            args.steps,
        ),
        "entity": lambda: evaluate(
            "entity",
            with_entity(pools[("labelled", 30)], questions, prep["labelled"]),
            with_entity(pools[("unlabelled", 30)], questions, prep["unlabelled"]),
            project_of,
            1e-4,
            0,
            args.steps,
        ),
        "pool_relative_l2_1e-3": lambda: evaluate(
            "pool_relative_l2_1e-3",
            relative(pools[("labelled", 30)]),
            relative(pools[("unlabelled", 30)]),
            project_of,
            1e-3,
            0,
            args.steps,
        ),
        "pool_relative_d50": lambda: evaluate(
            "pool_relative_d50",
            relative(pools[("labelled", 50)]),
            relative(pools[("unlabelled", 50)]),
            project_of,
            1e-4,
            0,
            args.steps,
        ),
        "entity_pool_relative": lambda: evaluate(
            "entity_pool_relative",
            relative(with_entity(pools[("labelled", 30)], questions, prep["labelled"])),
            relative(with_entity(pools[("unlabelled", 30)], questions, prep["unlabelled"])),
            project_of,
            1e-4,
            0,
            args.steps,
        ),
        "dates": lambda: evaluate(
            "dates",
            with_dates(pools[("labelled", 30)], questions, prep["labelled"], stamps),
            with_dates(pools[("unlabelled", 30)], questions, prep["unlabelled"], stamps),
            project_of,
            1e-4,
            0,
            args.steps,
        ),
        "dates_d50": lambda: evaluate(
            "dates_d50",
            with_dates(pools[("labelled", 50)], questions, prep["labelled"], stamps),
            with_dates(pools[("unlabelled", 50)], questions, prep["unlabelled"], stamps),
            project_of,
            1e-4,
            0,
            args.steps,
        ),
        "mlp4_l2_1e-2": lambda: evaluate(
            "mlp4_l2_1e-2", pools[("labelled", 30)], pools[("unlabelled", 30)], project_of, 1e-2, 4, args.steps * 2
        ),
        "mlp": lambda: evaluate(
            f"mlp{args.hidden}",
            pools[("labelled", 30)],
            pools[("unlabelled", 30)],
            project_of,
            1e-3,
            args.hidden,
            args.steps * 2,
        ),
    }

    def spec(name: str) -> Any:
        """``spec/D/L2/flags``: depth D, penalty L2, flags any of ``rel`` (pool-relative), ``entity``, ``dates``."""
        _, depth, penalty, flags = name.split("/")

        def build(fmt: str) -> Pools:
            got = pools[(fmt, int(depth))]
            got = with_entity(got, questions, prep[fmt]) if "entity" in flags else got
            got = with_dates(got, questions, prep[fmt], stamps) if "dates" in flags else got
            return relative(got) if "rel" in flags else got

        return lambda: evaluate(name, build("labelled"), build("unlabelled"), project_of, float(penalty), 0, args.steps)

    wanted = [c for c in args.only.split(",") if c] or list(candidates)
    candidates.update({c: spec(c) for c in wanted if c.startswith("spec/")})
    report: dict[str, Any] = {
        "fused_held_out": {fmt: recall({q: r if r <= 30 else 0 for q, r in fused[fmt].items()}) for fmt in fused}
    }
    for name in wanted:
        result = candidates[name]()
        if name == "linear":
            report["miss_analysis (shipped setting)"] = misses(result, fused, cats)
        result.pop("_ranks")
        report[name] = result
        print(json.dumps(result), flush=True)
    out = ROOT / "bench" / "results" / "locomo_nonlinear.json"
    if args.only and out.exists():
        report = {**json.loads(out.read_text()), **report}
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report.get("miss_analysis (shipped setting)"), indent=1))


if __name__ == "__main__":
    main()
