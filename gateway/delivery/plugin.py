"""Built-in plugin: the daemon's outbox sweep, and the outbox following a merge of two people."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from gateway.delivery.sweep import run_sweeper
from gateway.hookspecs import hookimpl
from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.services import Services

_SWEEPER = StashKey[tuple[asyncio.Event, asyncio.Task[None]]]()


@hookimpl
def gateway_startup(gateway: Services) -> None:
    if not gateway.run_jobs:  # the daemon sweeps; kith worker and read-only commands do not
        return

    def start() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(run_sweeper(gateway, stop), name="delivery:sweep")
        gateway.stash[_SWEEPER] = (stop, task)

    async def stop() -> None:
        held = gateway.stash.pop(_SWEEPER, None)
        if held is not None:
            held[0].set()
            await asyncio.gather(held[1], return_exceptions=True)

    # Several nodes: only the scheduler lease's holder sweeps (gateway/cluster); one node: at once.
    gateway.cluster.on_leader(start, stop)


@hookimpl
async def gateway_shutdown(gateway: Services) -> None:
    held = gateway.stash.pop(_SWEEPER, None)
    if held is None:
        return
    stop, task = held
    stop.set()
    await asyncio.gather(task, return_exceptions=True)


@hookimpl
def gateway_users_merged(gateway: Services, into: str, source: str) -> None:
    gateway.state.outbox.merge(into=into, source=source)
