"""Accepting connections when the process runs out of file descriptors.

asyncio's own accept loop (``BaseSelectorEventLoop._accept_connection``, CPython 3.11) does not stop
after ``accept()`` fails with EMFILE: it goes on through the whole backlog, and for every one of the
128 attempts logs a traceback and schedules another restart of the accept loop a second later; each
restart finds the listening socket still readable and does it again. With the descriptors used up
that was 13,000 tracebacks a second (110 MB of log in 45 s) while nothing at all was served.

``BackoffSite`` is aiohttp's ``TCPSite`` with its own accept loop: on EMFILE, ENFILE, ENOBUFS or
ENOMEM it stops accepting, retries after a delay that doubles up to ``MAX_PAUSE_S`` and goes back
to ``MIN_PAUSE_S`` as soon as a connection is accepted, and logs one line per ``LOG_INTERVAL_S``
(with how many pauses it saved you from reading). Waiting connections stay in the kernel's backlog
and are served once descriptors are free again.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time
from collections.abc import Callable

from aiohttp import web

log = logging.getLogger("kith.accept")

RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
MIN_PAUSE_S = 0.05
MAX_PAUSE_S = 2.0
LOG_INTERVAL_S = 30.0


class Listener:
    """Listening sockets and their accept loop; ``close()`` stops it (``asyncio.AbstractServer``'s role
    in ``web.BaseSite``: aiohttp only calls ``close()`` and reads ``sockets``)."""

    def __init__(self, sockets: list[socket.socket], factory: Callable[[], asyncio.Protocol], backlog: int) -> None:
        self.sockets = sockets
        self._factory = factory
        self._backlog = backlog
        self._loop = asyncio.get_running_loop()
        self._pause = MIN_PAUSE_S
        self._retries: dict[int, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[object]] = set()
        self._closed = False
        self._logged_at = float("-inf")
        self._unlogged = 0
        for sock in sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _accept(self, sock: socket.socket) -> None:
        for _ in range(self._backlog):  # several connections may wait behind one readiness event
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in RESOURCE_ERRNOS:
                    log.warning("accept() on %s failed: %s", _name(sock), exc)
                    return
                self._back_off(sock, exc)
                return
            self._pause = MIN_PAUSE_S
            conn.setblocking(False)
            task = self._loop.create_task(self._serve(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve(self, conn: socket.socket) -> None:
        try:
            await self._loop.connect_accepted_socket(self._factory, conn)
        except OSError as exc:  # e.g. the client reset the connection before it was set up
            log.debug("connection dropped while being set up: %s", exc)
            conn.close()

    def _back_off(self, sock: socket.socket, exc: OSError) -> None:
        fd = sock.fileno()
        self._loop.remove_reader(fd)
        self._retries[fd] = self._loop.call_later(self._pause, self._resume, sock)
        now = time.monotonic()
        if now - self._logged_at >= LOG_INTERVAL_S:
            extra = f" ({self._unlogged} more pauses since the last message)" if self._unlogged else ""
            log.error("cannot accept connections on %s: %s; pausing accepts (up to %.0f s at a time) until "
                      "descriptors are free again%s", _name(sock), exc.strerror or exc, MAX_PAUSE_S, extra)
            self._logged_at, self._unlogged = now, 0
        else:
            self._unlogged += 1
        self._pause = min(self._pause * 2, MAX_PAUSE_S)

    def _resume(self, sock: socket.socket) -> None:
        self._retries.pop(sock.fileno(), None)
        if not self._closed:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for handle in self._retries.values():
            handle.cancel()
        self._retries.clear()
        for sock in self.sockets:
            self._loop.remove_reader(sock.fileno())
            sock.close()


def _name(sock: socket.socket) -> str:
    try:
        host, port = sock.getsockname()[:2]
    except OSError:
        return "a closed socket"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def listen(host: str | None, port: int, backlog: int) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for every address ``host`` resolves to (as
    ``loop.create_server`` binds them: SO_REUSEADDR, IPv6 sockets IPv6-only)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host or None, port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys((i[0], i[1], i[2], "", i[4]) for i in infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class BackoffSite(web.TCPSite):
    """``web.TCPSite`` whose accept loop backs off when descriptors run out (see the module doc)."""

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site; TCPSite.start would bind through asyncio
        server = self._runner.server
        assert server is not None
        sockets = await listen(self._host, self._port, self._backlog)
        self._server = Listener(sockets, server, self._backlog)  # type: ignore[assignment]
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port
