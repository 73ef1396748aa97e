"""The learned reranking stage (``agentkeel.memory.rerank``), trained and scored by cross-validation.

    python bench/locomo_rerank.py [--no-speaker] [--write-weights]

For every category 1-4 question of the five dev conversations (records and questions of
``bench/locomo_bench.py``, SQLite + MiniLM, vectors cached as in ``locomo_cv.py``), the store's
own candidate lists and fusion give a pool (the fused top D); ``rerank.features`` describes each
(question, candidate) pair. A linear model is fitted with a listwise loss: minus the log of the
softmax probability mass on the pool's evidence turns (recall_any's own notion of a hit), plus
an L2 penalty.

Nested cross-validation, the same ten splits as ``locomo_cv.py``: for each split, the pool depth
D and the penalty are chosen by leave-one-conversation-out inside the three tuning
conversations, the model is trained on the three with them, and scored on the other two.
Reported: held-out and in-sample recall_any@5/@10 (means over the splits), the shipped fusion
alone on the same folds, every fixed (D, penalty) held out, and feature-group ablations.

``--no-speaker`` stores each turn without its ``Speaker:`` label (keel's own entries have no
such label), so a gain that came from matching the speaker's name would disappear.
``--write-weights`` prints the weights trained on all five conversations with the setting
the folds chose most often. ``--mixed`` trains on the turns with and without their label
together (that setting, D 30 and L2 1e-4), scores each format held out, and gives the weights
trained so on all five: the shipped ``rerank.TRAINED``.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from agentkeel.memory import rerank  # noqa: E402
from agentkeel.memory.embed import get_embedder  # noqa: E402
from agentkeel.memory.sql import Filters  # noqa: E402
from agentkeel.memory.sqlite import SQLiteStore  # noqa: E402
from locomo_bench import DATA, load  # noqa: E402
from locomo_cv import CachedEmbedder  # noqa: E402

DEPTHS = (30, 50, 100)
PENALTIES = (0.0001, 0.001, 0.01)
GROUPS = {
    "ranks": ("lexical_rank", "lexical_log_rank", "vector_rank", "vector_log_rank", "context_rank", "context_log_rank"),
    "words": ("coverage", "idf_coverage", "all_terms", "proximity"),
    "capitalised": ("capitalised",),
    "numbers_time": ("numbers", "when_time"),
    "length": ("length",),
    "neighbours": ("previous_fused", "next_fused"),
    "dialogue": ("question", "previous_coverage", "previous_question_coverage", "next_coverage"),
    "dialogue_more": ("second_previous_coverage", "previous_vector_rank", "previous_lexical_rank"),
    "session_and_when": ("session_share", "when_lexical", "when_vector"),
}


class Pools:
    """Per question and depth: the feature matrix of its pool, which rows are evidence, the pool's ids."""

    def __init__(self, depth: int, questions: list[Any], prepared: list[Any]) -> None:
        self.depth = depth
        self.x = np.zeros((len(questions), depth, len(rerank.FEATURES)), dtype=np.float64)
        self.mask = np.zeros((len(questions), depth), dtype=bool)
        self.pos = np.zeros((len(questions), depth), dtype=bool)
        for q, ((_, question, evidence), (lists, fused, ids, texts, sessions, names)) in enumerate(
            zip(questions, prepared, strict=True)
        ):
            pool = ids[:depth]
            if not pool:
                continue
            rows = rerank.features(question, lists, fused, pool, texts, sessions)
            self.x[q, : len(pool)] = rows
            self.mask[q, : len(pool)] = True
            self.pos[q, : len(pool)] = [names[r] in evidence for r in pool]


def train(pools: Pools, chosen: np.ndarray, penalty: float, keep: np.ndarray, steps: int = 400) -> np.ndarray:
    """Weights minimising -log(softmax mass on the positives) + penalty * |w|^2 (Adam, full batch)."""
    useful = chosen & pools.pos.any(1)
    x, mask, pos = pools.x[useful][:, :, keep], pools.mask[useful], pools.pos[useful]
    w = np.zeros(x.shape[2])
    m, v = np.zeros_like(w), np.zeros_like(w)
    for step in range(1, steps + 1):
        s = np.where(mask, x @ w, -np.inf)
        s -= s.max(1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(1, keepdims=True)
        q = np.where(pos, p, 0.0)
        q /= q.sum(1, keepdims=True)
        grad = np.einsum("qd,qdf->f", p - q, x) / len(x) + 2 * penalty * w
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        w -= 0.05 * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return w


def score(pools: Pools, chosen: np.ndarray, w: np.ndarray | None, keep: np.ndarray) -> list[tuple[bool, bool]]:
    """(hit@5, hit@10) of the chosen questions with the pool ordered by ``w`` (None: fused order)."""
    out = []
    for q in np.flatnonzero(chosen):
        n = int(pools.mask[q].sum())
        if w is None:
            order = np.arange(n)
        else:
            s = pools.x[q, :n][:, keep] @ w
            order = np.lexsort((np.arange(n), -s))
        pos = pools.pos[q, :n][order]
        out.append((bool(pos[:5].any()), bool(pos[:10].any())))
    return out


def recall(hits: list[tuple[bool, bool]]) -> tuple[float, float]:
    return (sum(h[0] for h in hits) / len(hits), sum(h[1] for h in hits) / len(hits)) if hits else (0.0, 0.0)


def nested(pools: dict[int, Pools], project_of: np.ndarray, projects: list[str], keep: np.ndarray) -> dict[str, Any]:
    folds = []
    for test in itertools.combinations(projects, 2):
        train_p = [p for p in projects if p not in test]
        inner: dict[tuple[int, float], list[float]] = {}
        for depth, penalty in itertools.product(DEPTHS, PENALTIES):
            got = []
            for left in train_p:
                fit = np.isin(project_of, [p for p in train_p if p != left])
                w = train(pools[depth], fit, penalty, keep)
                got += score(pools[depth], project_of == left, w, keep)
            inner[(depth, penalty)] = list(recall(got))
        best = max(inner, key=lambda s: (sum(inner[s]), -s[1]))
        fit, held = np.isin(project_of, train_p), np.isin(project_of, list(test))
        w = train(pools[best[0]], fit, best[1], keep)
        folds.append(
            {
                "test": list(test),
                "chosen": list(best),
                "in_sample": recall(score(pools[best[0]], fit, w, keep)),
                "held_out": recall(score(pools[best[0]], held, w, keep)),
                "fused_held_out": recall(score(pools[100], held, None, keep)),
            }
        )

    def avg(key: str, i: int) -> float:
        return round(statistics.fmean(f[key][i] for f in folds), 4)

    gains5 = [f["held_out"][0] - f["fused_held_out"][0] for f in folds]
    gains10 = [f["held_out"][1] - f["fused_held_out"][1] for f in folds]
    return {
        "held_out@5": avg("held_out", 0),
        "held_out@10": avg("held_out", 1),
        "in_sample@5": avg("in_sample", 0),
        "in_sample@10": avg("in_sample", 1),
        "fused_held_out@5": avg("fused_held_out", 0),
        "fused_held_out@10": avg("fused_held_out", 1),
        "gain@5 per fold (min, max)": [round(min(gains5), 4), round(max(gains5), 4)],
        "gain@10 per fold (min, max)": [round(min(gains10), 4), round(max(gains10), 4)],
        "folds_improved@5": sum(g > 0 for g in gains5),
        "folds_improved@10": sum(g > 0 for g in gains10),
        "chosen": collections.Counter(f"D={f['chosen'][0]} l2={f['chosen'][1]}" for f in folds).most_common(),
        "folds": folds,
    }


def fixed(pools: dict[int, Pools], project_of: np.ndarray, projects: list[str], keep: np.ndarray) -> dict[str, Any]:
    """Every (D, penalty) trained on three and scored on two, without choosing: the spread of the grid."""
    out = {}
    for depth, penalty in itertools.product(DEPTHS, PENALTIES):
        held = []
        for test in itertools.combinations(projects, 2):
            fit = np.isin(project_of, [p for p in projects if p not in test])
            w = train(pools[depth], fit, penalty, keep)
            held.append(recall(score(pools[depth], np.isin(project_of, list(test)), w, keep)))
        out[f"D={depth} l2={penalty}"] = [round(statistics.fmean(h[i] for h in held), 4) for i in (0, 1)]
    return out


def mixed(records: list[Any], questions: list[Any], cache: Path, depth: int, penalty: float) -> dict[str, Any]:
    """Trained on the turns both with and without their ``Speaker:`` label (the shipped weights:
    keel's own entries have no label), scored held out on each format, the same ten splits."""
    bare = [{**r, "text": str(r["text"]).split(": ", 1)[1]} for r in records]
    labelled = Pools(depth, questions, prepare(records, questions, cache))
    unlabelled = Pools(depth, questions, prepare(bare, questions, cache))
    both = Pools(0, [], [])
    both.x = np.concatenate([labelled.x, unlabelled.x])
    both.mask = np.concatenate([labelled.mask, unlabelled.mask])
    both.pos = np.concatenate([labelled.pos, unlabelled.pos])
    project_of = np.array([q[0] for q in questions])
    projects = sorted(set(project_of.tolist()))
    keep = np.ones(len(rerank.FEATURES), dtype=bool)
    rows: dict[str, list[tuple[float, ...]]] = {"labelled_only": [], "both": [], "fused": []}
    for test in itertools.combinations(projects, 2):
        fit = np.isin(project_of, [p for p in projects if p not in test])
        held = np.isin(project_of, list(test))
        trained = {
            "labelled_only": train(labelled, fit, penalty, keep),
            "both": train(both, np.concatenate([fit, fit]), penalty, keep),
            "fused": None,
        }
        for name, w in trained.items():
            rows[name].append(recall(score(labelled, held, w, keep)) + recall(score(unlabelled, held, w, keep)))
    every = np.ones(len(questions), dtype=bool)
    w = train(both, np.concatenate([every, every]), penalty, keep)
    return {
        "setting": {"depth": depth, "penalty": penalty},
        "held_out (labelled @5, @10, unlabelled @5, @10)": {
            name: [round(statistics.fmean(r[i] for r in got), 4) for i in range(4)] for name, got in rows.items()
        },
        "weights_both_formats_all_five": dict(zip(rerank.FEATURES, [round(float(x), 4) for x in w], strict=True)),
        "in_sample_all_five (labelled, unlabelled)": [
            recall(score(labelled, every, w, keep)),
            recall(score(unlabelled, every, w, keep)),
        ],
    }


def prepare(records: list[Any], questions: list[Any], cache: Path) -> list[Any]:
    cached = CachedEmbedder(get_embedder("minilm"), cache)  # type: ignore[arg-type]
    vectors = cached.embed([q[1] for q in questions])
    store = SQLiteStore(Path(tempfile.mkdtemp()) / "x.db", embedder=cached)
    for i in range(0, len(records), 256):
        store.add_many(records[i : i + 256])
    cached.save()
    rows = store._fetch("SELECT rid, id, project, session, text FROM events", ())
    names = {int(r[0]): str(r[1]) for r in rows}
    texts = {int(r[0]): str(r[4]) for r in rows}
    sessions = {int(r[0]): (str(r[2]), str(r[3])) for r in rows}
    prepared = []
    for (project, question, _), vector in zip(questions, vectors, strict=True):
        lists = store.candidates(question, Filters.build(project=project), vector=vector)
        fused = store.fuse(lists)
        ids = sorted(fused, key=lambda r: -fused[r])[: max(DEPTHS)]
        prepared.append((lists, fused, ids, texts, sessions, names))
    store.close()
    return prepared


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-speaker", action="store_true", help="store each turn without its 'Speaker:' label")
    parser.add_argument("--write-weights", action="store_true")
    parser.add_argument("--ablate", action="store_true", help="also leave out each feature group in turn")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "keel-bench"))
    parser.add_argument(
        "--mixed", action="store_true", help="train on labelled and unlabelled turns together (D 30, L2 1e-4)"
    )
    args = parser.parse_args()
    records, questions = load(DATA)
    if args.mixed:
        report = mixed(records, questions, Path(args.cache), 30, 1e-4)
        print(json.dumps(report, indent=2))
        (ROOT / "bench" / "results" / "locomo_rerank_mixed.json").write_text(json.dumps(report, indent=2) + "\n")
        return
    if args.no_speaker:
        for r in records:
            r["text"] = str(r["text"]).split(": ", 1)[1]
    started = time.perf_counter()
    prepared = prepare(records, questions, Path(args.cache))
    pools = {d: Pools(d, questions, prepared) for d in DEPTHS}
    project_of = np.array([q[0] for q in questions])
    projects = sorted(set(project_of.tolist()))
    every = np.ones(len(rerank.FEATURES), dtype=bool)
    report: dict[str, Any] = {"no_speaker": args.no_speaker, "features": list(rerank.FEATURES)}
    report["all_features"] = nested(pools, project_of, projects, every)
    report["fixed_settings_held_out"] = fixed(pools, project_of, projects, every)
    if args.ablate:
        report["ablations (held-out @5, @10 without the group)"] = {}
        for name, group in GROUPS.items():
            keep = np.array([f not in group for f in rerank.FEATURES])
            result = nested(pools, project_of, projects, keep)
            report["ablations (held-out @5, @10 without the group)"][name] = [
                result["held_out@5"],
                result["held_out@10"],
            ]
    if args.write_weights:
        depth, penalty = (
            int(x.split("=")[1]) if i == 0 else float(x.split("=")[1])
            for i, x in enumerate(report["all_features"]["chosen"][0][0].split())
        )
        w = train(pools[depth], np.ones(len(questions), dtype=bool), penalty, every)
        report["weights_all_five"] = {"depth": depth, "penalty": penalty, "weights": [round(float(x), 4) for x in w]}
        report["all_five_in_sample"] = recall(score(pools[depth], np.ones(len(questions), dtype=bool), w, every))
    report["seconds"] = round(time.perf_counter() - started, 1)
    text = json.dumps(report, indent=2)
    print(json.dumps({k: v for k, v in report.items()}, indent=2, default=str)[:6000])
    suffix = "_no_speaker" if args.no_speaker else ""
    (ROOT / "bench" / "results" / f"locomo_rerank{suffix}.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
