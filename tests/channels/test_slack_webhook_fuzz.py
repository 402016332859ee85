"""The Slack Events API under mutation: forged, stale and replayed requests are refused, none reaches
the host. Every request carries an event that *would* be a turn for an allowed sender if accepted.

The default suite sends 1,000 mutations and 100 replays; ``-m fuzz`` sends 10,000 and 1,000.
(Matrix has no inbound webhook: the bot syncs with its own token, so there is nothing to forge.)
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import random
import string
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

pytest.importorskip("slack_sdk")

from adapters.slack import SlackAdapter
from tests.channels.stub import StubGateway
from tests.fakes.slack_api import FakeSlack, sign

SECRET = "9f742231b10e8888abcd99yyyzzz85a5"
HEX = "0123456789abcdef"


def _flip(value: str, rng: random.Random, alphabet: str) -> str:
    i = rng.randrange(len(value))
    return value[:i] + rng.choice([c for c in alphabet if c != value[i]]) + value[i + 1 :]


def mutations(body: bytes, count: int, seed: int = 3) -> Iterator[tuple[bytes, dict[str, str]]]:
    """``count`` (body, headers) pairs, none of which is validly signed for its body and time."""
    rng = random.Random(seed)
    for i in range(count):
        stamp = str(int(time.time()))
        good = sign(SECRET, stamp, body)
        payload, sig = body, good
        kind = i % 12
        if kind == 0:
            sig = "v0=" + _flip(good[3:], rng, HEX)
        elif kind == 1:
            sig = "v0=" + good[3:].upper()
        elif kind == 2:
            sig = good[: rng.randrange(0, len(good))]
        elif kind == 3:
            sig = good + rng.choice(HEX)
        elif kind == 4:
            sig = sign("not-the-secret", stamp, body)
        elif kind == 5:
            sig = "v1=" + good[3:]  # another scheme's prefix on the right MAC
        elif kind == 6:
            j = rng.randrange(len(body))
            payload = body[:j] + bytes([body[j] ^ (1 << rng.randrange(8))]) + body[j + 1 :]
        elif kind == 7:
            stamp = str(int(stamp) - 301 - rng.randrange(10**6))  # signed, but outside the window
            sig = sign(SECRET, stamp, body)
        elif kind == 8:
            stamp = str(int(stamp) + 301 + rng.randrange(10**6))  # from the future
            sig = sign(SECRET, stamp, body)
        elif kind == 9:
            sig = "v0=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()  # "v0:ts:" left out
        elif kind == 10:
            # (Not " " + stamp: HTTP trims a header value's spaces, so that one is the genuine stamp.)
            letters = "".join(rng.choices(string.ascii_letters, k=10))
            stamp = rng.choice(["", "-1", "1e9", "+" + stamp, "0" + stamp, stamp + ".0", letters])
        else:
            sig = ""
        yield payload, {"Content-Type": "application/json", "X-Slack-Request-Timestamp": stamp,
                        "X-Slack-Signature": sig}  # fmt: skip


@pytest.fixture
async def hook(tmp_path: Path) -> AsyncIterator[tuple[FakeSlack, StubGateway, SlackAdapter, str]]:
    async with FakeSlack(bot_token="xoxb-f", app_token="xapp-f") as fake, StubGateway.with_channels(tmp_path, slack={
            "enabled": True, "mode": "events", "bot_token": "xoxb-f", "signing_secret": SECRET,
            "api_base": fake.api_base}) as gw:  # fmt: skip
        adapter = SlackAdapter(gw)  # type: ignore[arg-type]
        client = await gw.mount(adapter)
        gw.start(adapter)
        yield fake, gw, adapter, str(client.make_url("/slack/events"))


async def _fire(count: int, replays: int, hook: tuple[FakeSlack, StubGateway, SlackAdapter, str]) -> None:
    fake, gw, adapter, url = hook
    body = json.dumps(fake.message(user="UADA", channel="DADA", text="let me in")).encode()
    statuses: dict[int, int] = {}
    async with aiohttp.ClientSession() as http:
        for payload, headers in mutations(body, count):
            async with http.post(url, data=payload, headers=headers) as resp:
                statuses[resp.status] = statuses.get(resp.status, 0) + 1
        assert statuses == {401: count}
        assert gw.inbound == [] and adapter.stats["webhook_rejected"] == count
        # One genuine request, then the very same bytes and headers again and again.
        stamp = str(int(time.time()))
        genuine = {"Content-Type": "application/json", "X-Slack-Request-Timestamp": stamp,
                   "X-Slack-Signature": sign(SECRET, stamp, body)}  # fmt: skip
        answers = []
        for _ in range(replays + 1):
            async with http.post(url, data=body, headers=genuine) as resp:
                answers.append(resp.status)
    assert answers == [200] + [409] * replays
    (msg,) = await gw.wait_inbound(1)
    assert msg.text == "let me in" and adapter.stats["webhook_replayed"] == replays


async def test_a_thousand_mutations_and_a_hundred_replays(hook, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.ERROR)  # a warning per refusal is expected
    await _fire(1_000, 100, hook)


@pytest.mark.fuzz
async def test_ten_thousand_mutations_and_a_thousand_replays(hook, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.ERROR)
    await _fire(10_000, 1_000, hook)
