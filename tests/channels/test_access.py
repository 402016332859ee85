"""The access policy engine on its own: policies, group gating, the pairing queue's limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.configread import parse_config
from gateway.turn.admission import AccessPolicy, AccessStore, normalize_code
from gateway.types import AccessDecision, ConversationKind, Drop, InboundMessage


def policy(tmp_path: Path, **telegram: object) -> AccessPolicy:
    cfg = parse_config({"data_dir": str(tmp_path), "channels": {"telegram": telegram}}, env={})
    return AccessPolicy(cfg, AccessStore.for_config(cfg))


def dm(account: str, channel: str = "telegram") -> InboundMessage:
    return InboundMessage(channel=channel, account_id=account, text="hi", conversation_id=account)


def group(conversation: str, *, mentioned: bool) -> InboundMessage:
    return InboundMessage(channel="telegram", account_id="9", text="hi", conversation_id=conversation,
                          kind=ConversationKind.GROUP, mentioned=mentioned)


def test_policies(tmp_path: Path) -> None:
    assert policy(tmp_path / "a", dm_policy="open").check(dm("1")) is AccessDecision.ALLOW
    assert isinstance(policy(tmp_path / "b", dm_policy="disabled", allow_from=["1"]).check(dm("1")), Drop)
    allow = policy(tmp_path / "c", dm_policy="allowlist", allow_from=["1"])
    assert allow.check(dm("1")) is AccessDecision.ALLOW
    denied = allow.check(dm("2"))
    assert isinstance(denied, Drop) and not denied.reply  # allowlist never hands out codes
    assert allow.check(dm("1", channel="websocket")) is None  # not a channel this policy governs


def test_groups_need_allowlist_and_mention(tmp_path: Path) -> None:
    p = policy(tmp_path, dm_policy="open", group_allow=["-100"])
    assert p.check(group("-100", mentioned=True)) is AccessDecision.ALLOW
    assert isinstance(p.check(group("-100", mentioned=False)), Drop)
    assert isinstance(p.check(group("-200", mentioned=True)), Drop)
    loose = policy(tmp_path / "x", group_allow=["*"], require_mention=False)
    assert loose.check(group("-300", mentioned=False)) is AccessDecision.ALLOW


def test_pairing_queue_cap_quiet_period_and_approval(tmp_path: Path) -> None:
    p = policy(tmp_path, pairing_max_pending=2, pairing_reply_interval_s=600)
    first = p.check(dm("1"))
    assert isinstance(first, Drop) and "kith pairing approve" in first.reply
    again = p.check(dm("1"))
    assert isinstance(again, Drop) and not again.reply  # answered recently: silence
    assert isinstance(p.check(dm("2")), Drop)
    full = p.check(dm("3"))
    assert isinstance(full, Drop) and full.reason == "pairing queue full" and not full.reply
    (req1, req2) = p.store.pending()
    assert req1.requests == 2 and req1.account_id == "1"
    assert p.store.deny(req2.code) is not None and p.store.deny(req2.code) is None
    approved = p.store.approve(normalize_code(req1.code.lower()))
    assert approved is not None and p.check(dm("1")) is AccessDecision.ALLOW
    assert p.store.revoke("telegram", "1") and isinstance(p.check(dm("1")), Drop)


def test_expired_codes_cannot_be_approved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = policy(tmp_path, pairing_code_ttl_s=60)
    assert isinstance(p.check(dm("1")), Drop)
    (req,) = p.store.pending()
    import gateway.turn.admission as access

    later = datetime.now(UTC) + timedelta(seconds=120)
    monkeypatch.setattr(access, "_now", lambda: later)
    assert p.store.pending() == [] and p.store.approve(req.code) is None
    fresh = p.check(dm("1"))  # the expired request is gone; a new code is issued
    assert isinstance(fresh, Drop) and fresh.reply and req.code not in fresh.reply
