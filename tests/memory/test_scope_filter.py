"""Every read of the index is bounded by ``scope_filter`` (issue 3: there is no other way to read vectors)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.memory.search.index import AtLeast, HasId, Match, ScopeFilter, ScopeRequiredError, SparseVec, scope_filter
from gateway.memory.search.service import MemoryService


def test_scope_filter_starts_with_the_scopes_and_refuses_none() -> None:
    f = scope_filter(["user:a", "channel:web-1"], now=5.0, path="USER.md", kinds=["turn"], ids=["x"])
    assert f.scopes == ("user:a", "channel:web-1")
    assert f.must == (
        Match("scope", ("user:a", "channel:web-1")),
        AtLeast("valid_until", 5.0),
        Match("path", ("USER.md",)),
        Match("kind", ("turn",)),
        HasId(("x",)),
    )
    for bad in ([], [""], ["user:a", ""]):
        with pytest.raises(ScopeRequiredError):
            scope_filter(bad)


def test_a_hand_built_filter_without_its_scope_condition_is_refused() -> None:
    with pytest.raises(ScopeRequiredError):
        ScopeFilter(("user:a",), (Match("kind", ("turn",)),))
    with pytest.raises(ScopeRequiredError):
        ScopeFilter(("user:a",), (Match("scope", ("user:b",)),))
    with pytest.raises(ScopeRequiredError):
        ScopeFilter((), ())


async def test_every_read_stays_inside_its_scope(service: MemoryService) -> None:
    at = datetime(2024, 5, 1, 12, tzinfo=UTC)
    for user in ("alice", "bob"):
        await service.indexing.index_turn(scope=f"user:{user}", turn_id=f"{user}-1", session_id="s", channel="web",
                                 speaker=user, text=f"{user} likes green tea", timestamp=at)  # fmt: skip
    index = service.loader.require_index()
    bob_ids = list(index.manifest("user:bob"))
    alice_ids = list(index.manifest("user:alice"))
    assert len(bob_ids) == len(alice_ids) == 1
    assert index._payloads(scopes=["user:alice"], ids=bob_ids) == {}
    assert set(index._payloads(scopes=["user:alice"], ids=bob_ids + alice_ids)) == set(alice_ids)
    vec = service.loader.require_embedder().embed_query("green tea").tolist()
    sparse = service.loader.require_indexer().sparse.query("green tea")
    dense, bm25 = index._search(scopes=["user:alice"], dense=vec, sparse=sparse, limit=10, now=at.timestamp())
    assert {c.id for c in dense} == {c.id for c in bm25} == set(alice_ids)
    assert index.count("user:bob") == 1 and index.count() == 2
    with pytest.raises(ScopeRequiredError):
        index._search(scopes=[], dense=vec, sparse=SparseVec([], []), limit=10, now=0.0)
    with pytest.raises(ScopeRequiredError):
        index._payloads(scopes=[], ids=bob_ids)
    index.delete_scope("user:bob")
    assert index.count() == 1 and index.manifest("user:alice")
