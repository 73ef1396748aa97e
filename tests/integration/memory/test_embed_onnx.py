"""MiniLM on onnxruntime (memory/embed_ort.py): the same vectors as sentence-transformers, the
numpy fallback when onnxruntime is missing, the one-thread, no-spin session, and the model
cache under KEEL_HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agentkeel.memory.embed import EmbedderError, MiniLMEmbedder, minilm_embedder

REF = json.loads((Path(__file__).parents[2] / "data" / "minilm_reference.json").read_text())
SRC = str(Path(__file__).resolve().parents[3] / "src")


def test_onnx_float_path_matches_sentence_transformers() -> None:
    """The default fast path must give the numpy path's vectors, so stored entries and queries mix."""
    embedder = MiniLMEmbedder(runtime="onnx")
    assert embedder.runtime == "onnx" and embedder.name == "minilm"
    ours = np.array(embedder.embed(REF["texts"]))
    theirs = np.array(REF["vectors"])
    assert ours.shape == theirs.shape == (len(REF["texts"]), 384)
    assert np.abs(ours - theirs).max() < 1e-4
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    # batches with padding give each text's own vector (the attention mask reaches the graph)
    batched = np.array(embedder.embed([*REF["texts"], "x"]))[: len(REF["texts"])]
    assert np.abs(batched - theirs).max() < 1e-4


def test_onnx_int8_path_stays_close() -> None:
    """int8 weights move the vectors: measured cosine >= 0.977 on the reference texts, and one of
    the six texts changes its nearest neighbour, which is why int8 is opt-in. The bound 0.97
    catches a broken quantisation (a scale on the wrong axis gives far less)."""
    embedder = MiniLMEmbedder(runtime="onnx-int8")
    assert embedder.runtime == "onnx-int8"
    ours = np.array(embedder.embed(REF["texts"]))
    theirs = np.array(REF["vectors"])
    assert (ours * theirs).sum(1).min() >= 0.97


def test_sessions_run_on_one_thread_without_spinning() -> None:
    embedder = MiniLMEmbedder(runtime="onnx")
    embedder.embed(["an entry"])
    embedder.embed_query("a query")
    for encoder in (embedder._encoder, embedder._query_encoder):
        options = encoder.session.get_session_options()  # type: ignore[union-attr]
        assert options.intra_op_num_threads == 1 and options.inter_op_num_threads == 1
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
        assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"


def test_default_minilm_is_onnx_and_the_runtime_can_be_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KEEL_MINILM_RUNTIME", raising=False)
    assert minilm_embedder().runtime == "onnx"
    monkeypatch.setenv("KEEL_MINILM_RUNTIME", "numpy")
    assert type(minilm_embedder()) is MiniLMEmbedder
    monkeypatch.setenv("KEEL_MINILM_RUNTIME", "gpu")
    with pytest.raises(EmbedderError, match="KEEL_MINILM_RUNTIME='gpu' is not one of numpy, onnx, onnx-int8"):
        minilm_embedder()
    monkeypatch.delenv("KEEL_MINILM_RUNTIME")
    assert minilm_embedder().query_int8
    monkeypatch.setenv("KEEL_MINILM_QUERY", "float32")
    assert not minilm_embedder().query_int8
    monkeypatch.setenv("KEEL_MINILM_QUERY", "int4")
    with pytest.raises(EmbedderError, match="KEEL_MINILM_QUERY='int4' is not int8 or float32"):
        minilm_embedder()


BLOCK_ORT = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "onnxruntime":
            raise ImportError("blocked for the test: " + name)
        return None
sys.meta_path.insert(0, Block())
"""


def _run(code: str, home: str | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": SRC, **({"KEEL_HOME": home} if home else {})}
    env.pop("KEEL_MINILM_RUNTIME", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_falls_back_to_numpy_without_onnxruntime() -> None:
    out = _run(
        BLOCK_ORT
        + """
import json, sys
from pathlib import Path
from agentkeel.memory.embed import get_embedder
e = get_embedder("minilm")
ref = json.loads(Path(REFPATH).read_text())
v = e.embed(ref["texts"][:1])[0]
print(e.runtime, max(abs(a - b) for a, b in zip(v, ref["vectors"][0])) < 1e-4, "onnxruntime" in sys.modules)
""".replace("REFPATH", repr(str(Path(__file__).parents[2] / "data" / "minilm_reference.json")))
    )
    assert out == "numpy True False"


def test_onnxruntime_is_imported_only_when_the_embedder_is_built() -> None:
    out = _run(
        "import sys, agentkeel, agentkeel.memory, agentkeel.memory.embed, agentkeel.memory.embed_ort\n"
        "print('onnxruntime' in sys.modules, 'onnx' in sys.modules)"
    )
    assert out == "False False"


def test_the_built_model_is_cached_and_a_damaged_cache_is_rebuilt(tmp_path: Path) -> None:
    """KEEL_HOME is the test's own (conftest). A second process loads the cached model without
    onnx (blocked here); a damaged cache file gives a fresh build, not a crash."""
    home = os.environ["KEEL_HOME"]
    embedder = MiniLMEmbedder(runtime="onnx")
    embedder.embed(["built on the first entry"])
    assert embedder._encoder is not None and not embedder._encoder.from_cache  # type: ignore[attr-defined]
    (cached,) = (Path(home) / "memory" / "models").glob("minilm-fp32-*.onnx")
    ref_path = str(Path(__file__).parents[2] / "data" / "minilm_reference.json")
    check = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from agentkeel.memory.embed import MiniLMEmbedder\n"
        "e = MiniLMEmbedder(runtime='onnx')\n"
        f"ref = json.loads(Path({ref_path!r}).read_text())\n"
        "v = e.embed(ref['texts'][:1])[0]\n"
        "print(e._encoder.from_cache, max(abs(a - b) for a, b in zip(v, ref['vectors'][0])) < 1e-4,"
        " 'onnx' in sys.modules)\n"
    )
    block_onnx = BLOCK_ORT.replace('== "onnxruntime"', '== "onnx"')
    assert _run(block_onnx + check, home) == "True True False"
    cached.write_bytes(b"not a model" * 100)
    assert _run(check, home) == "False True True"
    assert cached.stat().st_size > 10_000_000  # rewritten whole
    assert _run(block_onnx + check, home) == "True True False"


def test_a_search_query_runs_the_int8_encoder_and_entries_keep_float32(tmp_path: Path) -> None:
    """On onnxruntime, ``embed_query`` (what a search calls) runs an int8 copy of the encoder,
    built on the first query and cached beside the float32 one; ``embed`` (the entries' vectors)
    stays float32. The query's vector is close to the float one; ``query_int8=False`` gives it exactly."""
    home = Path(os.environ["KEEL_HOME"])
    embedder = MiniLMEmbedder(runtime="onnx")
    assert embedder._encoder is None and embedder._query_encoder is None  # each built on first use
    theirs = np.array(REF["vectors"])
    queries = np.array([embedder.embed_query(text) for text in REF["texts"]])
    assert (queries * theirs).sum(1).min() >= 0.97 and np.abs(queries - theirs).max() > 1e-4
    assert np.allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)
    assert embedder._encoder is None  # a process that only searches never loads the float32 session
    assert len(list((home / "memory" / "models").glob("minilm-int8-*.onnx"))) == 1
    assert np.abs(np.array(embedder.embed(REF["texts"])) - theirs).max() < 1e-4
    exact = MiniLMEmbedder(runtime="onnx", query_int8=False)
    assert exact.embed_query(REF["texts"][0]) == exact.embed(REF["texts"][:1])[0]
    numpy_path = MiniLMEmbedder(runtime="numpy")
    assert numpy_path.embed_query(REF["texts"][0]) == numpy_path.embed(REF["texts"][:1])[0]


def test_queries_fall_back_to_float32_when_the_int8_encoder_cannot_be_built() -> None:
    """The float32 model is cached; onnx (needed to build the int8 one) is blocked: the query is
    answered by the float32 encoder, with a warning, not an error."""
    home = os.environ["KEEL_HOME"]
    MiniLMEmbedder(runtime="onnx").embed(["caches the float32 model"])
    ref_path = str(Path(__file__).parents[2] / "data" / "minilm_reference.json")
    check = (
        "import json, logging\n"
        "from pathlib import Path\n"
        "from agentkeel.memory.embed import MiniLMEmbedder\n"
        "logging.basicConfig(level=logging.WARNING, format='%(message)s')\n"
        "e = MiniLMEmbedder(runtime='onnx')\n"
        f"ref = json.loads(Path({ref_path!r}).read_text())\n"
        "q = e.embed_query(ref['texts'][0])\n"
        "print(q == e.embed(ref['texts'][:1])[0], e.query_int8)\n"
    )
    block_onnx = BLOCK_ORT.replace('== "onnxruntime"', '== "onnx"')
    env = {**os.environ, "PYTHONPATH": SRC, "KEEL_HOME": home}
    done = subprocess.run([sys.executable, "-c", block_onnx + check], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True False"
    assert "the int8 query encoder failed" in done.stderr and "Traceback" not in done.stderr
