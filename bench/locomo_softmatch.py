"""Round 8 (#20 item 2): a soft word-match feature family for the reranker, from MiniLM's static word vectors.

    python bench/locomo_softmatch.py [--only a,b] [--steps 400]

No download and no model call: the vectors are the rows of MiniLM's input embedding table
(``embeddings.word_embeddings.weight``, 30522 x 384, in the installed ``model.safetensors``),
one per wordpiece of its ``tokenizer.json``. For each (question, entry), each content wordpiece
of the question (``[CLS]``/``[SEP]``, pure punctuation and whole-word ``retrieval.STOPWORDS``
dropped) is matched to its most similar content wordpiece in the entry's first 400 characters
(cosine of the static vectors; an identical wordpiece scores 1). Columns, for the entry itself
and for its session neighbours before and after (where a reply gets credit for its question):

* ``mean``: the mean of those maxima;
* ``idf``: their idf-weighted mean (idf of each query wordpiece over the pool, as ``rerank.features``);
* ``share>=t`` for t in 0.4, 0.5, 0.6: the share of query wordpieces with a match at least t;
* ``soft``: the idf-weighted mean over the query wordpieces *not* present in the entry (the
  credit exact matching cannot give), and ``centroid``: the cosine of the two bags' mean vectors.

Everything else as ``bench/locomo_nonlinear.py`` (its ``evaluate``): SQLite + MiniLM (vectors cached
under ~/.cache/keel-bench), the category 1-4 questions of the five dev conversations, turns with
and without their ``Speaker:`` label, the reranker retrained on both formats of three conversations
(D 30, L2 1e-4) and scored held out on each format of the other two, all ten splits; the shipped
28 features (``linear``) reproduced in the same run. Also: a hand check of the vectors (cosines of
a few related pairs against random pairs) and the feature's cost per search (one core).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from agentkeel.memory.embed import minilm_model_dir  # noqa: E402
from agentkeel.memory.retrieval import STOPWORDS  # noqa: E402
from locomo_bench import DATA, load  # noqa: E402
from locomo_nonlinear import evaluate  # noqa: E402
from locomo_rerank import Pools, prepare  # noqa: E402

CHARS = 400
THRESHOLDS = (0.4, 0.5, 0.6)
PAIRS = (
    ("genre", "drama"),
    ("genre", "romance"),
    ("celebrate", "party"),
    ("job", "work"),
    ("pets", "dog"),
    ("movie", "film"),
    ("book", "novel"),
    ("hobby", "painting"),
    ("sport", "football"),
    ("music", "guitar"),
    ("city", "paris"),
    ("kids", "children"),
)
# column blocks of one (question, text) comparison
BLOCK = ("mean", "idf", *(f"share>={t}" for t in THRESHOLDS), "soft", "centroid")


class Vectors:
    """MiniLM's wordpiece tokenizer and its unit-length static input vectors."""

    def __init__(self) -> None:
        from safetensors import safe_open
        from tokenizers import Tokenizer

        directory = minilm_model_dir()
        with safe_open(str(directory / "model.safetensors"), framework="numpy") as f:
            table = f.get_tensor("embeddings.word_embeddings.weight").astype(np.float32)
        self.unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-9)
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.vocab = self.tokenizer.get_vocab()
        pieces = sorted(self.vocab, key=self.vocab.__getitem__)
        self.content = np.array([_content(p) for p in pieces], dtype=bool)

    def ids(self, text: str) -> np.ndarray:
        """The text's distinct content wordpieces, in first-seen order."""
        got = self.tokenizer.encode(text[:CHARS], add_special_tokens=False).ids
        ids = np.array(list(dict.fromkeys(got)), dtype=np.int64)
        return ids[self.content[ids]] if len(ids) else ids

    def cosine(self, a: str, b: str) -> float:
        return float(self.unit[self.vocab[a]] @ self.unit[self.vocab[b]])


def _content(piece: str) -> bool:
    if piece.startswith("[") and piece.endswith("]"):
        return False
    bare = piece[2:] if piece.startswith("##") else piece
    if not any(c.isalnum() for c in bare):
        return False
    return piece.startswith("##") or piece not in STOPWORDS


def block(vec: Vectors, query: np.ndarray, idf: np.ndarray, text: np.ndarray) -> list[float]:
    """The ``BLOCK`` columns of one query against one text's wordpieces (zeros if either is empty)."""
    if not len(query) or not len(text):
        return [0.0] * len(BLOCK)
    best = (vec.unit[query] @ vec.unit[text].T).max(1)
    weight = idf / idf.sum()
    row = [float(best.mean()), float(weight @ best)]
    row += [float((best >= t).mean()) for t in THRESHOLDS]
    absent = ~np.isin(query, text)
    row.append(float(weight[absent] @ best[absent]) if absent.any() else 0.0)
    a, b = vec.unit[query].mean(0), vec.unit[text].mean(0)
    row.append(float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-9)))
    return row


def soft_columns(
    vec: Vectors, question: str, pool: list[int], texts: Any, sessions: Any, cache: dict[int, Any]
) -> np.ndarray:
    """Per pool entry: ``BLOCK`` for the entry, the one before and the one after (same session)."""

    def ids(rid: int) -> np.ndarray:
        got = cache.get(rid)
        if got is None:
            got = cache[rid] = vec.ids(texts.get(rid, ""))
        return got

    query = vec.ids(question)
    held = [set(ids(rid).tolist()) for rid in pool]
    df = np.array([sum(int(q) in h for h in held) for q in query], dtype=np.float64)
    idf = np.log(1.0 + len(pool) / (1.0 + df))
    out = np.zeros((len(pool), 3 * len(BLOCK)))
    empty = np.zeros(0, dtype=np.int64)
    for d, rid in enumerate(pool):
        row = block(vec, query, idf, ids(rid))
        for step in (-1, 1):
            other = rid + step
            same = other in texts and sessions.get(other) == sessions.get(rid)
            row += block(vec, query, idf, ids(other) if same else empty)
        out[d] = row
    return out


def with_soft(pools: Pools, extra: np.ndarray, columns: list[int]) -> Pools:
    out = Pools(0, [], [])
    out.x, out.mask, out.pos = np.concatenate([pools.x, extra[:, :, columns]], axis=2), pools.mask, pools.pos
    return out


NAMES = [f"{where}:{name}" for where in ("self", "previous", "next") for name in BLOCK]


def cols(where: tuple[str, ...], names: tuple[str, ...]) -> list[int]:
    return [NAMES.index(f"{w}:{n}") for w in where for n in names]


ALL = ("self", "previous", "next")
CANDIDATES: dict[str, list[int]] = {
    "self_all": cols(("self",), BLOCK),
    "neighbours_all": cols(ALL, BLOCK),
    "idf_share05": cols(ALL, ("idf", "share>=0.5")),
    "idf": cols(ALL, ("idf",)),
    "mean": cols(ALL, ("mean",)),
    "shares": cols(ALL, tuple(f"share>={t}" for t in THRESHOLDS)),
    "soft": cols(ALL, ("soft",)),
    "centroid": cols(ALL, ("centroid",)),
    "idf_soft_centroid": cols(ALL, ("idf", "soft", "centroid")),
    "self_idf_soft": cols(("self",), ("idf", "soft")),
}


def hand_check(vec: Vectors) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    a, b = rng.integers(2000, len(vec.unit), (2, 5000))
    random = (vec.unit[a] * vec.unit[b]).sum(1)
    return {
        "pairs": {f"{x}~{y}": round(vec.cosine(x, y), 3) for x, y in PAIRS},
        "random wordpiece pairs (mean, p95, p99)": [round(float(np.percentile(random, p)), 3) for p in (50, 95, 99)],
    }


def timing(vec: Vectors, questions: list[Any], prepared: list[Any], n: int = 300) -> dict[str, Any]:
    """The feature's cost per search: tokenising the query, the pool (30) and its neighbours, and the columns."""
    per: list[float] = []
    tokenise: list[float] = []
    for (_, question, _), (_, _, ids, texts, sessions, _) in list(zip(questions, prepared, strict=True))[:n]:
        pool = ids[:30]
        started = time.perf_counter()
        cache: dict[int, Any] = {}
        for rid in {r + s for r in pool for s in (-1, 0, 1)}:
            if rid in texts:
                cache[rid] = vec.ids(texts[rid])
        tokenise.append(time.perf_counter() - started)
        soft_columns(vec, question, pool, texts, sessions, cache)
        per.append(time.perf_counter() - started)
    return {
        "searches": len(per),
        "all columns, ms per search (p50, p95)": [round(1000 * float(np.percentile(per, p)), 3) for p in (50, 95)],
        "tokenising alone, ms (p50, p95)": [round(1000 * float(np.percentile(tokenise, p)), 3) for p in (50, 95)],
        "load vectors + tokenizer, s": None,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "keel-bench"))
    parser.add_argument("--only", default="", help="comma-separated candidate names (default: all)")
    args = parser.parse_args()
    started = time.perf_counter()
    vec = Vectors()
    loaded = time.perf_counter() - started
    records, questions = load(DATA)
    bare = [{**r, "text": str(r["text"]).split(": ", 1)[1]} for r in records]
    prep = {
        "labelled": prepare(records, questions, Path(args.cache)),
        "unlabelled": prepare(bare, questions, Path(args.cache)),
    }
    pools = {fmt: Pools(30, questions, p) for fmt, p in prep.items()}
    extra = {}
    for fmt, prepared in prep.items():
        cache: dict[int, Any] = {}
        extra[fmt] = np.zeros((len(questions), 30, len(NAMES)))
        for q, ((_, question, _), (_, _, ids, texts, sessions, _)) in enumerate(zip(questions, prepared, strict=True)):
            pool = ids[:30]
            if pool:
                extra[fmt][q, : len(pool)] = soft_columns(vec, question, pool, texts, sessions, cache)
    project_of = np.array([q[0] for q in questions])
    report: dict[str, Any] = {"hand_check": hand_check(vec), "columns": NAMES}
    report["timing"] = timing(vec, questions, prep["unlabelled"])
    report["timing"]["load vectors + tokenizer, s"] = round(loaded, 2)
    print(json.dumps(report, indent=1), flush=True)

    # the positives' and the others' mean column values: does the family separate them at all?
    pos, neg = pools["unlabelled"].pos, pools["unlabelled"].mask & ~pools["unlabelled"].pos
    report["column means, evidence vs other (unlabelled)"] = {
        n: [
            round(float(extra["unlabelled"][:, :, i][pos].mean()), 3),
            round(float(extra["unlabelled"][:, :, i][neg].mean()), 3),
        ]
        for i, n in enumerate(NAMES)
    }
    wanted = [c for c in args.only.split(",") if c] or ["linear", *CANDIDATES]
    for name in wanted:
        if name == "linear":
            result = evaluate("linear", pools["labelled"], pools["unlabelled"], project_of, 1e-4, 0, args.steps)
        else:
            result = evaluate(
                name,
                with_soft(pools["labelled"], extra["labelled"], CANDIDATES[name]),
                with_soft(pools["unlabelled"], extra["unlabelled"], CANDIDATES[name]),
                project_of,
                1e-4,
                0,
                args.steps,
            )
        result.pop("_ranks")
        result["columns"] = [NAMES[i] for i in CANDIDATES.get(name, [])]
        report[name] = result
        print(
            json.dumps({k: v for k, v in result.items() if "@" in k and "(" not in k} | {"candidate": name}), flush=True
        )
    base = report.get("linear")
    if base:
        report["delta vs linear (labelled @5, @10, unlabelled @5, @10)"] = {
            name: [
                round(report[name][k] - base[k], 4)
                for k in ("labelled@5", "labelled@10", "unlabelled@5", "unlabelled@10")
            ]
            for name in wanted
            if name != "linear"
        }
        print(json.dumps(report["delta vs linear (labelled @5, @10, unlabelled @5, @10)"], indent=1))
    report["seconds"] = round(time.perf_counter() - started, 1)
    out = ROOT / "bench" / "results" / "locomo_softmatch_round8.json"
    if args.only and out.exists():
        report = {**json.loads(out.read_text()), **report}
    out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
