"""The chat page shows a proactive message that came while the tab was closed, marked missed
(``-m browser``; screenshots to ``$KITH_SCREENSHOTS`` or a temporary directory)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.delivery.outbox import deliver
from gateway.testing import GatewayFactory
from gateway.types import ConversationAddress
from tests.bus.conftest import eventually
from tests.web.chat_support import SIZES, T, browser, open_chat  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size", list(SIZES))
async def test_missed_reminder_is_shown_marked_when_the_tab_reopens(
        kith_gateway: GatewayFactory, browser: Any, size: str) -> None:  # noqa: F811  # fmt: skip
    gw = await kith_gateway(server={"port": 0})
    client_id = f"web-missed-{size}"
    chat = await open_chat(browser, gw, size, client_id=client_id)
    uid = gw.identities.lookup("websocket", client_id)
    assert uid is not None
    await chat.page.context.close()  # the tab is closed ...
    adapter: Any = gw.adapters["websocket"]
    for _ in range(200):  # ... and the server has seen it go
        if client_id not in adapter.connections:
            break
        await asyncio.sleep(0.05)
    origin = ConversationAddress(channel="websocket", conversation_id=client_id, user_id=uid)
    await deliver(gw, user_id=uid, text="Reminder: **water the plants**", kind="reminder", origin=origin,
                  delivery_id=f"missed-{size}")  # fmt: skip
    assert gw.state.outbox.get(f"missed-{size}").status == "missed"  # type: ignore[union-attr]
    chat = await open_chat(browser, gw, size, client_id=client_id)
    bubble = chat.page.locator(".msg.missed")
    await bubble.wait_for(timeout=T)
    assert "water the plants" in await bubble.inner_text()
    label = await bubble.evaluate("el => getComputedStyle(el, '::before').content")
    assert "Missed while you were away" in label
    await chat.shot("missed")
    # The page says it acknowledges, so the row is sent only on its ack (docs/protocol.md, acknowledging).
    assert [conn.acks for conn in adapter.connections[client_id]] == [True]
    await eventually(lambda: gw.state.outbox.get(f"missed-{size}").status == "sent", timeout=T / 1000)  # type: ignore[union-attr]
    assert not chat.errors, chat.errors
