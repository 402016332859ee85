"""Knowledge graph: supersession, TTL expiry, dedupe, as_of, prompt selection."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.memory.knowledge.graph import KnowledgeGraph

T0 = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture
def kg(tmp_path: Path) -> KnowledgeGraph:
    g = KnowledgeGraph(tmp_path / "state.sqlite")
    yield g  # type: ignore[misc]
    g.close()


def objects(facts: list) -> list[str]:  # type: ignore[type-arg]
    return [f.object for f in facts]


def test_moved_user_prompt_shows_only_new_city_and_timeline_shows_both(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "lives_in", "Berlin", valid_from=T0)
    res = kg.add("alice", "alice", "lives_in", "Munich", valid_from=T0 + timedelta(days=100))
    assert res.status == "inserted" and len(res.superseded) == 1

    prompt = kg.format_for_prompt(kg.select_relevant("alice", "what's new?"))
    assert "Munich" in prompt and "Berlin" not in prompt
    timeline = kg.timeline("alice")
    assert objects(timeline) == ["Berlin", "Munich"]
    berlin, munich = timeline
    assert berlin.valid_until == munich.valid_from  # closed exactly where the new value starts
    assert munich.valid_until is None


def test_as_of_answers_with_the_value_valid_then(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "works_at", "Acme", valid_from=T0)
    kg.add("alice", "alice", "works_at", "Globex", valid_from=T0 + timedelta(days=30))
    assert objects(kg.current("alice", as_of=T0 + timedelta(days=29))) == ["Acme"]
    assert objects(kg.current("alice", as_of=T0 + timedelta(days=30))) == ["Globex"]
    assert kg.current("alice", as_of=T0 - timedelta(seconds=1)) == []


def test_backdated_single_value_becomes_history_not_current(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "lives_in", "Munich", valid_from=T0 + timedelta(days=200))
    res = kg.add("alice", "alice", "lives_in", "Paris", valid_from=T0)
    assert res.fact.valid_until == T0 + timedelta(days=200)
    assert objects(kg.current("alice", as_of=T0 + timedelta(days=300))) == ["Munich"]
    assert objects(kg.current("alice", as_of=T0 + timedelta(days=1))) == ["Paris"]


def test_multi_valued_predicates_coexist(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "likes", "jazz", valid_from=T0)
    kg.add("alice", "alice", "likes", "climbing", valid_from=T0)
    assert sorted(objects(kg.current("alice", as_of=T0))) == ["climbing", "jazz"]


def test_ephemeral_predicate_gets_default_ttl(kg: KnowledgeGraph) -> None:
    fact = kg.add("alice", "alice", "interested_in", "sourdough", valid_from=T0).fact
    assert fact.valid_until == T0 + timedelta(days=90)
    assert objects(kg.current("alice", as_of=T0 + timedelta(days=89, hours=23))) == ["sourdough"]
    assert kg.current("alice", as_of=T0 + timedelta(days=90)) == []


def test_ttl_is_configurable_and_explicit_until_wins(tmp_path: Path) -> None:
    with KnowledgeGraph(tmp_path / "kg.sqlite", ephemeral_ttl_days=7) as g:
        assert g.add("u", "u", "completed", "marathon", valid_from=T0).fact.valid_until == T0 + timedelta(7)
        until = T0 + timedelta(days=365)
        fact = g.add("u", "u", "traveled_to", "Peru", valid_from=T0, valid_until=until).fact
        assert fact.valid_until == until


def test_decided_is_durable_but_not_identity(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "decided", "buy the blue bike", valid_from=T0)
    assert objects(kg.current("alice", as_of=T0 + timedelta(days=5000))) == ["buy the blue bike"]
    assert kg.select_relevant("alice", "hello", as_of=T0 + timedelta(days=1)) == []
    about = kg.select_relevant("alice", "did I buy the blue bike", as_of=T0 + timedelta(days=1))
    assert objects(about) == ["buy the blue bike"]


def test_re_mentioned_interest_refreshes_its_ttl(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "interested_in", "sourdough", valid_from=T0)
    res = kg.add("alice", "alice", "interested_in", "Sourdough", valid_from=T0 + timedelta(days=60))
    assert res.status == "duplicate"
    assert res.fact.valid_from == T0 and res.fact.valid_until == T0 + timedelta(days=150)
    assert len(kg.all("alice")) == 1


def test_exact_duplicate_is_not_inserted_and_keeps_highest_confidence(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "likes", "Jazz", valid_from=T0, confidence=0.5)
    res = kg.add("alice", "Alice", "likes", "  jazz ", valid_from=T0 + timedelta(days=3), confidence=0.9)
    assert res.status == "duplicate" and res.fact.confidence == 0.9
    assert len(kg.all()) == 1


def test_near_duplicate_merged_only_for_the_same_predicate(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "likes", "hiking in the Alps", valid_from=T0)
    assert kg.add("alice", "alice", "likes", "hiking in Alps", valid_from=T0).status == "merged"
    # Same object text under another predicate is another fact (the predicate gate).
    assert kg.add("alice", "alice", "dislikes", "hiking in the Alps", valid_from=T0).status == "inserted"
    assert len(kg.all()) == 2


def test_numbers_keep_similar_facts_apart(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "completed", "chapter 1 of the thesis draft", valid_from=T0)
    assert kg.add("alice", "alice", "completed", "chapter 2 of the thesis draft", valid_from=T0).status == "inserted"


def test_number_order_matters_for_similarity(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "likes", "room 1 0", valid_from=T0)
    assert kg.add("alice", "alice", "likes", "room 0 1", valid_from=T0).status == "inserted"


def test_near_duplicate_of_single_valued_does_not_supersede(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "works_at", "Acme Robotics GmbH", valid_from=T0)
    res = kg.add("alice", "alice", "works_at", "acme robotics", valid_from=T0 + timedelta(days=1))
    assert res.status == "merged" and res.superseded == ()
    assert objects(kg.current("alice", as_of=T0 + timedelta(days=2))) == ["Acme Robotics GmbH"]


def test_scopes_are_isolated(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "lives_in", "Berlin", valid_from=T0)
    kg.add("channel:tg-42", "alice", "lives_in", "Rome", valid_from=T0 + timedelta(days=1))
    assert objects(kg.current("alice")) == ["Berlin"]
    assert objects(kg.current("channel:tg-42")) == ["Rome"]


def test_invalidate_keeps_history_delete_removes(kg: KnowledgeGraph) -> None:
    a = kg.add("alice", "alice", "has_pet", "a cat named Miso", valid_from=T0).fact
    b = kg.add("alice", "alice", "likes", "tea", valid_from=T0).fact
    assert kg.invalidate(a.id, at=T0 + timedelta(days=10))
    assert not kg.invalidate(a.id, at=T0 + timedelta(days=11))  # already over
    assert objects(kg.current("alice", as_of=T0 + timedelta(days=10))) == ["tea"]
    assert kg.get(a.id) is not None and kg.get(a.id).valid_until == T0 + timedelta(days=10)  # type: ignore[union-attr]
    assert kg.delete(b.id) and kg.get(b.id) is None and not kg.delete(b.id)


def test_prune_expired_removes_only_rows_ended_before_cutoff(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "visiting", "Oslo", valid_from=T0, valid_until=T0 + timedelta(days=3))
    kg.add("alice", "alice", "likes", "tea", valid_from=T0)
    kg.add("bob", "bob", "visiting", "Rome", valid_from=T0, valid_until=T0 + timedelta(days=3))
    assert kg.prune_expired(T0 + timedelta(days=3), user_id="alice") == 0  # ends exactly at cutoff: kept
    assert kg.prune_expired(T0 + timedelta(days=3, seconds=1), user_id="alice") == 1
    assert objects(kg.all()) == ["tea", "Rome"]


def test_invalid_input_is_rejected(kg: KnowledgeGraph) -> None:
    for args in (("", "a", "p", "o"), ("u", " ", "p", "o"), ("u", "a", "--", "o"), ("u", "a", "p", "")):
        with pytest.raises(ValueError):
            kg.add(*args)
    with pytest.raises(ValueError):
        kg.add("u", "a", "likes", "x", valid_from=T0, valid_until=T0)
    with pytest.raises(ValueError):
        kg.add("u", "a", "likes", "x", valid_from="next tuesday")


def test_timestamps_stored_in_one_format_whatever_the_input(kg: KnowledgeGraph) -> None:
    kg.add("u", "u", "likes", "a", valid_from="2024-03-01T10:00:00")
    kg.add("u", "u", "likes", "b", valid_from="2024-03-01 10:00:00")
    kg.add("u", "u", "likes", "c", valid_from="2024-03-01T12:00:00+02:00")
    kg.add("u", "u", "likes", "d", valid_from="2024-03-01T10:00:00Z")
    conn = sqlite3.connect(kg.path)
    rows = {r[0] for r in conn.execute("SELECT valid_from FROM kg_facts")}
    conn.close()
    assert rows == {"2024-03-01 10:00:00.000000"}
    # An isoformat as_of with its 'T' compares correctly against the stored space form.
    assert len(kg.current("u", as_of="2024-03-01T10:00:00")) == 4
    assert kg.current("u", as_of="2024-03-01T09:59:59.999999") == []


def test_select_relevant_identity_plus_mentions(kg: KnowledgeGraph) -> None:
    kg.add("alice", "alice", "lives_in", "Munich", valid_from=T0)
    kg.add("alice", "alice", "interested_in", "pottery", valid_from=T0)
    kg.add("alice", "Bob", "works_at", "Globex", valid_from=T0)
    kg.add("alice", "Annabel", "likes", "chess", valid_from=T0)
    kg.add("alice", "Carol", "knows", "Bob", valid_from=T0)
    at = T0 + timedelta(days=1)
    assert objects(kg.select_relevant("alice", "hi", as_of=at)) == ["Munich"]
    got = objects(kg.select_relevant("alice", "Is bob still at work? Ask Anna.", as_of=at))
    assert sorted(got) == ["Bob", "Globex", "Munich"]  # Bob as subject and as object; Anna != Annabel
    assert "pottery" in objects(kg.select_relevant("alice", "pottery class tonight", as_of=at))
    # Display-name aliases count as the user.
    kg.add("alice", "Ali", "has_role", "team lead", valid_from=T0)
    assert "team lead" in objects(kg.select_relevant("alice", "hi", as_of=at, aliases=["Ali"]))


def test_select_relevant_keeps_room_for_mentions(kg: KnowledgeGraph) -> None:
    for i in range(10):
        kg.add("alice", "alice", "likes", f"thing {i}", valid_from=T0)
    kg.add("alice", "Bob", "works_at", "Globex", valid_from=T0)
    got = kg.select_relevant("alice", "how is Bob?", limit=4, as_of=T0 + timedelta(days=1))
    assert len(got) == 4 and "Globex" in objects(got)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["Berlin", "Munich", "Paris", "Oslo"]), min_size=1, max_size=8))
def test_single_valued_has_one_current_value_at_every_instant(tmp_path: Path, cities: list[str]) -> None:
    path = tmp_path / f"p{abs(hash(tuple(cities)))}.sqlite"
    with KnowledgeGraph(path) as g:
        for i, city in enumerate(cities):
            g.add("u", "u", "lives_in", city, valid_from=T0 + timedelta(days=i))
        for i in range(len(cities)):
            now = g.current("u", as_of=T0 + timedelta(days=i, hours=12))
            assert objects(now) == [cities[i]]
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
