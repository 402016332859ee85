"""``kith run``: the daemon. Stops cleanly on SIGINT/SIGTERM.

Start-up problems an operator causes and can fix (the port is taken, another daemon uses the data
directory, ``data_dir`` is a file) end with one ``error: ...`` line on stderr and exit code 2, not a
traceback. A fatal signal (a SIGBUS in a memory-mapped file, a crash in native code) leaves the
Python traceback of every thread on stderr, next to the log, through ``faulthandler``.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import faulthandler
import fcntl
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import IO, NoReturn

from gateway.cli.common import load_or_exit
from gateway.config import Config, ConfigError
from gateway.logs import setup_logging
from gateway.util import heap
from gateway.util.diskspace import MB, DiskFloor, Reserve, reserve_bytes

log = logging.getLogger("kith.run")
LOCK_FILE = "daemon.lock"


class StartupError(Exception):
    """A start-up problem the operator fixes; its message is the one line printed."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("run", help="run the gateway daemon")
    p.add_argument("--host", help="override server.host")
    p.add_argument("--port", type=int, help="override server.port")
    p.set_defaults(func=run)


async def serve(config: Config) -> None:
    from gateway.bus.server import EmbeddedRedis

    if config.bus.url is None and not config.bus.sentinel_master:
        # The embedded job server's process starts now and gets ready while the gateway's modules
        # load (half a second), instead of after them; the job bus takes it over.
        EmbeddedRedis.spawn_early(Path(config.data_dir), appendfsync=config.bus.appendfsync)
    try:
        from gateway.app import Gateway

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        # The model and index load in the background: the first reply does not wait for them.
        async with Gateway(config, background_load=True) as gw:
            print(f"kith is running: web chat at http://{config.server.host}:{gw.port}/  (Ctrl-C to stop)",
                  flush=True)
            await stop.wait()
    finally:
        await EmbeddedRedis.discard_early()  # a start that failed before the job bus took it over


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
    heap.map_large_blocks()  # before the model and the index allocate anything
    faulthandler.enable()  # all threads, to stderr: a SIGBUS or native crash is no longer silent
    try:
        lock = prepare(config)
        try:
            asyncio.run(serve(config))
        finally:
            lock.close()
        _exit_now()
    except StartupError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    except Exception as exc:
        problem = explain(exc, config)
        if problem is None:
            raise
        print(f"error: {problem}", file=sys.stderr, flush=True)
        return 2
    return 0


def _exit_now() -> NoReturn:
    """End the process once the gateway has closed: every store is closed and flushed, the job server
    stopped, the lock released. What is left is the interpreter's own teardown (collecting the
    embedder's and the index's native objects, joining idle pool threads), which took ~0.6 s, more than
    half of a SIGTERM's stop: a service manager restarting kith, or Ctrl-C, waits for none of it."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def prepare(config: Config) -> IO[str]:
    """Checks that fail fast, before anything is opened: the data directory (a directory, not in use
    by another daemon: the returned open file holds its lock) and the port."""
    data = Path(config.data_dir)
    if data.exists() and not data.is_dir():
        raise StartupError(f"data_dir {data} is not a directory (it is a file); point data_dir at a directory")
    try:
        data.mkdir(parents=True, exist_ok=True, mode=0o700)
    except (FileExistsError, NotADirectoryError) as exc:
        raise StartupError(f"data_dir {data} cannot be created: {exc.strerror} ({exc.filename})") from None
    except PermissionError:
        raise StartupError(f"data_dir {data} cannot be created: permission denied") from None
    lock = _lock_data_dir(data, config)
    try:
        _mind_reserve(config, data)
        _check_port(config)
    except BaseException:
        lock.close()
        raise
    return lock


def _lock_data_dir(data: Path, config: Config) -> IO[str]:
    """One node: the whole data directory is this daemon's. A cluster (``cluster.enabled``) shares
    the directory between nodes, so each locks only its own ``<data_dir>/nodes/<node_id>/``."""
    from gateway.cluster.node import node_dir

    if config.cluster.enabled:
        data = node_dir(config)
        data.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = data / LOCK_FILE
    try:
        # O_CREAT on an existing file allocates nothing: this works on a full disk after the first start.
        fh = open(path, "a+")  # noqa: SIM115 - held open (and locked) for the daemon's lifetime
    except PermissionError:
        raise StartupError(f"data_dir {data} is not writable by this user") from None
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        pid = fh.read().strip()
        fh.close()
        who = f" (pid {pid})" if pid.isdigit() else ""
        if config.cluster.enabled:
            raise StartupError(f"node directory {data} is in use by another kith node{who}; give each node"
                               " its own cluster.node_id") from None
        raise StartupError(f"data_dir {data} is in use by another kith daemon{who}; stop it first or use"
                           " another data_dir") from None
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
    except OSError:
        pass  # only informative (who holds the lock); a full disk must not stop the start
    return fh


def _mind_reserve(config: Config, data: Path) -> None:
    """Keep the start-up reserve (``gateway.util.diskspace.Reserve``) while there is room; give it back
    when starting below the floor, so a full disk means a degraded daemon, not a restart loop."""
    floor = DiskFloor(data, config.memory.min_free_mb * MB)
    if not floor.min_free_bytes:
        return
    reserve = Reserve(data, reserve_bytes(floor.min_free_bytes))
    try:
        space = floor.check()
        if not space.low:
            reserve.keep(floor)
            return
        freed = reserve.release()
        if freed:
            log.warning("disk space is low (%s): released the %.0f MB start-up reserve %s to start",
                        space.describe(), freed / MB, reserve.path)
        else:
            log.warning("disk space is low (%s) and the start-up reserve is used up", space.describe())
    except OSError as exc:  # the reserve is a safety margin: never a reason not to start
        log.warning("start-up reserve %s: %s", reserve.path, exc)


def _check_port(config: Config) -> None:
    host, port = config.server.host, config.server.port
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(f"server.host {host!r} cannot be resolved: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind(address)
        except OSError as exc:
            problem = _bind_problem(exc, host, port)
            if problem is None:
                raise
            raise StartupError(problem) from None


def _bind_problem(exc: OSError, host: str, port: int) -> str | None:
    if exc.errno == errno.EADDRINUSE:
        return (f"port {port} on {host} is already in use (another kith daemon or another program);"
                " stop it or choose another server.port")
    if exc.errno == errno.EACCES:
        return f"no permission to listen on port {port} on {host}; choose a server.port above 1023"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"server.host {host} is not an address of this machine"
    return None


def explain(exc: BaseException, config: Config) -> str | None:
    """One line for start-up failures the operator can fix that only show once things are opened
    (the port taken between the check and the bind, the data directory held by another process)."""
    from gateway.bus import ServerError
    from gateway.memory.search.index import IndexBusyError

    if isinstance(exc, OSError) and exc.errno is not None:
        problem = _bind_problem(exc, config.server.host, config.server.port)
        if problem is not None:
            return problem
    if isinstance(exc, IndexBusyError):
        return f"{exc} (is another kith daemon or command using data_dir {config.data_dir}?)"
    if isinstance(exc, ServerError):
        return str(exc).splitlines()[0]
    if isinstance(exc, ConfigError):  # e.g. two plugins registering one adapter name: every problem
        return str(exc)
    return None
