"""LoCoMo recall with float32 entry vectors and the search queries embedded in float32 or int8.

    python bench/locomo_query_int8.py [--label locomo_query_int8]

Every dialog turn of ``dev.json`` becomes an entry, as in ``locomo_bench.py``, once with the
speaker label ("Caroline: ...") and once without. The entries are embedded once, in float32
(``MiniLMEmbedder(runtime="onnx")``). Each category 1-4 question is then searched in its
conversation three times, the query's vector coming from the float32 encoder, the int8 one
(``embed_query``, what a search runs on onnxruntime) and the float32 one again (the same list
twice says the search is deterministic). Everything else is the shipped search: fusion,
reranker, ``Tuning``. Nothing is tuned here, so no cross-validation is needed: the figures are
paired, question by question. Also reported: the questions whose hit@5 / hit@10 differ, and
the query embedding time of each encoder, interleaved. Results go to ``bench/results/<label>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import locomo_bench  # noqa: E402
from agentkeel.memory import open_store  # noqa: E402
from agentkeel.memory.embed import MiniLMEmbedder  # noqa: E402


class FloatQueries:
    """The float32 embedder without its int8 query path: a query is embedded like an entry."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim

    def embed(self, texts: Any) -> list[list[float]]:
        return self.inner.embed(texts)


def recall(labelled: bool, embedder: MiniLMEmbedder) -> dict[str, Any]:
    records, questions = locomo_bench.load(locomo_bench.DATA)
    if not labelled:
        for r in records:
            r["text"] = str(r["text"]).split(": ", 1)[1]
    hits: dict[str, list[tuple[bool, bool]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(str(Path(tmp) / "locomo.db"), embedder="none")
        store.embedder = FloatQueries(embedder)  # entries: float32
        for i in range(0, len(records), 256):
            store.add_many(records[i : i + 256])
        for name, used in (("float32", FloatQueries(embedder)), ("int8", embedder), ("float32 again", None)):
            store.embedder = used or FloatQueries(embedder)
            found = hits[name] = []
            for project, question, evidence in questions:
                ids = [h.id for h in store.search(question, k=10, project=project)]
                found.append((bool(evidence & set(ids[:5])), bool(evidence & set(ids[:10]))))
        store.close()
    n = len(questions)
    out: dict[str, Any] = {"questions": n}
    for name, found in hits.items():
        out[name] = {
            "recall_any@5": round(sum(a for a, _ in found) / n, 4),
            "recall_any@10": round(sum(b for _, b in found) / n, 4),
        }
    for k, at in ((5, 0), (10, 1)):
        pairs = list(zip(hits["float32"], hits["int8"], strict=True))
        out[f"changed@{k}"] = {
            "gained": sum(q[at] and not f[at] for f, q in pairs),
            "lost": sum(f[at] and not q[at] for f, q in pairs),
        }
    out["deterministic"] = hits["float32"] == hits["float32 again"]
    return out


def latency(embedder: MiniLMEmbedder, rounds: int = 2) -> dict[str, Any]:
    _, questions = locomo_bench.load(locomo_bench.DATA)
    texts = [q for _, q, _ in questions]
    embedder.embed_query(texts[0])
    times: dict[str, list[float]] = {"float32": [], "int8": []}
    for _ in range(rounds):
        for text in texts:
            for name, call in (
                ("float32", lambda t=text: embedder.embed([t])),
                ("int8", lambda t=text: embedder.embed_query(t)),
            ):
                t0 = time.perf_counter()
                call()
                times[name].append((time.perf_counter() - t0) * 1000)
    return {
        name: {
            "p50_ms": round(statistics.median(v), 2),
            "p95_ms": round(sorted(v)[int(0.95 * (len(v) - 1))], 2),
            "mean_ms": round(statistics.mean(v), 2),
        }
        for name, v in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--label", default="locomo_query_int8")
    args = parser.parse_args()
    embedder = MiniLMEmbedder(runtime="onnx")
    result = {
        "labelled": recall(True, embedder),
        "unlabelled": recall(False, embedder),
        "query_embedding": latency(embedder),
        "load_average": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result, indent=2))
    (ROOT / "bench" / "results" / f"{args.label}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
