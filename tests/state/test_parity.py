"""The same calls on SQLite and PostgreSQL give the same answers: a script over every store's
methods (those tests/state/test_backends.py does not already pin), run on both, results compared
call by call. Instants are given explicitly, so nothing depends on the clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gateway.state import Invite, SleepRun, State, StorageError, TranscriptEntry, open_state, open_state_url
from gateway.state.delivery import OutboxEntry

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
H = timedelta(hours=1)


def _turn(i: int, session: str, user: str, role: str, scope_conv: str = "tg:1") -> TranscriptEntry:
    return TranscriptEntry(turn_id=f"t{i}", session_id=session, user_id=user, role=role, content=f"{role} {i} 100%",
                           channel="telegram", conversation_key=scope_conv, speaker=user,
                           created_at=T0 + timedelta(minutes=i))  # fmt: skip


def _outbox(i: int, user: str, due: datetime) -> OutboxEntry:
    return OutboxEntry(delivery_id=f"d{i}", user_id=user, kind="reminder", text=f"r{i}", notice=bool(i % 2),
                       origin="telegram|1|dm|default", status="pending", due_at=due, attempts=0, created_at=T0,
                       sent_at=None, channel="", detail="")  # fmt: skip


SCRIPT: list[Callable[[State], Any]] = [
    lambda s: [s.users.create(u, display_name=u.title(), timezone=tz, at=T0 + timedelta(seconds=i))
               for i, (u, tz) in enumerate([("ann", "UTC"), ("bo", "Europe/Paris"), ("cy", "UTC")])],
    lambda s: s.identities.add("telegram", "1", "ann", display_name="Ann T", source="auto", at=T0),
    lambda s: s.identities.add("discord", "9", "bo", display_name="Bo D", source="link", at=T0),
    lambda s: s.identities.account_on("ann", "telegram"),
    lambda s: s.users.names("ann"),
    lambda s: s.sessions.create("sa", user_id="ann", scope_key="user:ann", conversation_key="tg:1", persona="default",
                                at=T0),
    lambda s: s.sessions.create("sg", user_id="ann", scope_key="conv:telegram:-5", conversation_key="tg:-5",
                                persona="default", at=T0),
    lambda s: s.turns.append(*[_turn(i, "sa", "ann", "user" if i % 2 == 0 else "assistant") for i in range(6)]),
    lambda s: s.turns.append(_turn(6, "sg", "ann", "user", "tg:-5"), _turn(7, "sg", "bo", "user", "tg:-5")),
    lambda s: s.sessions.open_in("user:ann"),
    lambda s: s.sessions.open_ids("conv:telegram:-5"),
    lambda s: s.turns.latest_message("sa"),
    lambda s: s.turns.logged(after_seq=0, upto_seq=100, since=T0 - H, limit=10),
    lambda s: s.turns.in_scope("user:ann", after_seq=1, before=T0 + H, limit=10),
    lambda s: s.turns.any_in_scope_after("user:ann", 5),
    lambda s: s.turns.any_in_scope_after("user:ann", 99),
    lambda s: s.turns.first_in_scope("user:ann"),
    lambda s: s.turns.recent_speakers("telegram", "tg:-5", 5),
    lambda s: s.turns.discard_message("sa", "t4"),
    lambda s: s.turns.history("sa", 3, after_seq=1),
    lambda s: s.sessions.touch("sa", T0 + H),
    lambda s: s.sessions.end("sa", T0 + 2 * H),
    lambda s: s.sessions.create("sa2", user_id="ann", scope_key="user:ann", conversation_key="tg:1", persona="x",
                                at=T0 + 3 * H),
    lambda s: s.sessions.last_ended("user:ann", excluding="sa2"),
    lambda s: s.sessions.of_user("ann"),
    lambda s: s.sessions.of_user("ann", before=T0 + 2 * H, limit=1),
    lambda s: s.sessions.summaries("ann", ["sa2", "sa", "sg", "nope"]),
    # The chat's History (issue 33): a title, continuing a past session, deleting one.
    lambda s: (s.sessions.set_title("sa", user_id="ann", title="Trip", at=T0), s.sessions.summaries("ann", ["sa"])),
    lambda s: (s.sessions.set_title("sa", user_id="ann", title="", at=T0), s.sessions.summaries("ann", ["sa"])),
    lambda s: (s.sessions.reopen("sa", T0 + 3 * H), s.sessions.open_ids("user:ann"), s.sessions.get("sa2")),
    lambda s: (s.turns.delete_session("sa"), s.sessions.get("sa"), s.turns.search_sessions("ann", "t1")),
    lambda s: s.conversations.remember(conversation_key="tg:-5", channel="telegram", conversation_id="-5",
                                       kind="group", user_id="", persona="default", at=T0),
    lambda s: s.conversations.remember(conversation_key="tg:1", channel="telegram", conversation_id="1", kind="dm",
                                       user_id="ann", persona="default", at=T0),
    lambda s: (s.conversations.get("tg:-5"), s.conversations.group_keys()),
    lambda s: s.links.create("L1", user_id="ann", channel="telegram", account_id="1", conversation_id="1", name="Ann",
                             at=T0, expires_at=T0 + H),
    lambda s: s.links.redeem("L1", user_id=None, channel="discord", account_id="9", conversation_id="9", name="Bo",
                             redeemer_token="rt", issuer_token="it", expires_at=T0 + H),
    lambda s: s.links.confirm("L1", "issuer"),
    lambda s: (s.links.get("L1", T0), s.links.unredeemed("L1", T0), s.links.involving("discord", "9", T0),
               s.links.of_account("telegram", "1")),
    lambda s: (s.links.expire(T0 + 2 * H), s.links.get("L1", T0)),
    lambda s: s.users.merge(into="ann", source="bo"),
    lambda s: (s.users.get("bo"), s.identities.accounts("ann"), s.users.all()),
    lambda s: s.users.set_timezone("ann", "Asia/Tokyo") and s.users.set_display_name("ann", "Ann ✓"),
    lambda s: s.access.add_pairing("P1", channel="telegram", account_id="55", display_name="X", at=T0,
                                   expires_at=T0 + H),
    lambda s: s.access.repeat_request("P1", answered_at=T0 + timedelta(minutes=5)),
    lambda s: (s.access.pending(T0), s.access.pending(T0, "discord"), s.access.pairing_of("telegram", "55"),
               s.access.codes_issued("telegram", "55", since=T0 - H), s.access.is_approved("telegram", "55")),
    lambda s: (s.access.expire_pairing(T0 + 2 * H), s.access.queued("telegram"),
               s.access.delete_pairing("P1")),
    lambda s: s.access.add_invite(Invite(code="I1", channel="telegram", note="n",
                                         created_at="2026-05-01T08:00:00+00:00",
                                         expires_at="2026-05-02T08:00:00+00:00"), T0),
    lambda s: (s.access.invites(T0), s.access.use_invite("I1", "discord", T0), s.access.delete_invite("I1"),
               s.access.delete_invite("I1")),
    lambda s: s.sleep_runs.save_extraction(SleepRun(scope="user:ann", slot="s1", day="2026-05-01", first_seq=1,
                                                  upto_seq=3, turns=2, output="{}", stage="extracted", detail="")),
    lambda s: (s.sleep_runs.set_stage("user:ann", "s1", "applied", "ok"), s.sleep_runs.get("user:ann", "s1")),
    lambda s: (s.sleep_runs.mark_empty_night("user:cy", "s1"), s.sleep_runs.last_seq("user:cy"),
               s.sleep_runs.get("user:cy", "s1")),
    lambda s: s.web_sessions.create("W1", user_id="ann", operator=True, via="link", at=T0, expires_at=T0 + H),
    lambda s: (s.web_sessions.touch("W1", at=T0 + timedelta(minutes=1), expires_at=T0 + 2 * H),
               s.web_sessions.get("W1", T0 + H), s.web_sessions.revoke_user("ann"), s.web_sessions.delete("W1")),
    lambda s: s.api_keys.add("KH", key_id="k1", user_id="ann", label="laptop", at=T0),
    lambda s: (s.api_keys.touch("k1", T0 + H), s.api_keys.of_user("ann"), s.api_keys.revoke("ann", "k1")),
    lambda s: [s.outbox.record(_outbox(i, "ann" if i < 3 else "cy", T0 + i * H)) for i in range(5)],
    lambda s: (s.outbox.claim("d0", now=T0, lease_until=T0 + H), s.outbox.mark_missed("d0", detail="quiet"),
               s.outbox.missed_for("ann"), s.outbox.take_missed("d0", lease_until=T0 + 2 * H)),
    lambda s: (s.outbox.reschedule("d1", due_at=T0 + 9 * H, detail="retry"), s.outbox.mark_failed("d2", detail="x"),
               s.outbox.due(T0 + 10 * H, limit=3), s.outbox.list_for("ann"), s.outbox.counts()),
    lambda s: (s.outbox.direct_conversations("ann"), s.outbox.merge(into="ann", source="cy"), s.outbox.list_for("ann")),
    lambda s: [s.usage.add(user_id=u, day=d, role="main", provider="p", model="m", input_tokens=7, output_tokens=1,
                           cache_read_tokens=2, cache_write_tokens=3, cost_usd=0.125)
               for u, d in [("ann", "2026-05-01"), ("ann", "2026-05-02"), ("cy", "2026-05-02")]],
    lambda s: (s.usage.rows(since_day="2026-05-02"), s.usage.rows(since_day="2026-01-01", user_id="ann")),
    lambda s: s.persona_choices.choose("ann", "tg:1", "pirate", T0),
    lambda s: (s.persona_choices.chosen("ann", "tg:1"), s.persona_choices.clear("ann", "tg:1"),
               s.persona_choices.clear("ann", "tg:1")),
    lambda s: s.users.create("ann", display_name="dup", timezone="UTC", at=T0),  # a duplicate: StorageError on both
    lambda s: s.people.summaries(),
    lambda s: {t: len(r) for t, r in s.people.rows("ann").items()},
]


def _run(state: State) -> list[Any]:
    out: list[Any] = []
    for step in SCRIPT:
        try:
            out.append(step(state))
        except StorageError as exc:
            out.append(("StorageError", type(exc.__cause__).__name__ in ("IntegrityError", "UniqueViolation")))
    return out


def test_postgresql_answers_every_call_as_sqlite_does(tmp_path: Path, pg_url: str) -> None:
    lite, pg = open_state(tmp_path / "state.sqlite"), open_state_url(pg_url)
    try:
        want, got = _run(lite), _run(pg)
    finally:
        lite.close()
        pg.close()
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        assert g == w, f"step {i}: SQLite {w!r}, PostgreSQL {g!r}"
