"""Nextcloud Talk adapter against the Talk fake: signing both ways, replays, payload hygiene, chunks."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from adapters.nextcloud_talk import NextcloudTalkAdapter
from gateway.types import ConversationAddress, ConversationKind, Reply
from tests.channels.stub import StubGateway
from tests.fakes.nextcloud import FakeNextcloud

SECRET = "n" * 64
HOOK = "/nextcloud/webhook"


@dataclass
class Rig:
    fake: FakeNextcloud
    adapter: NextcloudTalkAdapter
    gw: StubGateway
    client: TestClient[web.Request, web.Application]


@pytest.fixture
async def rig(tmp_path) -> AsyncIterator[Rig]:  # type: ignore[no-untyped-def]
    async with FakeNextcloud(secret=SECRET, room_types={"dmroom": 1, "team": 2}) as fake, StubGateway.with_channels(
        tmp_path,
        nextcloud={
            "enabled": True,
            "base_url": fake.base_url,
            "bot_secret": SECRET,
            "api_user": "kithbot",
            "api_password": "app-password",
            "send_rate_per_s": 1000,
            "send_burst": 1000,
        },
    ) as gw:
        adapter = NextcloudTalkAdapter(gw)  # type: ignore[arg-type]
        client = await gw.mount(adapter)
        gw.start(adapter)
        yield Rig(fake, adapter, gw, client)


async def test_dm_round_trip_signed_both_ways(rig: Rig) -> None:
    status = await rig.fake.say(rig.client, room="dmroom", user="ada", text="hello there", url=HOOK, name="Ada")
    assert status == 200
    (msg,) = await rig.gw.wait_inbound(1)
    assert msg.channel == "nextcloud" and msg.account_id == "users/ada" and msg.display_name == "Ada"
    assert msg.kind is ConversationKind.DM and msg.conversation_id == "dmroom"
    assert msg.text == "hello there"
    (post,) = await rig.fake.wait_posts(1)
    assert post.room == "dmroom" and post.message == "echo: hello there"
    assert rig.fake.bad_signatures == 0


async def test_group_room_mentions_and_files(rig: Rig) -> None:
    params = {
        "mention-call1": {"type": "bot", "id": "bot-kith", "name": "kith"},
        "file": {"type": "file", "id": "77", "name": "plan.pdf", "mimetype": "application/pdf", "size": 12},
    }
    await rig.fake.say(rig.client, room="team", user="bob", text="{mention-call1} see {file}", url=HOOK,
                       parameters=params, message_id=55)
    (msg,) = await rig.gw.wait_inbound(1)
    assert msg.kind is ConversationKind.GROUP and msg.mentioned
    assert msg.text == "@kith see" and msg.attachments[0].name == "plan.pdf"
    (post,) = await rig.fake.wait_posts(1)
    assert post.reply_to == 55  # in a group the answer quotes the question


async def test_wrong_signature_missing_headers_and_replays(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "kith.adapters.nextcloud")
    body = json.dumps(rig.fake.payload(room="dmroom", user="eve", text="hi", message_id=1)).encode()
    headers = rig.fake.signed_headers(body)
    forged = dict(headers, **{"X-Nextcloud-Talk-Signature": "0" * 64})
    assert await rig.fake.deliver(rig.client, body, forged, HOOK) == 401
    assert await rig.fake.deliver(rig.client, body, {"Content-Type": "application/json"}, HOOK) == 401
    assert await rig.fake.deliver(rig.client, body, headers, HOOK) == 200
    assert await rig.fake.deliver(rig.client, body, headers, HOOK) == 409  # same random
    assert await rig.fake.deliver(rig.client, body, rig.fake.signed_headers(body), HOOK) == 409  # same id
    await rig.gw.wait_inbound(1)
    assert len(rig.gw.inbound) == 1
    assert "wrong signature" in caplog.text and SECRET not in caplog.text


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"[]",
        json.dumps({"type": "Create"}).encode(),
        json.dumps({"type": "Create", "actor": {"id": 5}, "object": {}, "target": {}}).encode(),
        json.dumps({"type": 7}).encode(),
        json.dumps(
            {"type": "Create", "actor": {"type": "Person", "id": "users/a"}, "object": {"id": "1", "content": 3},
             "target": {"id": "r"}}
        ).encode(),
        json.dumps(
            {"type": "Create", "actor": {"type": "Person", "id": "users/a"},
             "object": {"id": "1", "content": json.dumps({"message": ["x"]})}, "target": {"id": "r"}}
        ).encode(),
        b"\xff\xfe",
    ],
)
async def test_bad_payloads_are_rejected_with_a_log_line(
    rig: Rig, payload: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "kith.adapters.nextcloud")
    status = await rig.fake.deliver(rig.client, payload, rig.fake.signed_headers(payload), HOOK)
    assert status == 400
    assert "bad payload" in caplog.text
    assert rig.gw.inbound == []


async def test_one_megabyte_text_is_refused(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "kith.adapters.nextcloud")
    body = json.dumps(rig.fake.payload(room="dmroom", user="ada", text="x" * 1_000_000)).encode()
    assert await rig.fake.deliver(rig.client, body, rig.fake.signed_headers(body), HOOK) == 413
    assert "refused" in caplog.text and rig.gw.inbound == []


async def test_long_reply_is_chunked_in_order_and_429_is_retried(rig: Rig) -> None:
    rig.fake.throttle_next = 2
    text = "\n\n".join(f"paragraph {i} " + "y" * 9000 for i in range(8))
    await rig.adapter.send(ConversationAddress(channel="nextcloud", conversation_id="team"), Reply(text=text))
    assert len(rig.fake.posted) >= 3
    assert all(len(p.message) <= 32000 for p in rig.fake.posted)
    joined = "\n\n".join(p.message for p in rig.fake.posted)
    assert [int(s.split()[0]) for s in joined.split("paragraph ")[1:]] == list(range(8))


async def test_reaction_is_signed_over_the_reaction(rig: Rig) -> None:
    await rig.adapter.react("team", "42", "\U0001f44d")
    assert rig.fake.reactions == [("team", "42", "\U0001f44d")] and rig.fake.bad_signatures == 0
