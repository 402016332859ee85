"""``kith bench recall-scale --memories 100000``: recall latency for one user with many chunks.

Builds an index holding ``--memories`` chunks for the measured user plus ``--other-users`` x 10% as
many for other users (so the scope filter has something to exclude), then times
``MemoryService.recall`` end to end: query embedding, dense + BM25 queries, fusion, thread hop.

Chunks are synthesised (bench/synth.py: clustered vectors, real BM25 over generated sentences), since
embedding 100k texts would measure ingest, not recall. Queries are unique sentences embedded for
real at query time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.synth import OBJECTS, VERBS, fill


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--memories", type=int, default=100_000, help="chunks for the measured user")
    parser.add_argument("--other-users", type=int, default=2, help="other users with 10%% as many chunks each")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--backend", choices=["edge", "memory"], default="edge", help="memory = qdrant-client")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary line")
    parser.add_argument("--seed", type=int, default=7)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from gateway.configread import parse_config
    from gateway.memory.search.embed import load_embedder
    from gateway.memory.search.index import open_index
    from gateway.memory.search.service import MemoryService
    from gateway.memory.search.sparse import SparseEncoder

    rng = random.Random(args.seed)
    embedder = load_embedder("minilm-l6-int8")
    sparse = SparseEncoder()
    with tempfile.TemporaryDirectory(prefix="kith-scale-") as tmp:
        url = ":memory:" if args.backend == "memory" else None
        index = open_index(path=str(Path(tmp) / "qdrant"), url=url, dim=embedder.dim, collection="scale")
        t0 = time.perf_counter()
        users = [("user:measured", args.memories)] + [
            (f"user:other{i}", args.memories // 10) for i in range(args.other_users)
        ]
        for n, (scope, count) in enumerate(users):
            await asyncio.to_thread(fill, index, embedder, sparse, scope, count, seed=args.seed + n)
        load_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        await asyncio.to_thread(index.optimize)
        optimize_s = time.perf_counter() - t1
        svc = MemoryService(parse_config({"data_dir": tmp}, env={}), index=index)
        await svc.start()
        try:
            for _ in range(10):  # warm caches and the thread pool
                await svc.recall(scope="user:measured", query=f"warm up {rng.random()}", k=8)
            lat = []
            for i in range(args.queries):
                q = f"when {rng.choice(VERBS).removesuffix('ed')} {rng.choice(OBJECTS)} {i}?"
                t = time.perf_counter()
                hits = await svc.recall(scope="user:measured", query=q, k=8)
                lat.append((time.perf_counter() - t) * 1000)
                assert all(h.scope == "user:measured" for h in hits)
            points_total = await asyncio.to_thread(index.count)
        finally:
            await svc.close()
    q = statistics.quantiles(lat, n=100)
    return {
        "bench": "recall-scale",
        "backend": args.backend,
        "memories": args.memories,
        "points_total": points_total,
        "n": len(lat),
        "p50_ms": round(q[49], 2),
        "p95_ms": round(q[94], 2),
        "p99_ms": round(q[98], 2),
        "load_s": round(load_s, 1),
        "optimize_s": round(optimize_s, 1),
    }


def main(args: argparse.Namespace) -> int:
    result = asyncio.run(run(args))
    if not args.json:
        print(
            f"recall over {result['memories']} chunks ({result['points_total']} in the index, {result['backend']}):"
            f" p50 {result['p50_ms']} ms, p95 {result['p95_ms']} ms, p99 {result['p99_ms']} ms"
        )
    print(json.dumps(result, sort_keys=True))
    return 0
