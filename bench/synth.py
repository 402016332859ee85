"""Synthetic memories at scale for benchmarks (``recall-scale``, ``turn --memories``).

Embedding 100k texts would take many minutes on two cores and measure ingest, not recall, so chunk
vectors are synthesised: each is a random mixture of a few really-embedded sentences plus noise
(clustered like real text, unlike uniform noise), while BM25 vectors come from the real encoder
over generated sentences.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

SUBJECTS = ["Alice", "Sam", "my sister", "the team", "grandma", "our neighbour", "the dentist", "Priya", "Tom"]
VERBS = ["visited", "booked", "cancelled", "painted", "cooked", "fixed", "forgot", "planned", "bought", "read"]
OBJECTS = [
    "a trip to Lisbon", "the blue bicycle", "a birthday cake", "the tax forms", "a pottery class",
    "the garden shed", "a concert ticket", "the quarterly report", "a hiking route", "the piano lesson",
    "a vegan lasagna", "the car insurance", "a book about whales", "the kitchen tap", "a yoga retreat",
    "the wedding playlist",
]
WHEN = ["yesterday", "last weekend", "on Monday", "in March", "this morning", "two weeks ago", "at Easter"]


def sentence(rng: random.Random) -> str:
    words = (rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(WHEN))
    return " ".join(words) + f" #{rng.randint(0, 10**6)}"


def fill(index: Any, embedder: Any, sparse: Any, scope: str, count: int, *, seed: int = 7,
         batch: int = 2000, ts: float = 0.0) -> None:
    """Upsert ``count`` synthetic file chunks into ``scope`` (blocking: run it in a thread)."""
    from gateway.memory.search.index import IndexPoint, point_id

    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    basis = embedder.embed_documents([sentence(rng) for _ in range(256)])
    for start in range(0, count, batch):
        n = min(batch, count - start)
        mix = nprng.dirichlet(np.ones(4), size=n)
        picks = nprng.integers(0, len(basis), size=(n, 4))
        vecs = np.einsum("nk,nkd->nd", mix, basis[picks]) + nprng.normal(0, 0.02, (n, embedder.dim))
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        points = []
        for j in range(n):
            text = sentence(rng)
            cid = f"f:synthetic.md#{start + j}"
            points.append(IndexPoint(
                id=point_id(scope, cid), dense=vecs[j].astype(np.float32).tolist(), sparse=sparse.document(text),
                payload={"scope": scope, "path": "synthetic.md", "cid": cid, "hash": "", "kind": "file",
                         "text": text, "ts": ts, "valid_until": 1e18},
            ))
        index.upsert(points)
