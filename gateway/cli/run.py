"""``kith run``: the daemon. Stops cleanly on SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import signal

from gateway.cli.common import load_or_exit
from gateway.config import Config
from gateway.logs import setup_logging


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("run", help="run the gateway daemon")
    p.add_argument("--host", help="override server.host")
    p.add_argument("--port", type=int, help="override server.port")
    p.set_defaults(func=run)


async def serve(config: Config) -> None:
    from gateway.app import Gateway

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with Gateway(config) as gw:
        print(f"kith is running: web chat at http://{config.server.host}:{gw.port}/  (Ctrl-C to stop)",
              flush=True)
        await stop.wait()


def run(args: argparse.Namespace) -> int:
    config = load_or_exit(args)
    updates = {}
    if args.host:
        updates["host"] = args.host
    if args.port is not None:
        updates["port"] = args.port
    if updates:
        server = config.server.model_copy(update=updates)
        if not server.is_loopback() and server.token is None:
            print(f"refusing to serve on {server.host} without server.token (set KITH__SERVER__TOKEN)")
            return 2
        config = config.model_copy(update={"server": server})
    setup_logging(config)
    asyncio.run(serve(config))
    return 0

