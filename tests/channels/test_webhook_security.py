"""Webhook authentication under mutation, and bad payloads, through the real Gateway's HTTP port.

Every request carries a payload that *would* produce a turn for an allowed sender if accepted, so
"zero accepted" is checked three ways: the HTTP status, the adapter's counters and the turns table.
The default suite sends 10,000 mutations per channel; ``-m fuzz`` sends 100,000 to Nextcloud.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import random
import secrets
import string
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.channels.rig import ADA_NC, ADA_ROOM, ADA_TG, NC_SECRET, TG_WEBHOOK_SECRET, Rig, start_rig, wait_for

TG_HEADER = "X-Telegram-Bot-Api-Secret-Token"


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    rig = await start_rig(tmp_path, telegram={"mode": "webhook", "webhook_secret": TG_WEBHOOK_SECRET})
    yield rig
    await rig.stop()


def _flip(value: str, rng: random.Random, alphabet: str) -> str:
    i = rng.randrange(len(value))
    return value[:i] + rng.choice([c for c in alphabet if c != value[i]]) + value[i + 1 :]


def nextcloud_mutations(body: bytes, count: int, seed: int = 1) -> Iterator[tuple[bytes, dict[str, str]]]:
    """``count`` (body, headers) pairs, none of which carries a valid signature for its body."""
    rng = random.Random(seed)
    hexdigits = "0123456789abcdef"
    for i in range(count):
        rnd = secrets.token_hex(32)
        good = hmac.new(NC_SECRET.encode(), rnd.encode() + body, hashlib.sha256).hexdigest()
        payload, sig, headers = body, good, {"X-Nextcloud-Talk-Random": rnd}
        kind = i % 12
        if kind == 0:
            sig = _flip(good, rng, hexdigits)
        elif kind == 1:
            sig = good.upper()  # same MAC, different spelling: Talk sends lowercase, accept nothing else
        elif kind == 2:
            sig = good[: rng.randrange(0, 64)]
        elif kind == 3:
            sig = good + rng.choice(hexdigits)
        elif kind == 4:
            sig = hmac.new(b"not-the-secret", rnd.encode() + body, hashlib.sha256).hexdigest()
        elif kind == 5:
            headers["X-Nextcloud-Talk-Random"] = _flip(rnd, rng, hexdigits)
        elif kind == 6:
            j = rng.randrange(len(body))
            payload = body[:j] + bytes([body[j] ^ (1 << rng.randrange(8))]) + body[j + 1 :]
        elif kind == 7:
            sig = hmac.new(NC_SECRET.encode(), body, hashlib.sha256).hexdigest()  # random left out
        elif kind == 8:
            sig = hmac.new(NC_SECRET.encode(), body + rnd.encode(), hashlib.sha256).hexdigest()  # wrong order
        elif kind == 9:
            sig = "".join(rng.choice(string.ascii_letters + string.punctuation) for _ in range(64))
        elif kind == 10:
            del headers["X-Nextcloud-Talk-Random"]
        else:
            sig = ""
        if sig:
            headers["X-Nextcloud-Talk-Signature"] = sig
        headers["Content-Type"] = "application/json"
        yield payload, headers


def telegram_mutations(count: int, seed: int = 2) -> Iterator[dict[str, str]]:
    rng = random.Random(seed)
    secret = TG_WEBHOOK_SECRET
    alphabet = string.ascii_letters + string.digits + "_-"
    for i in range(count):
        kind = i % 10
        if kind == 0:
            value = _flip(secret, rng, alphabet)
        elif kind == 1:
            value = secret.swapcase()
        elif kind == 2:
            value = secret[: rng.randrange(0, len(secret))]
        elif kind == 3:
            value = secret + rng.choice(alphabet)
        elif kind == 4:
            value = rng.choice(alphabet) + secret
        elif kind == 5:
            value = "".join(rng.choice(alphabet) for _ in range(len(secret)))
        elif kind == 6:
            value = secret.replace(secret[rng.randrange(len(secret))], "\u00e9", 1)  # latin-1 look-alike
        elif kind == 7:
            value = secret * 2
        elif kind == 8:
            yield {}  # header missing
            continue
        else:
            value = ""
        if value == secret:
            value = secret + "x"
        yield {TG_HEADER: value}


async def _fire_nextcloud(rig: Rig, count: int) -> dict[int, int]:
    body = json.dumps(rig.nc.payload(room=ADA_ROOM, user=ADA_NC, text="let me in")).encode()
    statuses: dict[int, int] = {}
    url = f"{rig.base}/nextcloud/webhook"
    for payload, headers in nextcloud_mutations(body, count):
        async with rig.http.post(url, data=payload, headers=headers) as resp:
            statuses[resp.status] = statuses.get(resp.status, 0) + 1
    return statuses


async def _fire_telegram(rig: Rig, count: int) -> dict[int, int]:
    update = rig.tg.make_update(user_id=ADA_TG, text="let me in")
    body = json.dumps(update).encode()
    statuses: dict[int, int] = {}
    url = f"{rig.base}/telegram/webhook"
    for headers in telegram_mutations(count):
        async with rig.http.post(url, data=body, headers={"Content-Type": "application/json", **headers}) as resp:
            statuses[resp.status] = statuses.get(resp.status, 0) + 1
    return statuses


async def _check_zero_accepted(rig: Rig, nc: dict[int, int], tg: dict[int, int], count: int) -> None:
    assert 200 not in nc and sum(nc.values()) == count, nc
    assert 200 not in tg and sum(tg.values()) == count, tg
    nc_adapter, tg_adapter = rig.gw.adapters["nextcloud"], rig.gw.adapters["telegram"]
    assert nc_adapter.stats["accepted"] == 0  # type: ignore[attr-defined]
    assert nc_adapter.stats["rejected_signature"] == count  # type: ignore[attr-defined]
    assert tg_adapter.stats["webhook_rejected"] == count and tg_adapter.stats["updates"] == 0  # type: ignore[attr-defined]
    assert rig.turns() == 0 and rig.nc.posted == [] and rig.tg.sent == []
    # the real thing still works afterwards
    assert await rig.nc_say("the real one") == 200
    await rig.nc.wait_posts(1)
    # As Telegram does, a 503 ("not started yet": the watchdog may be restarting the adapter after the
    # flood, in which no update was valid) is delivered again a moment later.
    update = rig.tg.make_update(user_id=ADA_TG, text="real")
    deadline = asyncio.get_running_loop().time() + 15
    while True:
        async with rig.http.post(f"{rig.base}/telegram/webhook", json=update,
                                 headers={TG_HEADER: TG_WEBHOOK_SECRET}) as resp:
            status = resp.status
        if status != 503 or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.2)
    assert status == 200
    await rig.tg.wait_sent(1)
    assert rig.turns() == 2


@pytest.mark.long
async def test_ten_thousand_mutations_per_webhook_channel(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)  # 20,000 warning lines are expected; keep the capture small
    count = 10_000  # ~5 s for both channels over loopback, so the full count runs in the default suite
    nc = await _fire_nextcloud(rig, count)
    tg = await _fire_telegram(rig, count)
    await _check_zero_accepted(rig, nc, tg, count)


@pytest.mark.fuzz
async def test_hundred_thousand_mutations_nextcloud(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    nc = await _fire_nextcloud(rig, 100_000)
    assert nc == {401: 100_000}
    assert rig.turns() == 0


# -------------------------------------------------------------------------------------- bad payloads


async def test_bad_payloads_are_rejected_with_a_log_line_never_a_crash(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    nc_bad = [
        b"{", b"null", b"[1,2]", json.dumps({"type": "Create"}).encode(),
        json.dumps({"type": "Create", "actor": "x", "object": {}, "target": {}}).encode(),
        json.dumps({"type": "Create", "actor": {"type": "Person", "id": ["users/ada"]},
                    "object": {"id": "1", "content": "{}"}, "target": {"id": ADA_ROOM}}).encode(),
        json.dumps({"type": "Create", "actor": {"type": "Person", "id": "users/ada"},
                    "object": {"id": True, "content": json.dumps({"message": "x"})},
                    "target": {"id": ADA_ROOM}}).encode(),
        json.dumps(rig.nc.payload(room=ADA_ROOM, user=ADA_NC, text="x" * 1_000_000)).encode(),
    ]
    for body in nc_bad:
        async with rig.http.post(f"{rig.base}/nextcloud/webhook", data=body,
                                 headers=rig.nc.signed_headers(body)) as resp:
            assert resp.status in (400, 413), (resp.status, body[:60])
    tg_hook = f"{rig.base}/telegram/webhook"
    tg_bad: list[bytes] = [
        b"", b"]", b'"update"', b'{"update_id": null}',
        json.dumps({"update_id": 1, "message": {"message_id": "x", "chat": None}}).encode(),
        json.dumps({"update_id": 2, "message": {"message_id": 1, "date": 0, "chat": {"id": 5, "type": "private"},
                                                 "from": {"id": 5, "is_bot": False, "first_name": "A"},
                                                 "text": "x" * 1_000_000}}).encode(),
    ]
    for body in tg_bad:
        async with rig.http.post(tg_hook, data=body, headers={TG_HEADER: TG_WEBHOOK_SECRET}) as resp:
            assert resp.status == 400, (resp.status, body[:60])
    # wrong types that still parse as an Update reach the adapter and are refused there
    odd = rig.tg.make_update(user_id=ADA_TG, text=None)
    odd["message"]["text"] = 12345
    async with rig.http.post(tg_hook, json=odd, headers={TG_HEADER: TG_WEBHOOK_SECRET}) as resp:
        assert resp.status == 200
    # Discord: malformed gateway events and oversized content
    await rig.dc.dispatch("MESSAGE_CREATE", {"id": "1", "channel_id": "2"})  # no author, no content
    await rig.dc.dispatch("MESSAGE_CREATE", {**rig.dc.message(user_id=2001, content="y"), "author": "nobody"})
    await rig.dc.dispatch("MESSAGE_CREATE", rig.dc.message(user_id=2001, content="z" * 1_000_000))
    await wait_for(lambda: "malformed MESSAGE_CREATE" in caplog.text and "over the platform limit" in caplog.text,
                   what="discord log lines")
    assert "bad payload" in caplog.text and "payload refused" in caplog.text
    assert rig.turns() == 0
    # and everything still serves
    await rig.dc_say("still fine?")
    assert await rig.nc_say("still fine?") == 200
    await rig.dc.wait_created(1)
    await rig.nc.wait_posts(1)
    health = rig.gw.supervisor.health()
    assert {health[n]["state"] for n in ("telegram", "discord", "nextcloud")} == {"running"}
    assert health["discord"]["restarts"] == 0
