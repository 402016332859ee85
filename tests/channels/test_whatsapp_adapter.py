"""The WhatsApp adapter against a local Cloud API (tests/fakes/whatsapp_graph.py): the webhook's
verification handshake and signatures, forged and replayed events, text and media both ways, the
24-hour window with its template, rate limits, a refused token."""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.whatsapp import OutsideWindow, WhatsAppAdapter
from gateway.adapter import AdapterAuthError
from gateway.media.errors import TooLarge
from gateway.types import ConversationAddress, ConversationKind, Reply
from tests.channels.stub import StubGateway
from tests.fakes.whatsapp_graph import FakeGraph, sign

TOKEN = "EAAG-kith-test-token"
APP_SECRET = "0123456789abcdef0123456789abcdef"
VERIFY = "kith-verify-token"
ADA = "4915112345678"


def _section(fake: FakeGraph, **extra: Any) -> dict[str, Any]:
    return {"enabled": True, "access_token": TOKEN, "phone_number_id": fake.phone_number_id, "app_secret": APP_SECRET,
            "verify_token": VERIFY, "graph_base": fake.graph_base, "send_rate_per_s": 1000, "send_burst": 1000,
            **extra}


@pytest.fixture
async def wa(tmp_path: Path) -> AsyncIterator[tuple[FakeGraph, StubGateway, WhatsAppAdapter, str]]:
    async with FakeGraph(token=TOKEN) as fake, \
            StubGateway.with_channels(tmp_path, whatsapp=_section(fake, template="kith_update")) as gw:  # fmt: skip
        adapter = WhatsAppAdapter(gw)  # type: ignore[arg-type]
        client = await gw.mount(adapter)
        gw.start(adapter)
        await asyncio.wait_for(adapter.ready.wait(), 10)
        yield fake, gw, adapter, str(client.make_url("/whatsapp/webhook"))


async def test_verification_handshake_needs_the_verify_token(wa) -> None:  # type: ignore[no-untyped-def]
    _fake, _gw, _adapter, url = wa
    async with aiohttp.ClientSession() as http:
        ok = {"hub.mode": "subscribe", "hub.verify_token": VERIFY, "hub.challenge": "1158201444"}
        async with http.get(url, params=ok) as resp:
            assert resp.status == 200 and await resp.text() == "1158201444"
        for bad in ({**ok, "hub.verify_token": "guess"}, {**ok, "hub.mode": "unsubscribe"}, {"hub.challenge": "1"}):
            async with http.get(url, params=bad) as resp:
                assert resp.status == 403


async def test_signed_text_is_a_turn_answered_in_context(wa) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter, url = wa
    message = fake.text(ADA, "hello kith")
    async with aiohttp.ClientSession() as http:
        assert await fake.post(http, url, json.dumps(fake.event(message)).encode(), secret=APP_SECRET) == 200
    (msg,) = await gw.wait_inbound(1)
    assert (msg.channel, msg.account_id, msg.conversation_id, msg.kind) == ("whatsapp", ADA, ADA, ConversationKind.DM)
    assert msg.text == "hello kith" and msg.display_name == "Ada" and msg.message_id == message["id"]
    (sent,) = await fake.wait_sent(1)
    assert sent["to"] == ADA and sent["text"]["body"] == "echo: hello kith"
    assert sent["context"] == {"message_id": message["id"]}


async def test_other_numbers_statuses_and_reactions_are_not_turns(wa) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter, url = wa
    async with aiohttp.ClientSession() as http:
        bodies = [fake.event(fake.text(ADA, "for someone else"), phone_number_id="999"),
                  fake.event({"from": ADA, "id": "wamid.R", "type": "reaction", "reaction": {"emoji": "👍"}}),
                  fake.event(fake.text(ADA, "real"))]  # fmt: skip
        for body in bodies:
            assert await fake.post(http, url, json.dumps(body).encode(), secret=APP_SECRET) == 200
    (msg,) = await gw.wait_inbound(1)
    assert msg.text == "real"


async def test_media_in_and_out(wa) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter, url = wa
    photo = b"\xff\xd8\xff" + bytes(range(256)) * 4
    media_id = fake.add_media(photo, "image/jpeg")
    async with aiohttp.ClientSession() as http:
        body = json.dumps(fake.event(fake.image(ADA, media_id, caption="my cat"))).encode()
        assert await fake.post(http, url, body, secret=APP_SECRET) == 200
    (msg,) = await gw.wait_inbound(1)
    (att,) = msg.attachments
    assert msg.text == "my cat" and (att.kind, att.mime_type, att.platform_id) == ("photo", "image/jpeg", media_id)
    assert await adapter.fetch_attachment(att, max_bytes=1 << 20) == photo
    with pytest.raises(TooLarge):
        await adapter.fetch_attachment(att, max_bytes=10)
    assert fake.downloads == [media_id]
    await fake.wait_sent(1)
    await adapter.send_file(ConversationAddress(channel="whatsapp", conversation_id=ADA), name="plan.pdf",
                            mime_type="application/pdf", data=b"%PDF-1.4 x")
    (upload,) = fake.uploads
    assert upload["filename"] == "plan.pdf" and upload["data"] == b"%PDF-1.4 x"
    assert fake.sent[-1]["type"] == "document" and fake.sent[-1]["document"] == {"id": upload["id"],
                                                                                 "filename": "plan.pdf"}


async def test_outside_the_window_the_template_goes_and_without_one_nothing(tmp_path: Path) -> None:
    async with FakeGraph(token=TOKEN) as fake:
        for template in ("kith_update", ""):
            async with StubGateway.with_channels(tmp_path, whatsapp=_section(fake, template=template)) as gw:
                adapter = WhatsAppAdapter(gw)  # type: ignore[arg-type]
                gw.start(adapter)
                await asyncio.wait_for(adapter.ready.wait(), 10)
                address = ConversationAddress(channel="whatsapp", conversation_id="4917600000000")
                if template:
                    await adapter.send(address, Reply(text="Reminder: call Sam"))
                    sent = fake.sent[-1]
                    assert sent["type"] == "template" and sent["template"]["name"] == "kith_update"
                    assert sent["template"]["components"][0]["parameters"] == [{"type": "text",
                                                                                 "text": "Reminder: call Sam"}]
                else:
                    with pytest.raises(OutsideWindow):  # the outbox moves on to the person's next channel
                        await adapter.send(address, Reply(text="Reminder: call Sam"))
        assert len(fake.sent) == 1


async def test_the_window_survives_a_restart_and_429_is_retried(wa, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fake, _gw, _adapter, url = wa
    async with aiohttp.ClientSession() as http:
        assert await fake.post(http, url, json.dumps(fake.event(fake.text(ADA, "hi"))).encode(),
                               secret=APP_SECRET) == 200  # fmt: skip
    await fake.wait_sent(1)
    async with StubGateway.with_channels(tmp_path, whatsapp=_section(fake)) as gw2:
        again = WhatsAppAdapter(gw2)  # type: ignore[arg-type]
        gw2.start(again)
        await asyncio.wait_for(again.ready.wait(), 10)
        assert again.in_window(ADA) and not again.in_window("4917600000000")
        fake.throttle_next = 1
        await again.send(ConversationAddress(channel="whatsapp", conversation_id=ADA), Reply(text="within 24 h"))
        assert fake.sent[-1]["type"] == "text" and fake.sent[-1]["text"]["body"] == "within 24 h"


async def test_a_refused_token_stops_the_adapter(tmp_path: Path) -> None:
    async with FakeGraph(token=TOKEN) as fake, \
            StubGateway.with_channels(tmp_path, whatsapp=_section(fake, access_token="wrong")) as gw:  # fmt: skip
        with pytest.raises(AdapterAuthError, match="refused the token"):
            await asyncio.wait_for(WhatsAppAdapter(gw).run(), 10)  # type: ignore[arg-type]


def _mutations(body: bytes, count: int, seed: int = 5) -> list[tuple[bytes, str]]:
    rng = random.Random(seed)
    good = sign(APP_SECRET, body)
    hexd = "0123456789abcdef"
    out = []
    for i in range(count):
        payload, sig = body, good
        kind = i % 8
        if kind == 0:
            j = rng.randrange(7, len(good))
            sig = good[:j] + rng.choice([c for c in hexd if c != good[j]]) + good[j + 1 :]
        elif kind == 1:
            sig = "sha256=" + good[7:].upper()
        elif kind == 2:
            sig = good[: rng.randrange(0, len(good))]
        elif kind == 3:
            sig = sign("not-the-secret", body)
        elif kind == 4:
            sig = "sha1=" + good[7:]
        elif kind == 5:
            j = rng.randrange(len(body))
            payload = body[:j] + bytes([body[j] ^ (1 << rng.randrange(8))]) + body[j + 1 :]
        elif kind == 6:
            sig = good + "0"
        else:
            sig = ""
        out.append((payload, sig))
    return out


async def _fire(wa: tuple[FakeGraph, StubGateway, WhatsAppAdapter, str], count: int, replays: int) -> None:
    fake, gw, adapter, url = wa
    body = json.dumps(fake.event(fake.text(ADA, "let me in"))).encode()
    statuses: dict[int, int] = {}
    async with aiohttp.ClientSession() as http:
        for payload, sig in _mutations(body, count):
            status = await fake.post(http, url, payload, secret=APP_SECRET, signature=sig)
            statuses[status] = statuses.get(status, 0) + 1
        assert statuses == {401: count} and gw.inbound == []
        answers = [await fake.post(http, url, body, secret=APP_SECRET) for _ in range(replays + 1)]
    assert answers == [200] + [409] * replays
    (msg,) = await gw.wait_inbound(1)
    assert msg.text == "let me in" and adapter.stats["webhook_rejected"] == count


async def test_a_thousand_forged_events_and_a_hundred_replays(wa, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.ERROR)
    await _fire(wa, 1_000, 100)


@pytest.mark.fuzz
async def test_ten_thousand_forged_events_and_a_thousand_replays(wa, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.ERROR)
    await _fire(wa, 10_000, 1_000)
