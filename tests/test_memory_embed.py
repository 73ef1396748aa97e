"""The numpy MiniLM against vectors sentence-transformers computed for the same texts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from agentkeel.memory.embed import MiniLMEmbedder


def test_minilm_matches_sentence_transformers() -> None:
    ref = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())
    ours = np.array(MiniLMEmbedder().embed(ref["texts"]))
    theirs = np.array(ref["vectors"])
    assert ours.shape == theirs.shape == (len(ref["texts"]), 384)
    assert np.abs(ours - theirs).max() < 1e-4
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
