"""Guessing link codes: the lockout must not reset when the guesser changes account id.

Before issue 12 the limit was five wrong codes per (channel, account id) per ten minutes, so a client
that used a fresh account id for every guess was never limited (about 2,100 guesses/s through the
pipeline). Now wrong codes also count against one overall budget per window
(``gateway.identity.linking.MAX_LINK_FAILURES_OVERALL``): after it, no code is even looked up until the window
has passed, whoever sends it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import gateway.identity.linking as linking
from gateway.types import InboundMessage
from tests.conftest import GatewayFactory


def msg(account: str, text: str) -> InboundMessage:
    return InboundMessage(channel="websocket", account_id=account, conversation_id=account, text=text, trusted=True)


async def test_rotating_account_ids_hits_the_overall_budget(make_gateway: GatewayFactory,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    gw = await make_gateway()
    owner = await gw.handle_inbound(msg("owner", "/link"))
    assert owner is not None
    live_code = owner.text.split("link code is ")[1][:8]

    evaluated = paused = 0
    for i in range(1_000):
        reply = await gw.handle_inbound(msg(f"guesser-{i}", "/link ZZZZZZZZ"))
        assert reply is not None
        if "unknown or expired" in reply.text:
            evaluated += 1
        elif "Linking is paused" in reply.text:
            paused += 1
    assert evaluated == linking.MAX_LINK_FAILURES_OVERALL
    assert paused == 1_000 - linking.MAX_LINK_FAILURES_OVERALL

    # While paused even the right code is not looked up: a lucky guess in this window is worth nothing.
    lucky = await gw.handle_inbound(msg("guesser-lucky", f"/link {live_code}"))
    assert lucky is not None and "Linking is paused" in lucky.text
    assert gw.identities.links.get(live_code) is not None and gw.identities.links.get(live_code).redeemer is None  # type: ignore[union-attr]

    # The budget is a sliding window: once it has passed, codes are looked up again.
    later = datetime.now(UTC) + linking.FAILURE_WINDOW + timedelta(seconds=1)
    monkeypatch.setattr(linking, "_now", lambda: later)
    again = await gw.handle_inbound(msg("guesser-after", "/link ZZZZZZZZ"))
    assert again is not None and "unknown or expired" in again.text


def test_limiter_memory_is_bounded() -> None:
    """Recording a failure per fresh account id must not grow without bound."""
    limiter = linking.GuessLimiter(per_account=5, overall=30, window=timedelta(minutes=10))
    now = datetime.now(UTC)
    refused = 0
    for i in range(100_000):
        key = ("discord", str(i))
        try:
            limiter.check(key, now)
        except linking.LinkError:
            refused += 1
            continue
        limiter.failed(key, now)
    assert refused == 100_000 - 30
    assert len(limiter._by_account) <= 30 and len(limiter._all) == 30


def test_per_account_limit_still_applies() -> None:
    limiter = linking.GuessLimiter(per_account=5, overall=30, window=timedelta(minutes=10))
    now = datetime.now(UTC)
    for _ in range(5):
        limiter.check(("telegram", "9"), now)
        limiter.failed(("telegram", "9"), now)
    with pytest.raises(linking.LinkError, match="Too many wrong link codes"):
        limiter.check(("telegram", "9"), now)
    limiter.check(("telegram", "10"), now)  # another account still has its allowance
