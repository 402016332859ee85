"""One attacker with many account ids cannot keep a legitimate stranger out of pairing.

Before issue 12 the queue held three codes per channel and refused everyone else until one expired;
three attacker accounts that re-asked as soon as their codes expired held it forever. Now:

* an invite from the owner (``kith pairing invite``) approves its holder at once, never queued;
* each account gets at most two codes a day, and a full queue gives the oldest request's slot to a
  newcomer once that request has had ten minutes to be approved, so a flood has to burn fresh accounts
  continuously and cannot push out a code before the owner had time for it;
* the owner sees how many strangers were turned away.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import gateway.turn.admission as access
from gateway.cli.main import main as kith
from gateway.configread import parse_config
from gateway.turn.admission import AccessPolicy, AccessStore
from gateway.types import AccessDecision, Drop, InboundMessage


def policy(tmp_path: Path, **telegram: object) -> AccessPolicy:
    cfg = parse_config({"data_dir": str(tmp_path / "data"), "channels": {"telegram": telegram}}, env={})
    return AccessPolicy(cfg, AccessStore.for_config(cfg))


def dm(account: str, text: str = "hi", channel: str = "telegram") -> InboundMessage:
    return InboundMessage(channel=channel, account_id=account, text=text, conversation_id=account)


class Clock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = datetime(2026, 5, 9, 8, 0, tzinfo=UTC)
        monkeypatch.setattr(access, "_now", lambda: self.now)

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


def test_an_invite_gets_in_however_full_the_queue_is(tmp_path: Path) -> None:
    p = policy(tmp_path)  # the default queue: 20 per channel
    replies = [p.check(dm(f"bot-{i}")) for i in range(1_000)]
    assert sum(1 for r in replies if isinstance(r, Drop) and r.reply) == 20
    late = p.check(dm("cousin"))
    assert isinstance(late, Drop) and late.reason == "pairing queue full" and not late.reply

    invite = p.store.create_invite(channel="telegram", note="cousin Ana")
    assert p.check(dm("cousin", f"/start {invite.code}")) is AccessDecision.ALLOW
    assert p.store.is_approved("telegram", "cousin") and p.check(dm("cousin")) is AccessDecision.ALLOW
    # Single use, bound to its channel, and a flood of guesses gets nothing.
    assert isinstance(p.check(dm("bot-1", invite.code)), Drop)
    other = p.store.create_invite(channel="discord")
    assert isinstance(p.check(dm("bot-2", other.code)), Drop), "a discord invite is not valid on telegram"
    anywhere = p.store.create_invite()
    dashed = "-".join(anywhere.code[i:i + 4] for i in range(0, 16, 4)).lower()
    assert p.check(dm("uncle", dashed)) is AccessDecision.ALLOW, "typed with dashes, lower case"

    # The owner sees the flood.
    (st,) = p.store.stats()
    assert st.channel == "telegram" and st.pending == 20 and st.refused >= 980


def test_a_flood_of_account_ids_cannot_keep_a_stranger_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three slots (the old default), ten attacker accounts that write every minute for twelve hours, and
    a stranger who writes every quarter of an hour: the stranger gets a code, and the owner can still
    approve it nine minutes later while the flood goes on."""
    clock = Clock(monkeypatch)
    p = policy(tmp_path, pairing_max_pending=3)
    attackers = [f"sybil-{i}" for i in range(10)]
    stranger_code = None
    got_code_at = None
    for minute in range(12 * 60):
        for a in attackers:
            p.check(dm(a))
        if minute % 15 == 5 and stranger_code is None:
            clock.advance(seconds=30)
            answer = p.check(dm("stranger"))
            clock.advance(seconds=-30)
            if isinstance(answer, Drop) and answer.reply:
                stranger_code = answer.reply.split("pairing code is ")[1][:8]
                got_code_at = minute
        if got_code_at is not None and minute == got_code_at + 9:
            approved = p.store.approve(stranger_code or "")
            assert approved is not None and approved.account_id == "stranger", "pushed out before approval"
            break
        clock.advance(minutes=1)
    assert got_code_at is not None, "the stranger never got a code"
    assert got_code_at <= 2 * 60, f"the stranger waited {got_code_at} minutes"
    assert p.check(dm("stranger")) is AccessDecision.ALLOW


def test_a_code_cannot_be_pushed_out_before_its_protected_time(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(monkeypatch)
    p = policy(tmp_path, pairing_max_pending=2)
    first = p.check(dm("early"))
    assert isinstance(first, Drop) and first.reply
    clock.advance(minutes=9)
    for i in range(500):
        p.check(dm(f"flood-{i}"))
    assert "early" in {r.account_id for r in p.store.pending()}, "pushed out before its 10 minutes"
    clock.advance(minutes=2)
    took = p.check(dm("newcomer"))
    assert isinstance(took, Drop) and took.reply, "after 10 minutes the oldest makes room"
    assert "early" not in {r.account_id for r in p.store.pending()}


def test_one_account_gets_two_codes_a_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(monkeypatch)
    p = policy(tmp_path, pairing_code_ttl_s=600)
    codes = []
    for _ in range(4):
        r = p.check(dm("persistent"))
        if isinstance(r, Drop) and r.reply:
            codes.append(r.reply)
        clock.advance(minutes=11)  # each code has expired before the next try
    assert len(codes) == 2
    refused = p.check(dm("persistent"))
    assert isinstance(refused, Drop) and refused.reason == "pairing code quota used" and not refused.reply
    clock.advance(days=1)
    again = p.check(dm("persistent"))
    assert isinstance(again, Drop) and again.reply


def test_pairing_list_shows_the_pressure_and_invites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    p = policy(tmp_path, pairing_max_pending=3)
    for i in range(50):
        p.check(dm(f"bot-{i}"))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"data_dir: {tmp_path / 'data'}\n")
    assert kith(["-c", str(cfg), "pairing", "invite", "--channel", "telegram", "--note", "Ana"]) == 0
    made = capsys.readouterr().out
    code = made.split("/start ")[1].split()[0]
    assert kith(["-c", str(cfg), "pairing", "list"]) == 0
    out = capsys.readouterr().out
    assert "queue telegram: 3 waiting" in out and "47 turned away" in out
    assert "invite " in out and "(Ana)" in out
    assert kith(["-c", str(cfg), "pairing", "deny", code]) == 0
    assert p.check(dm("ana", f"/start {code}")) != AccessDecision.ALLOW, "a revoked invite is void"
