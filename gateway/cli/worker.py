"""``kith worker``: job workers only, for scale-out. Run any number of them, on this host (they attach
to the daemon's embedded Redis) or on others (with ``bus.url`` pointing at a shared server)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

from gateway.bus import BusError
from gateway.cli.common import load_or_exit
from gateway.config import Config, ConfigError

log = logging.getLogger("kith.worker")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("worker", help="run job workers only (scale-out; any number of processes)")
    p.add_argument("--concurrency", type=int, help="jobs run at once (default: bus.concurrency)")
    p.set_defaults(func=run)


async def work(config: Config, concurrency: int | None) -> None:
    from gateway.app import Gateway

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # A headless gateway (no HTTP, no adapters, no scheduler, attached to the daemon's bus) gives
    # handlers the same services the daemon has: state, memory stores, model providers.
    async with Gateway(config, serve_http=False, supervise=False, mode="worker") as gw:
        bus = gw.bus
        assert bus is not None and gw.memory is not None
        # Without the memory index (the daemon holds the embedded one) the jobs that need it stay the
        # daemon's: their plugins say so when they register them (``needs_index``).
        exclude = [s.name for s in bus.specs.values() if s.needs_index] if gw.memory.detached else []
        workers = asyncio.create_task(bus.run_workers(concurrency, exclude=exclude), name="bus:workers")
        stopper = asyncio.create_task(stop.wait())
        print(
            f"kith worker: {len(bus.specs) - len(exclude)} job types, "
            f"concurrency {concurrency or config.bus.concurrency} (Ctrl-C to stop)",
            flush=True,
        )
        await asyncio.wait([workers, stopper], return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        await bus.stop_workers()  # drains running jobs for up to bus.shutdown_grace_s
        await workers


def run(args: argparse.Namespace) -> int:
    from gateway.logs import setup_logging

    config = load_or_exit(args)
    setup_logging(config)
    try:
        asyncio.run(work(config, args.concurrency))
    except (BusError, ConfigError) as exc:
        print(f"kith worker: {exc}")
        return 1
    return 0
