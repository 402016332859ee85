"""A plugin for the delivery chaos test, loaded into a real ``kith run`` (``plugins.modules``).

At startup it reads the plan (``KITH_DELIVERY_PLAN``: JSON ``[{"id", "client", "due"}]``) and, for
every planned delivery the outbox has no row of yet, queues a delayed bus job that calls
``gateway.delivery.outbox.deliver`` when due: what a scheduler re-arming its timers after a restart
does. Everything after that is kith's own: the bus, the outbox, its sweep, routing, the WebSocket
adapter and its missed-message replay.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.delivery.outbox import deliver
from gateway.hookspecs import hookimpl
from gateway.types import ConversationAddress

if TYPE_CHECKING:
    from gateway.app import Gateway
    from gateway.bus import JobContext

JOB = "chaos_delivery"


async def chaos_delivery(ctx: JobContext, payload: dict[str, Any]) -> None:
    gateway: Gateway = ctx.gateway
    client = str(payload["client"])
    uid = gateway.identities.lookup("websocket", client)
    assert uid is not None, client
    origin = ConversationAddress(channel="websocket", conversation_id=client, user_id=uid)
    await deliver(gateway, user_id=uid, text=f"chaos {payload['id']}", kind="reminder", origin=origin,
                  delivery_id=str(payload["id"]))  # fmt: skip


@hookimpl
def gateway_register_jobs(register: Any) -> None:
    register(chaos_delivery, name=JOB, timeout=60, max_tries=20)


def _plan() -> list[dict[str, Any]]:
    raw = os.environ.get("KITH_DELIVERY_PLAN", "")
    if not raw or not Path(raw).is_file():
        return []
    return json.loads(Path(raw).read_text())  # type: ignore[no-any-return]


@hookimpl
async def gateway_startup(gateway: Gateway) -> None:
    if gateway.bus is None:
        return
    now = time.time()
    for item in _plan():
        if gateway.state.outbox.get(item["id"]) is None:
            await gateway.bus.enqueue(JOB, item, job_id=f"chaos-{item['id']}", delay=max(0.0, item["due"] - now))
