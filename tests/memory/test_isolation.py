"""Isolation: recall never returns another scope's memories, on both backends (acceptance 3)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from gateway.memory.files.scopes import ScopeError
from gateway.memory.search.index import ScopeRequiredError
from gateway.memory.search.recall import recall
from gateway.memory.search.service import MemoryService

CANARY = {"alice": "canary-alice-7Q2ZK", "bob": "canary-bob-X91PL"}
TOPICS = ["hiking", "the dentist", "a birthday cake", "tax forms", "piano lessons", "Lisbon", "the garden",
          "a job interview", "the cat", "a concert", "marathon training", "the car", "a wedding"]  # fmt: skip


async def _seed(svc: MemoryService) -> None:
    start = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    for user, canary in CANARY.items():
        store = svc.stores.for_user(user)
        store.write("USER.md", f"# {user}\n\nSecret word {canary}. Likes {TOPICS[len(user)]}.\n", source="test")
        for i, topic in enumerate(TOPICS):
            store.write(f"topics/{i}.md", f"# {topic}\n\n{user} talked about {topic}. Marker {canary}-{i}.\n",
                        source="test")  # fmt: skip
            await svc.indexing.index_turn(scope=f"user:{user}", turn_id=f"{user}-{i}", session_id=f"{user}-s",
                                          channel="web", speaker=user, text=f"I keep thinking about {topic} ({canary})",
                                          timestamp=start + timedelta(hours=i))  # fmt: skip
    await svc.indexing.drain()


def _queries(rng: random.Random, n: int) -> list[str]:
    pool = (
        [f"what did I say about {t}?" for t in TOPICS]
        + list(CANARY.values())
        + ["secret word", "marker", "canary", "alice", "bob", "what do you know about me", "tell me everything"]
    )
    return [rng.choice(pool) + ("" if rng.random() < 0.5 else f" {rng.choice(TOPICS)}") for _ in range(n)]


@pytest.mark.long
async def test_thousand_queries_never_cross_users(service: MemoryService) -> None:
    await _seed(service)
    rng = random.Random(3)
    for user, canary in CANARY.items():
        foreign = [c for u, c in CANARY.items() if u != user]
        seen_own = 0
        for query in _queries(rng, 1000):
            hits = await service.recall(scope=f"user:{user}", query=query, k=rng.randint(1, 25))
            for h in hits:
                assert h.scope == f"user:{user}"
                assert not any(f in h.text for f in foreign), (query, h)
            seen_own += any(canary in h.text for h in hits)
        assert seen_own > 500  # the queries do find the user's own memories


async def test_scope_lists_and_unknown_scopes(service: MemoryService) -> None:
    await _seed(service)
    hits = await service.recall(scope=["user:alice", "user:nobody"], query=CANARY["bob"], k=50)
    assert hits and all(h.scope == "user:alice" for h in hits)
    assert await service.recall(scope="user:nobody", query=CANARY["alice"], k=10) == []
    with pytest.raises(ScopeError):
        await service.recall(scope="user:../bob", query="x", k=3)
    loader = service.loader
    with pytest.raises(ScopeRequiredError):
        recall(loader.require_index(), loader.require_embedder(), loader.require_indexer().sparse, scopes=[],
               query="canary", k=5)  # fmt: skip
