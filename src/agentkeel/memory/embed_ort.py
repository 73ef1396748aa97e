"""MiniLM on onnxruntime: the fast path for the ``minilm`` embedder.

The numpy forward pass (``embed.MiniLMEmbedder``) spends a query's 12-17 ms mostly in
numpy's per-op overhead and in streaming 42.5 MB of float32 dense weights from RAM (more than
the L3 cache holds). Here the same six BERT layers are an ONNX graph built in memory from the
same safetensors (no download; building it takes ~0.35 s with onnx's import, so the built model
is cached under ``$KEEL_HOME/memory/models/`` and later processes only load it):
dense products, attention with the padding mask, softmax, GELU with erf, LayerNorm. The
token, position and type embeddings with their LayerNorm run in numpy (a gather of a few
rows), and so do mean pooling and L2 normalisation, exactly as in the numpy path.

Precision: float32 by default, which gives the numpy path's vectors (max difference ~1e-6), so
stored vectors and query vectors mix freely under the one name ``minilm``.
``KEEL_MINILM_RUNTIME=onnx-int8`` (or ``MiniLMEmbedder(runtime="onnx-int8")``) quantises the 36
dense weights to int8 (symmetric, per output column; ``com.microsoft.DynamicQuantizeMatMul``,
activations quantised per call): twice as fast again, but the vectors move (cosine 0.977-0.99
against the float ones on the reference texts). For the entries' vectors it stays an experiment
(cross-validated, it loses 0.011 at @5); for search queries alone, whose vectors are compared and
never stored, it is the default (``MiniLMEmbedder.embed_query``: the same LoCoMo recall within
two questions of 762, ``bench/locomo_query_int8.py``). Each session is built on first use.
``KEEL_MINILM_RUNTIME=numpy`` forces the numpy path.

onnxruntime (MIT) and onnx (Apache-2.0) are imported only when the encoder is built; when
either is missing ``embed.minilm_embedder`` (what ``get_embedder("minilm")`` uses) falls back
to the numpy path. The session runs on one
intra-op thread with spinning off and one inter-op thread, for the reason ``one_blas_thread``
exists (see embed.py's module doc): spinning workers on a loaded 2-core machine made embedding
ten times slower.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkeel.internal.home import keel_home

# What the session is built with; tests read them back from the session's options.
SESSION_CONFIG = {"session.intra_op.allow_spinning": "0", "session.inter_op.allow_spinning": "0"}
THREADS = 1
BUILDER_VERSION = 1  # bump when build_model changes: the cache key holds it


def cache_path(source: Path, int8: bool) -> Path:
    """Where the built model is kept: ``$KEEL_HOME/memory/models/``, keyed by the builder's
    version and the safetensors file's size and mtime (a new install of the weights package
    changes both; hashing 90 MB would cost more than the cache saves)."""
    home = keel_home()
    stat = source.stat()
    kind = "int8" if int8 else "fp32"
    return home / "memory" / "models" / f"minilm-{kind}-b{BUILDER_VERSION}-{stat.st_size}-{stat.st_mtime_ns}.onnx"


def _save(path: Path, data: bytes) -> None:
    """Atomic write; a read-only or full home only loses the cache."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)


def quantize_columns(weight: Any) -> tuple[Any, Any]:
    """Symmetric int8 per output column: ``weight ~= q * scale[None, :]`` with |q| <= 127."""
    import numpy as np

    peak = np.abs(weight).max(axis=0)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(weight / scale[None, :]), -127, 127).astype(np.int8)
    return q, scale


class _Graph:
    """Accumulates ONNX nodes and initialisers with fresh names."""

    def __init__(self, int8: bool) -> None:
        import onnx
        from onnx import helper, numpy_helper

        self.onnx, self.helper, self.numpy_helper = onnx, helper, numpy_helper
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.count = 0
        self.int8 = int8

    def const(self, name: str, value: Any) -> str:
        self.inits.append(self.numpy_helper.from_array(value, name))
        return name

    def op(self, kind: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        self.count += 1
        out = f"{kind.lower()}_{self.count}"
        self.nodes.append(self.helper.make_node(kind, inputs, [out], domain=domain or None, **attrs))
        return out

    def dense(self, x: str, weights: dict[str, Any], prefix: str) -> str:
        """x @ W + b; W is stored (in, out) as the numpy path keeps it, int8 per column if asked."""
        import numpy as np

        if not self.int8:
            w = self.const(prefix + ".w", weights[prefix + ".weight"].astype(np.float32))
            b = self.const(prefix + ".b", weights[prefix + ".bias"].astype(np.float32))
            return self.op("Add", [self.op("MatMul", [x, w]), b])
        q, scale = quantize_columns(weights[prefix + ".weight"])
        zero = np.zeros(q.shape[1], dtype=np.int8)
        bias = weights[prefix + ".bias"].astype(np.float32)
        names = [self.const(prefix + s, v) for s, v in ((".q", q), (".scale", scale), (".zero", zero), (".b", bias))]
        return self.op("DynamicQuantizeMatMul", [x, *names], domain="com.microsoft")

    def layer_norm(self, x: str, weights: dict[str, Any], prefix: str) -> str:
        gamma = self.const(prefix + ".g", weights[prefix + ".weight"].astype("float32"))
        beta = self.const(prefix + ".beta", weights[prefix + ".bias"].astype("float32"))
        return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12)


def build_model(weights: dict[str, Any], layers: int, heads: int, dim: int, *, int8: bool = False) -> bytes:
    """The encoder as a serialised ONNX model: inputs ``x`` (B, L, dim) after the embedding
    LayerNorm and ``bias`` (B, 1, 1, L), 0 for a token and -1e9 for padding; output the last
    hidden state (B, L, dim)."""
    import numpy as np

    g = _Graph(int8)
    helper, tensor = g.helper, g.onnx.TensorProto
    head_dim = dim // heads
    split = g.const("split_shape", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge = g.const("merge_shape", np.array([0, 0, dim], dtype=np.int64))
    scale = g.const("scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    sqrt2 = g.const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    one = g.const("one", np.array(1.0, dtype=np.float32))
    half = g.const("half", np.array(0.5, dtype=np.float32))
    x = "x"
    for n in range(layers):
        p = f"encoder.layer.{n}."
        q = g.op(
            "Transpose", [g.op("Reshape", [g.dense(x, weights, p + "attention.self.query"), split])], perm=[0, 2, 1, 3]
        )
        k = g.op(
            "Transpose", [g.op("Reshape", [g.dense(x, weights, p + "attention.self.key"), split])], perm=[0, 2, 3, 1]
        )
        v = g.op(
            "Transpose", [g.op("Reshape", [g.dense(x, weights, p + "attention.self.value"), split])], perm=[0, 2, 1, 3]
        )
        scores = g.op("Add", [g.op("MatMul", [g.op("Mul", [q, scale]), k]), "bias"])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge])
        attn = g.dense(context, weights, p + "attention.output.dense")
        x = g.layer_norm(g.op("Add", [attn, x]), weights, p + "attention.output.LayerNorm")
        h = g.dense(x, weights, p + "intermediate.dense")
        gelu = g.op("Mul", [g.op("Mul", [h, half]), g.op("Add", [g.op("Erf", [g.op("Div", [h, sqrt2])]), one])])
        out = g.dense(gelu, weights, p + "output.dense")
        x = g.layer_norm(g.op("Add", [out, x]), weights, p + "output.LayerNorm")
    graph = helper.make_graph(
        g.nodes,
        "minilm",
        [
            helper.make_tensor_value_info("x", tensor.FLOAT, ["batch", "length", dim]),
            helper.make_tensor_value_info("bias", tensor.FLOAT, ["batch", 1, 1, "length"]),
        ],
        [helper.make_tensor_value_info(x, tensor.FLOAT, ["batch", "length", dim])],
        g.inits,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="agentkeel")
    model.ir_version = 8
    data: bytes = model.SerializeToString()
    return data


class OrtEncoder:
    """The six layers as one onnxruntime session: ``(x, bias) -> last hidden state``.

    ``embed.MiniLMEmbedder`` calls it in place of its numpy layers (runtime ``onnx``). Raises
    ImportError when onnxruntime or onnx is missing."""

    def __init__(
        self,
        weights: dict[str, Any] | Callable[[], dict[str, Any]],
        layers: int,
        heads: int,
        dim: int,
        *,
        int8: bool = False,
        source: Path | None = None,
    ) -> None:
        """``source``: the safetensors file the weights came from; given, the built model is
        cached under its key (``cache_path``) and later processes skip importing onnx and
        building the graph. A cache file onnxruntime cannot load is rebuilt. ``weights`` may be a
        call that reads them, made only when the graph is built."""
        import onnxruntime as ort

        options = self._options(ort)
        cached = cache_path(source, int8) if source is not None else None
        self.from_cache = False
        if cached is not None and cached.is_file():
            try:
                self.session = ort.InferenceSession(str(cached), options, providers=["CPUExecutionProvider"])
                self.from_cache = True
                return
            except Exception:  # any load failure means a damaged file: rebuild it
                cached.unlink(missing_ok=True)
        model = build_model(weights() if callable(weights) else weights, layers, heads, dim, int8=int8)
        if cached is not None:
            _save(cached, model)
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])

    @staticmethod
    def _options(ort: Any) -> Any:
        options = ort.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = THREADS
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        for key, value in SESSION_CONFIG.items():
            options.add_session_config_entry(key, value)
        return options

    def __call__(self, x: Any, bias: Any) -> Any:
        import numpy as np

        (hidden,) = self.session.run(None, {"x": np.ascontiguousarray(x, dtype=np.float32), "bias": bias})
        return hidden
