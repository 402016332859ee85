"""The Signal adapter against a local signal-cli daemon (tests/fakes/signal_cli.py): the SSE event
stream, JSON-RPC sends, groups with mentions and quotes, attachments both ways, a dropped stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.signal import SignalAdapter
from gateway.media.errors import TooLarge
from gateway.types import ConversationAddress, ConversationKind, Reply
from tests.channels.rig import wait_for
from tests.channels.stub import StubGateway
from tests.fakes.signal_cli import BOT_NUMBER, FakeSignalCli

ADA = "2b3c4d5e-0000-4000-8000-00000000ada0"
ADA_NUMBER = "+4915100000002"
GROUP = "Z3JvdXAtaWQtMTIzNDU2Nzg5MA=="


def _section(fake: FakeSignalCli, **extra: Any) -> dict[str, Any]:
    return {"enabled": True, "daemon_url": fake.base_url, "account": BOT_NUMBER, "send_rate_per_s": 1000,
            "send_burst": 1000, **extra}


@pytest.fixture
async def signal(tmp_path: Path) -> AsyncIterator[tuple[FakeSignalCli, StubGateway, SignalAdapter]]:
    async with FakeSignalCli() as fake, StubGateway.with_channels(tmp_path, signal=_section(fake)) as gw:
        adapter = SignalAdapter(gw)  # type: ignore[arg-type]
        gw.start(adapter)
        await asyncio.wait_for(adapter.ready.wait(), 10)
        yield fake, gw, adapter


async def test_dm_round_trip(signal) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = signal
    ts = await fake.say("hello kith", uuid=ADA, number=ADA_NUMBER, name="Ada")
    (msg,) = await gw.wait_inbound(1)
    assert (msg.channel, msg.account_id, msg.conversation_id, msg.kind) == ("signal", ADA, ADA, ConversationKind.DM)
    assert msg.text == "hello kith" and msg.display_name == "Ada" and msg.message_id == f"{ADA}:{ts}" and msg.mentioned
    (sent,) = await fake.wait_sent(1)
    assert sent == {"account": BOT_NUMBER, "recipient": [ADA], "message": "echo: hello kith"}


async def test_groups_need_a_mention_and_answers_quote(signal) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = signal
    await fake.say("just chatting", uuid=ADA, number=ADA_NUMBER, group=GROUP)
    ts = await fake.say("\ufffc what's up", uuid=ADA, number=ADA_NUMBER, group=GROUP,
                        mentions=[{"name": BOT_NUMBER, "number": BOT_NUMBER, "start": 0, "length": 1}])
    plain, mentioned = await gw.wait_inbound(2)
    assert plain.kind is ConversationKind.GROUP and plain.conversation_id == f"group:{GROUP}" and not plain.mentioned
    assert mentioned.mentioned and mentioned.text == "@kith what's up"
    sent = await fake.wait_sent(2)
    assert sent[1]["groupId"] == GROUP and (sent[1]["quoteTimestamp"], sent[1]["quoteAuthor"]) == (ts, ADA_NUMBER)
    await fake.say("@kith by name", uuid=ADA, group=GROUP)
    assert (await gw.wait_inbound(3))[2].mentioned


async def test_receipts_and_own_messages_are_not_turns(signal) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = signal
    await fake.push({"source": ADA, "sourceUuid": ADA, "timestamp": 1, "receiptMessage": {"isDelivery": True}})
    await fake.push({"source": BOT_NUMBER, "sourceNumber": BOT_NUMBER, "timestamp": 2,
                     "dataMessage": {"timestamp": 2, "message": "mine"}})
    await fake.push({"source": ADA, "sourceUuid": ADA, "dataMessage": {"message": "no timestamp"}})
    await fake.keepalive()
    await fake.say("real", uuid=ADA)
    (msg,) = await gw.wait_inbound(1)
    assert msg.text == "real" and _adapter.stats["refused"] == 1


async def test_attachments_in_and_out(signal) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = signal
    photo = b"\xff\xd8\xff" + bytes(range(200))
    item = fake.add_file(photo, filename="cat.jpg", content_type="image/jpeg")
    await fake.say("", uuid=ADA, attachments=[item])
    (msg,) = await gw.wait_inbound(1)
    (att,) = msg.attachments
    assert (att.kind, att.name, att.size, att.mime_type) == ("photo", "cat.jpg", len(photo), "image/jpeg")
    assert await adapter.fetch_attachment(att, max_bytes=1 << 20) == photo
    assert fake.fetched[-1]["recipient"] == ADA
    with pytest.raises(TooLarge):
        await adapter.fetch_attachment(att, max_bytes=10)
    assert len(fake.fetched) == 1
    await fake.wait_sent(1)
    await adapter.send_file(ConversationAddress(channel="signal", conversation_id=ADA), name="chart.png",
                            mime_type="image/png", data=b"\x89PNG")
    (head, data), = fake.sent[-1]["decoded"]
    assert head == "data:image/png;filename=chart.png;base64" and data == b"\x89PNG"


async def test_proactive_send_to_a_group_and_a_dropped_stream_ends_run(tmp_path: Path) -> None:
    async with FakeSignalCli() as fake, StubGateway.with_channels(tmp_path, signal=_section(fake)) as gw:
        adapter = SignalAdapter(gw)  # type: ignore[arg-type]
        task = gw.start(adapter)
        await asyncio.wait_for(adapter.ready.wait(), 10)
        await adapter.send(ConversationAddress(channel="signal", conversation_id=f"group:{GROUP}"),
                           Reply(text="reminder"))
        assert fake.sent[-1] == {"account": BOT_NUMBER, "groupId": GROUP, "message": "reminder"}
        fake.drop()  # the daemon restarts: run() ends with an error, for the supervisor to restart it
        with pytest.raises(ConnectionError, match="closed the event stream"):
            await asyncio.wait_for(task, 10)
        await wait_for(lambda: not adapter.ready.is_set(), what="not ready after the drop")
