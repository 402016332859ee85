"""Every store of the ``State`` Protocol, the same calls and answers on SQLite and PostgreSQL
(``any_state``: the PostgreSQL run skips with a reason when the local server is unreachable)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from gateway.state import Invite, NewFact, SleepRun, State, StorageError, TranscriptEntry
from gateway.state.delivery import DeliveryPrefs, OutboxEntry

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _entry(seq_hint: int, *, session: str = "s1", user: str = "u1", text: str = "") -> TranscriptEntry:
    return TranscriptEntry(turn_id=f"t{seq_hint}", session_id=session, user_id=user, role="user",
                           content=text or f"message {seq_hint}", channel="web", conversation_key="web:c1",
                           speaker="", created_at=T0 + timedelta(seconds=seq_hint))  # fmt: skip


def _person(state: State, user: str = "u1") -> None:
    state.users.create(user, display_name=user.upper(), timezone="Europe/Berlin", at=T0)
    state.identities.add("web", f"acct-{user}", user, display_name=user, source="auto", at=T0)
    state.sessions.create(f"s-{user}", user_id=user, scope_key=f"user:{user}", conversation_key=f"web:{user}",
                          persona="default", at=T0)  # fmt: skip


def test_users_identities_and_the_scheduler_reads(any_state: State) -> None:
    s = any_state
    for i, tz in enumerate(["UTC", "Europe/Berlin", "UTC", "Asia/Tokyo"]):
        s.users.create(f"u{i}", display_name=f"U{i}", timezone=tz, at=T0 + timedelta(seconds=i))
    s.users.ensure("u0", display_name="other", timezone="UTC")
    assert s.users.get("u0") is not None and s.users.get("u0").display_name == "U0"  # type: ignore[union-attr]
    assert s.users.user_timezones() == ["Asia/Tokyo", "Europe/Berlin", "UTC"]
    assert s.users.users_in_timezone("UTC") == ["u0", "u2"]
    assert s.users.users_in_timezone("UTC", after="u0") == ["u2"]
    newest = s.users.newest_user_position()
    assert newest[1] == "u3"
    assert [p[1] for p, _ in s.users.users_added_since(("", ""))] == ["u0", "u1", "u2", "u3"]
    assert s.users.set_tier("u1", 2) and not s.users.set_tier("nobody", 2)
    assert s.users.get("u1").tier == 2  # type: ignore[union-attr]
    s.identities.add("telegram", "42", "u1", display_name="Sam", source="auto", at=T0)
    assert s.identities.lookup("telegram", "42") == "u1"
    found = s.identities.lookup_user("telegram", "42")
    assert found is not None and found[0] == "u1" and found[1] == s.users.get("u1")
    assert s.identities.lookup_user("telegram", "43") is None
    s.identities.add("telegram", "44", "ghost", source="auto", at=T0)  # an account whose user row is gone
    assert s.identities.lookup_user("telegram", "44") == ("ghost", None)
    assert s.identities.accounts("u1") == [("telegram", "42")]


def test_transcript_history_search_and_forgetting(any_state: State) -> None:
    s = any_state
    _person(s)
    texts = ["Hello there", "The blue whale sings", "nothing here", "Blue skies"]
    s.turns.append(*[_entry(i, session="s-u1", text=t) for i, t in enumerate(texts, start=1)])
    rows = s.turns.history("s-u1", 10)
    assert [r.content for r in rows] == ["Hello there", "The blue whale sings", "nothing here", "Blue skies"]
    last = s.turns.last_seq()
    assert last == max(r.seq for r in s.turns.after("s-u1"))
    assert s.turns.size_after("s-u1", 0)[0] == 4
    assert s.turns.count_after("s-u1", 0, role="user") == 4
    assert s.turns.search_sessions("u1", "blue whale") == ["s-u1"]
    assert s.turns.search_sessions("u1", "giraffe") == []
    found = s.turns.rows_with_words("u1", "blue")
    assert [c for _, c in found] == ["The blue whale sings", "Blue skies"]
    assert s.turns.set_content("u1", found[0][0], "[forgotten]")
    assert s.turns.rows_with_words("u1", "whale") == []
    page = s.turns.page("s-u1", limit=2)
    assert [r.content for r in page] == ["nothing here", "Blue skies"]
    s.compactions.advance("s-u1", upto_seq=3, summary="sum", at=T0)
    s.compactions.advance("s-u1", upto_seq=2, summary="older", at=T0)  # never backwards
    assert s.compactions.get("s-u1").upto_seq == 3  # type: ignore[union-attr]


def test_dedupe_access_and_invites(any_state: State) -> None:
    s = any_state
    assert s.dedupe.mark_seen("telegram", "m1", T0) and not s.dedupe.mark_seen("telegram", "m1", T0)
    s.dedupe.mark_seen("telegram", "m2", T0 + timedelta(hours=2))
    assert s.dedupe.prune(T0 + timedelta(hours=1), 10) == 1
    assert not s.dedupe.seen("telegram", "m1") and s.dedupe.seen("telegram", "m2")
    s.access.approve("telegram", "1", display_name="A", via="pairing", at=T0)
    s.access.approve("telegram", "1", display_name="B", via="invite", at=T0)  # replaces
    assert [a.display_name for a in s.access.approved()] == ["B"]
    assert s.access.revoke("telegram", "1") and not s.access.revoke("telegram", "1")
    s.access.add_pairing("c1", channel="telegram", account_id="2", display_name="X", at=T0,
                         expires_at=T0 + timedelta(hours=1))  # fmt: skip
    s.access.add_pairing("c2", channel="telegram", account_id="3", display_name="Y", at=T0 + timedelta(seconds=1),
                         expires_at=T0 + timedelta(hours=1))  # fmt: skip
    assert s.access.queued("telegram") == 2
    assert s.access.oldest_pairing("telegram") == ("c1", T0)
    s.access.count("telegram", "refused", T0, window_start=T0 - timedelta(hours=1))
    s.access.count("telegram", "refused", T0, window_start=T0 - timedelta(hours=1))
    assert [st.refused for st in s.access.stats(T0, since=T0 - timedelta(seconds=1))] == [2]
    taken = s.access.take_pairing("c1", T0)
    assert taken is not None and taken.account_id == "2"
    s.access.add_invite(Invite(code="inv", channel="", note="n", created_at="2026-03-01 12:00:00.000000",
                               expires_at="2026-03-02 12:00:00.000000"), T0)  # fmt: skip
    assert [i.code for i in s.access.invites(T0)] == ["inv"]
    assert s.access.use_invite("inv", "telegram", T0)


def test_knowledge_graph_rows(any_state: State) -> None:
    s = any_state

    def fact(obj: str, start: datetime, replay: str | None = None) -> NewFact:
        return NewFact(user_id="u1", subject="Sam", subject_key="sam", predicate="likes", object=obj,
                       object_key=obj.lower(), valid_from=start, valid_until=None, confidence=0.5, source_type="t",
                       source_ref="", replay_key=replay, created_at=start)  # fmt: skip

    a = s.knowledge.insert(fact("Tea", T0, "r1"))
    b = s.knowledge.insert(fact("Coffee", T0 + timedelta(days=1)))
    assert b.id > a.id and a.confidence == 0.5
    assert s.knowledge.by_replay_key("r1") == a
    with pytest.raises(StorageError):  # one open row per exact fact
        s.knowledge.insert(fact("Tea", T0 + timedelta(days=2)))
    assert [f.object for f in s.knowledge.current(T0 + timedelta(days=3), user_id="u1")] == ["Tea", "Coffee"]
    assert len(s.knowledge.overlapping("u1", "sam", "likes", T0, None)) == 2
    assert s.knowledge.invalidate(a.id, T0 + timedelta(hours=1))
    assert s.knowledge.prune_expired(T0 + timedelta(days=5)) == 1
    assert [f.object for f in s.knowledge.all()] == ["Coffee"]
    assert s.knowledge.timeline("sam") == s.knowledge.all("u1")


def test_progress_web_sessions_keys_personas_contexts(any_state: State) -> None:
    s = any_state
    s.watermarks.set("w", 5)
    assert s.watermarks.get("w") == 5
    s.writer_progress.advance("s1", 7)
    assert s.writer_progress.get("s1") == 7
    s.sleep_runs.save_extraction(SleepRun(scope="user:u1", slot="2026-03-01", day="2026-03-01", first_seq=1,
                                        upto_seq=9, turns=3, output="{}", stage="extracted", detail=""))  # fmt: skip
    s.sleep_runs.finish_night("user:u1", "2026-03-01", 9)
    s.sleep_runs.finish_night("user:u1", "2026-03-02", 4)  # never backwards
    assert s.sleep_runs.last_seq("user:u1") == 9
    s.distill_runs.started("u1", "core")
    s.distill_runs.finished("u1", "core", "ok", "", 120)
    assert s.distill_runs.status("u1")[0]["chars"] == 120
    s.retention.set("user:u1", T0)
    assert s.retention.get("user:u1") == T0
    s.web_sessions.add_signin("h1", user_id="u1", operator=True, issued_by="cli", at=T0,
                              expires_at=T0 + timedelta(minutes=5))  # fmt: skip
    grant = s.web_sessions.take_signin("h1", T0)
    assert grant is not None and grant.operator and s.web_sessions.take_signin("h1", T0) is None
    s.web_sessions.create("ws", user_id="u1", operator=False, via="link", at=T0, expires_at=T0 + timedelta(days=1))
    assert s.web_sessions.get("ws", T0) is not None
    assert s.web_sessions.expire(T0 + timedelta(days=2)) == 1
    s.api_keys.add("kh", key_id="k1", user_id="u1", label="x", at=T0)
    assert s.api_keys.by_hash("kh").key_id == "k1"  # type: ignore[union-attr]
    assert s.api_keys.revoke("u1") == 1
    s.persona_choices.choose("u1", "", "pirate", T0)
    assert s.persona_choices.choices("u1") == {"": "pirate"}
    s.turn_contexts.record("t1", user_id="u1", session_id="s1", at=T0, data="{}")
    s.turn_contexts.record("t1", user_id="u1", session_id="s1", at=T0, data='{"a":1}')  # replaces
    assert s.turn_contexts.get("t1").data == '{"a":1}'  # type: ignore[union-attr]
    assert s.turn_contexts.prune(T0 + timedelta(seconds=1), 10) == 1


def test_outbox_and_usage(any_state: State) -> None:
    s = any_state
    e = OutboxEntry(delivery_id="d1", user_id="u1", kind="reminder", text="hi", notice=False, origin="",
                    status="pending", due_at=T0, attempts=0, created_at=T0, sent_at=None, channel="",
                    detail="")  # fmt: skip
    assert s.outbox.record(e) == e and s.outbox.record(e) == e
    assert [d.delivery_id for d in s.outbox.due(T0)] == ["d1"]
    claimed = s.outbox.claim("d1", now=T0, lease_until=T0 + timedelta(minutes=1))
    assert claimed is not None and claimed.status == "sending"
    assert s.outbox.mark_sent("d1", channel="web", at=T0)
    assert s.outbox.counts().get("sent") == 1
    s.outbox.set_prefs("u1", DeliveryPrefs(preferred_channel="telegram"))
    assert s.outbox.prefs("u1").preferred_channel == "telegram"
    for _ in range(2):
        s.usage.add(user_id="u1", day="2026-03-01", role="chat", provider="anthropic", model="m", input_tokens=10,
                    output_tokens=5, cache_read_tokens=0, cache_write_tokens=0, cost_usd=0.25)  # fmt: skip
    [row] = s.usage.rows(since_day="2026-01-01")
    assert (row.calls, row.input_tokens, row.cost_usd) == (2, 20, 0.5)
    assert s.usage.cost_on("u1", "2026-03-01") == 0.5 and isinstance(s.usage.cost_on("u1", "2026-03-01"), float)


def test_people_rows_erase_restore_and_summaries(any_state: State) -> None:
    s = any_state
    _person(s, "u1")
    _person(s, "u2")
    s.turns.append(_entry(1, session="s-u1", text="secret tea"), _entry(2, session="s-u2", user="u2"))
    s.persona_choices.choose("u1", "", "pirate", T0)
    rows = s.people.rows("u1")
    assert set(rows) >= {"users", "identities", "sessions", "turns", "persona_choices"}
    summaries = s.people.summaries()
    assert summaries["u1"]["turns"] == 1 and summaries["u1"]["persona"] == "pirate"
    counts = s.people.erase_user("u1")
    assert counts["turns"] == 1 and counts["users"] == 1
    assert s.people.rows("u1") == {} and s.turns.rows_with_words("u1", "secret") == []
    s.people.scrub()
    restored = s.people.restore("u3", rows, session_ids={"s-u1": "s-u3"})
    assert restored["turns"] == 1 and s.users.get("u3") is not None
    assert [r.content for r in s.turns.history("s-u3", 10)] == ["secret tea"]
    assert s.writer_progress.get("s-u3") == s.turns.last_seq()


def test_tx_nests_rolls_back_and_chains_driver_errors(any_state: State) -> None:
    s = any_state
    with pytest.raises(RuntimeError), s.tx():
        s.users.create("a", display_name="A", timezone="UTC")
        with s.tx():  # joins
            s.users.create("b", display_name="B", timezone="UTC")
        raise RuntimeError("boom")
    assert s.users.all() == []
    with s.tx():
        s.users.create("a", display_name="A", timezone="UTC")
        with s.tx():
            s.users.create("b", display_name="B", timezone="UTC")
    assert [u.user_id for u in s.users.all()] == ["a", "b"]
    with pytest.raises(StorageError) as caught:
        s.users.create("a", display_name="A", timezone="UTC")  # a duplicate key
    assert caught.value.__cause__ is not None
    assert type(caught.value.__cause__).__module__.split(".")[0] in ("sqlite3", "psycopg")
    with pytest.raises(StorageError), s.tx():
        s.users.create("c", display_name="C", timezone="UTC")
        s.users.create("a", display_name="A", timezone="UTC")
    assert s.users.get("c") is None  # the whole transaction went


def test_transactions_on_threads_do_not_lose_updates(any_state: State) -> None:
    """Read-then-write inside tx() on several threads at once: every increment lands (one writer at a
    time on both backends)."""
    s = any_state
    s.watermarks.set("n", 0)

    def bump() -> None:
        for _ in range(20):
            with s.tx():
                s.watermarks.set("n", s.watermarks.get("n") + 1)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert s.watermarks.get("n") == 80
