"""Built-in plugin: re-indexing of hand edits, subscribed to the daemon's file watcher
(``gateway.memory.files.watch``, shared with the schedule).

Started after the index sink exists (``plugins.memory_index`` sets it in its own startup hook; this
one is ``trylast``) and only where index jobs run (the daemon, not ``kith worker`` or read-only CLI
commands). The sink is wrapped so the watcher knows this process's own writes (the store reports
them; the watcher must not queue them twice). A hand-edited file becomes a ``memory.index`` job on the
bus, exactly like a guarded write. ``memory.watch_files: false`` turns it off.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.memory.files.watch import WATCHER, MemoryWatcher, shared

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.memory.watch")


def watcher(gateway: Services) -> MemoryWatcher | None:
    return gateway.stash.get(WATCHER)


@hookimpl(trylast=True)
async def gateway_startup(gateway: Services) -> None:
    memory = gateway.memory
    if memory is None or memory.detached or not gateway.run_jobs or not gateway.config.memory.watch_files:
        return
    inner = memory.indexing.index_sink

    def enqueue(scope: str, rel: str) -> None:
        if inner is not None:
            inner(scope, rel)  # a memory.index job on the bus
        else:
            memory.indexing.enqueue_local(scope, rel)

    w = shared(gateway)
    w.index_with(enqueue)

    def reported(scope: str, rel: str) -> None:
        w.note_write(scope, rel)
        enqueue(scope, rel)

    memory.indexing.index_sink = reported
    await w.start()


@hookimpl
async def gateway_shutdown(gateway: Services) -> None:
    w = watcher(gateway)
    if w is not None:
        await w.stop()
