"""Calibrate the vector relevance floor (``retrieval.RELEVANCE_FLOOR``) on MiniLM and LoCoMo dev.

A search whose words match nothing answers from vectors alone; nearest neighbours always exist,
so without a floor it returns unrelated entries. This measures, for the MiniLM query embedder:

- related: the cosine of each question with each of its evidence turns (its own conversation);
- unrelated: the best cosine of each question among another conversation's turns (the people
  and events it asks about are not there), and of off-topic queries (coding questions) among
  every turn.

    python bench/memory_relevance_floor.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from agentkeel.memory import resolve_embedder  # noqa: E402
from locomo_bench import DATA, load  # noqa: E402

OFF_TOPIC = [
    "zebra",
    "kubernetes ingress certificate renewal",
    "why does the pytest fixture leak a port",
    "rust borrow checker lifetime error in iterator",
    "postgres vacuum freeze wraparound",
    "webpack config for source maps",
    "segfault in the C extension on import",
    "how do I rebase onto main without conflicts",
    "the CI job times out on the docker build",
    "TLS handshake fails with self-signed cert",
    "numpy broadcasting shape mismatch",
    "react useEffect runs twice",
    "bash here document with variables",
    "grpc deadline exceeded",
    "memory leak in the websocket server",
    "the quarterly tax filing deadline",
]


def main() -> None:
    records, questions = load(DATA)
    embedder = resolve_embedder("minilm")
    assert embedder is not None
    ids = [str(r["id"]) for r in records]
    projects = np.array([str(r["project"]) for r in records])
    matrix = np.asarray(embedder.embed([str(r["text"]) for r in records]), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    index = {rid: i for i, rid in enumerate(ids)}
    convs = sorted(set(projects.tolist()))

    def query(text: str) -> np.ndarray:
        q = np.asarray(embedder.embed_query(text) if hasattr(embedder, "embed_query") else embedder.embed([text])[0])
        return q / np.linalg.norm(q)

    related: list[float] = []  # best evidence cosine per question
    unrelated: list[float] = []  # best cosine in another conversation
    for project, text, evidence in questions:
        q = query(text)
        scores = matrix @ q
        found = [scores[index[e]] for e in evidence if e in index]
        if found:
            related.append(float(max(found)))
        other = convs[(convs.index(project) + 1) % len(convs)]
        unrelated.append(float(scores[projects == other].max()))
    off = [float((matrix @ query(t)).max()) for t in OFF_TOPIC]
    pct = lambda xs, p: round(float(np.percentile(xs, p)), 3)  # noqa: E731
    result = {
        "questions": len(questions),
        "related_best_evidence": {p: pct(related, p) for p in (1, 5, 10, 25, 50)},
        "unrelated_best_other_conversation": {p: pct(unrelated, p) for p in (50, 90, 95, 99)},
        "off_topic_best": {"max": round(max(off), 3), "median": pct(off, 50)},
        "share_related_below": {
            f: round(float(np.mean(np.array(related) < f)), 3) for f in (0.2, 0.25, 0.3, 0.35, 0.4)
        },
        "share_unrelated_at_or_above": {
            f: round(float(np.mean(np.array(unrelated) >= f)), 3) for f in (0.2, 0.25, 0.3, 0.35, 0.4)
        },
        "share_off_topic_at_or_above": {
            f: round(float(np.mean(np.array(off) >= f)), 3) for f in (0.2, 0.25, 0.3, 0.35, 0.4)
        },
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
