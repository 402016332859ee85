"""The outbox end to end on a real gateway: recorded before sending, routed, missed messages on reconnect."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from gateway.adapter import Adapter, AdapterRegistry
from gateway.delivery.outbox import deliver
from gateway.hookspecs import hookimpl
from gateway.state.delivery import DeliveryPrefs
from gateway.testing import GatewayFactory
from gateway.types import ConversationAddress, Reply
from tests.conftest import WSClient


class Recorder(Adapter):
    """A channel that records what it is sent (the outbox's routing is what is under test)."""

    name: ClassVar[str] = "recorder"
    sent: ClassVar[list[tuple[str, str]]] = []
    down: ClassVar[bool] = False

    async def run(self) -> None:
        self.mark_connected()
        await asyncio.Event().wait()

    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        if Recorder.down:
            raise ConnectionError("platform down")
        Recorder.sent.append((address.conversation_id, reply.text))


class RecorderPlugin:
    @hookimpl
    def gateway_register_adapters(self, register: AdapterRegistry) -> None:
        register(Recorder)


def _reset() -> None:
    Recorder.sent = []
    Recorder.down = False


async def test_delivered_to_the_origin_and_recorded(kith_gateway: GatewayFactory) -> None:
    _reset()
    gw = await kith_gateway(plugins=(RecorderPlugin(),))
    origin = ConversationAddress(channel="recorder", conversation_id="c1", user_id="u1")
    gw.state.users.ensure("u1", display_name="U", timezone="UTC")
    await deliver(gw, user_id="u1", text="Reminder: tea", kind="reminder", origin=origin, delivery_id="d1")
    assert Recorder.sent == [("c1", "Reminder: tea")]
    entry = gw.state.outbox.get("d1")
    assert entry is not None and entry.status == "sent" and entry.channel == "recorder" and entry.attempts == 1
    # The same id again (a retried job): nothing is sent twice.
    await deliver(gw, user_id="u1", text="Reminder: tea", kind="reminder", origin=origin, delivery_id="d1")
    assert Recorder.sent == [("c1", "Reminder: tea")]


async def test_web_tab_closed_gets_it_as_missed_on_reconnect(
        kith_gateway: GatewayFactory, ws_connect: Callable[..., Awaitable[WSClient]]) -> None:  # fmt: skip
    _reset()
    gw = await kith_gateway()
    client = await ws_connect(gw)
    ready = await client.hello("tab-1")
    uid = ready["user_id"]
    await client.ws.close()
    origin = ConversationAddress(channel="websocket", conversation_id="tab-1", user_id=uid)
    await deliver(gw, user_id=uid, text="Reminder: stretch", kind="reminder", origin=origin, delivery_id="d2")
    entry = gw.state.outbox.get("d2")
    assert entry is not None and entry.status == "missed"
    again = await ws_connect(gw)
    await again.hello("tab-1")
    frame: dict[str, Any] = await again.recv()
    assert frame["type"] == "reply" and frame["missed"] is True and frame["text"] == "Reminder: stretch"
    assert frame["delivery_id"] == "d2"
    entry = gw.state.outbox.get("d2")
    assert entry is not None and entry.status == "sent" and entry.channel == "websocket"


async def test_preferred_channel_takes_it_when_the_tab_is_closed(
        kith_gateway: GatewayFactory, ws_connect: Callable[..., Awaitable[WSClient]]) -> None:  # fmt: skip
    _reset()
    gw = await kith_gateway(plugins=(RecorderPlugin(),))
    client = await ws_connect(gw)
    uid = (await client.hello("tab-2"))["user_id"]
    await client.ws.close()
    with gw.state.tx():
        gw.state.identities.add("recorder", "r-42", uid, source="test")
    gw.state.outbox.set_prefs(uid, DeliveryPrefs(preferred_channel="recorder"))
    origin = ConversationAddress(channel="websocket", conversation_id="tab-2", user_id=uid)
    await deliver(gw, user_id=uid, text="Reminder: call Sam", kind="reminder", origin=origin, delivery_id="d3")
    assert Recorder.sent == [("r-42", "Reminder: call Sam")]
    entry = gw.state.outbox.get("d3")
    assert entry is not None and entry.status == "sent" and entry.channel == "recorder"


async def test_notices_go_to_the_persons_own_notification_conversation(kith_gateway: GatewayFactory) -> None:
    from gateway.delivery.notices import notify_person
    from gateway.testing import message

    _reset()
    gw = await kith_gateway(plugins=(RecorderPlugin(),))
    await gw.handle_inbound(message("hi", account="ann", channel="recorder"))
    await gw.handle_inbound(message("hi", account="bo", channel="recorder"))
    ann, bo = gw.identities.lookup("recorder", "ann"), gw.identities.lookup("recorder", "bo")
    assert ann and bo
    Recorder.sent.clear()
    # Bo chose no notification conversation: background work does not start talking to him.
    assert await notify_person(gw, bo, "Memory distilled") is False
    gw.state.outbox.set_prefs(ann, DeliveryPrefs(notify_conversation="recorder:ann"))
    assert await notify_person(gw, ann, "Memory distilled: MEMORY_MID.md updated") is True
    assert Recorder.sent == [("ann", "Memory distilled: MEMORY_MID.md updated")]
    assert [e.kind for e in gw.state.outbox.list_for(ann)] == ["notice"] and gw.state.outbox.list_for(bo) == []


async def test_outbox_and_settings_follow_a_merge_and_one_replay_per_missed_message(
        kith_gateway: GatewayFactory) -> None:  # fmt: skip
    from gateway.delivery.missed import replay_missed

    _reset()
    gw = await kith_gateway()
    for uid in ("into", "src"):
        gw.state.users.ensure(uid, display_name=uid, timezone="UTC")
    with gw.state.tx():
        gw.state.identities.add("websocket", "src-tab", "src", source="test")
    from datetime import UTC, datetime, timedelta

    later = datetime.now(UTC) + timedelta(hours=2)  # a quiet window that is not now
    start, end = later.strftime("%H:%M"), (later + timedelta(hours=1)).strftime("%H:%M")
    gw.state.outbox.set_prefs("src", DeliveryPrefs(quiet_start=start, quiet_end=end))
    await deliver(gw, user_id="src", text="waiting", kind="reminder", origin=None, delivery_id="m1")
    assert gw.state.outbox.get("m1").status == "missed"  # type: ignore[union-attr]
    await gw.merge_users(into="into", source="src")
    entry = gw.state.outbox.get("m1")
    assert entry is not None and entry.user_id == "into"
    assert gw.state.outbox.prefs("into").quiet_start == start and gw.state.outbox.prefs("src").quiet_start == ""
    # Two tabs connecting at once: one shows it.
    shown: list[str] = []

    async def tab(frame: dict[str, Any]) -> bool:
        shown.append(frame["delivery_id"])
        return True

    counts = await asyncio.gather(replay_missed(gw, "into", tab), replay_missed(gw, "into", tab))
    assert sorted(counts) == [0, 1] and shown == ["m1"]
    assert gw.state.outbox.get("m1").status == "sent"  # type: ignore[union-attr]
