"""The numpy MiniLM against vectors sentence-transformers computed for the same texts."""

from __future__ import annotations

import ctypes
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from agentkeel.memory.embed import MiniLMEmbedder


def test_minilm_matches_sentence_transformers() -> None:
    ref = json.loads((Path(__file__).parents[2] / "data" / "minilm_reference.json").read_text())
    ours = np.array(MiniLMEmbedder().embed(ref["texts"]))
    theirs = np.array(ref["vectors"])
    assert ours.shape == theirs.shape == (len(ref["texts"]), 384)
    assert np.abs(ours - theirs).max() < 1e-4
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def _openblas() -> tuple[Any, Any]:
    """numpy's OpenBLAS thread-count functions, found the way any reader of /proc would."""
    maps = Path("/proc/self/maps").read_text().splitlines()
    libs = sorted({line.split()[-1] for line in maps if "openblas" in line})
    lib = ctypes.CDLL(libs[0])
    setter, getter = lib.scipy_openblas_set_num_threads64_, lib.scipy_openblas_get_num_threads64_
    setter.argtypes, getter.restype = [ctypes.c_int], ctypes.c_int
    return setter, getter


def test_minilm_runs_on_one_blas_thread_and_puts_the_count_back() -> None:
    """OpenBLAS's spinning workers made a batch 12x slower on a loaded 2-core machine."""
    embedder = MiniLMEmbedder()
    setter, getter = _openblas()
    setter(2)
    seen: set[int] = set()
    worker = threading.Thread(target=embedder.embed, args=(["a sentence long enough to take a while"] * 256,))
    worker.start()
    while worker.is_alive():
        seen.add(getter())
    worker.join()
    assert 1 in seen and getter() == 2
