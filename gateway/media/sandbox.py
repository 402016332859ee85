"""The reader sandbox: every parser of an untrusted file runs in a separate process, under limits.

A 3 KB ``.docx`` can inflate to gigabytes, and a 48 KB one can nest millions of elements that hold
the GIL for seconds (issue 27). Caps inside the parsers (pages, pixels, a running byte count on zip
entries) are the first wall; this is the second, for whatever they miss. A file is read by a worker
process with

* an address-space limit (``RLIMIT_AS``, ``media.read_memory_bytes``): an allocation past it fails,
  the worker reports it and exits;
* a CPU-time limit (``RLIMIT_CPU``, ``media.read_cpu_s``, per file): the kernel stops the worker;
* a wall-clock limit (``media.extract_timeout_s``): the daemon kills the worker (``SIGKILL``).

A stopped worker is replaced; the daemon's event loop only waits on a pipe, and its memory holds
the file's bytes and what was read from them, never the inflated contents. The pool is small
(``media.read_workers``), started on the first attachment (a daemon that never gets a file never
starts one), and its workers are forked from a ``forkserver`` process that preloaded the readers
(Pillow, pypdf), so a replaced worker costs milliseconds, not an interpreter start. Nothing of the
daemon's own memory (keys, sessions) is in a worker: the fork server is a fresh interpreter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import multiprocessing
import resource
import signal
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, TypeVar

from gateway.media.errors import MediaError, Unsupported
from gateway.types import StashKey

if TYPE_CHECKING:
    from multiprocessing.context import ForkServerProcess

    from gateway.services import Services

log = logging.getLogger("kith.media")
T = TypeVar("T")

# Imported once by the fork server; every worker starts with them. "__main__" too: a worker would
# otherwise re-import the daemon's main script by path (the `kith` entry point) on every start; the
# fork server imports it once, as ``__mp_main__``, so its ``if __name__ == "__main__"`` part never runs.
PRELOAD = ("__main__", "gateway.media.reader", "gateway.media.images", "gateway.media.documents", "pypdf")
_REAP_S = 5.0
_START_S = 60.0  # the first worker waits for the fork server to start and import the readers


class LimitExceeded(MediaError):
    """A reader was stopped at a sandbox limit: the file could not be read. ``limit`` is ``memory``,
    ``cpu``, ``time`` or ``crash`` (the worker died some other way); ``reason`` says it for the person
    (``it is too large once unpacked ...``), and the message puts the file's name before it."""

    def __init__(self, label: str, reason: str, *, limit: str) -> None:
        super().__init__(f"{label} could not be read: {reason}")
        self.reason = reason
        self.limit = limit


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLimits:
    memory_bytes: int  # RLIMIT_AS of a worker: its whole address space, interpreter included
    cpu_s: float  # RLIMIT_CPU, counted per file
    wall_s: float  # killed by the daemon past this
    workers: int  # at most this many files are read at once


@dataclass(slots=True)
class SandboxStats:
    """What the sandbox did, for tests, the fuzz run and diagnosis."""

    started: int = 0  # worker processes started
    files: int = 0  # files handed to a worker
    stopped: Counter[str] = field(default_factory=Counter)  # workers stopped at a limit, by limit
    max_rss_bytes: int = 0  # the largest peak resident size a worker reported


# --------------------------------------------------------------------------------------- the worker


def _serve(conn: Connection, memory_bytes: int, cpu_s: float) -> None:  # pragma: no cover (a worker)
    """A worker's life: limits set once, then one file at a time until the pipe closes."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a worker stopped by SIGXCPU leaves no core file
    _lower(resource.RLIMIT_AS, memory_bytes, hard_too=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the daemon's terminal is the daemon's
    conn.send(("ready",))
    while True:
        try:
            fn, args = conn.recv()
        except (EOFError, OSError):
            return
        # RLIMIT_CPU counts the process's whole life: the soft limit moves up by one file's allowance.
        usage = resource.getrusage(resource.RUSAGE_SELF)
        _lower(resource.RLIMIT_CPU, math.ceil(usage.ru_utime + usage.ru_stime + cpu_s))
        try:
            outcome: tuple[Any, ...] = ("ok", fn(*args))
        except MemoryError:
            outcome = ("memory",)
        except MediaError as exc:
            outcome = ("refused", exc)
        except Exception as exc:  # a parser's own bug on a hostile file: reported by its type only
            outcome = ("error", type(exc).__name__)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        try:
            conn.send((*outcome, rss))
        except MemoryError:
            outcome = ("memory",)
            conn.send(("memory", rss))
        if outcome[0] == "memory":
            return  # a heap that hit the limit once is not trusted with the next file


def _lower(kind: int, value: int, *, hard_too: bool = False) -> None:  # pragma: no cover (a worker)
    """Set the soft limit ``kind`` to ``value``, never above a hard limit the daemon was started
    with (systemd's ``LimitAS=``, ``ulimit -H``): asking for more would fail and kill the worker."""
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value if hard_too else hard))


_context_lock = threading.Lock()


def _context() -> multiprocessing.context.ForkServerContext:
    ctx = multiprocessing.get_context("forkserver")
    with _context_lock:
        ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


@dataclass(slots=True, eq=False)  # hashed by identity: the pool keeps a set of busy ones
class _Worker:
    process: ForkServerProcess
    conn: Connection

    @classmethod
    def start(cls, limits: SandboxLimits) -> _Worker:
        """Blocking: the first call starts the fork server (an interpreter that imports the readers)."""
        ctx = _context()
        parent, child = ctx.Pipe(duplex=True)
        process = ctx.Process(target=_serve, args=(child, limits.memory_bytes, limits.cpu_s),
                              name="kith-reader", daemon=True)  # fmt: skip
        process.start()
        child.close()
        worker = cls(process, parent)
        # Wait for its limits to be in place, so a file's time limit never counts a worker's start.
        if not parent.poll(_START_S) or parent.recv() != ("ready",):
            worker.stop()
            raise OSError("a reader process did not start")
        return worker

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
        """Blocking: hand one file over and wait for the answer; EOFError when the worker died."""
        self.conn.send((fn, args))
        answer: tuple[Any, ...] = self.conn.recv()
        return answer

    def stop(self) -> int | None:
        """Blocking: kill the worker (if it still runs) and reap it; its exit code."""
        with contextlib.suppress(OSError):
            self.conn.close()
        if self.process.exitcode is None:
            with contextlib.suppress(OSError):
                self.process.kill()
        self.process.join(_REAP_S)
        return self.process.exitcode

    def stop_soon(self) -> None:
        """Kill now, reap in the background: for a cancelled caller that cannot wait."""
        with contextlib.suppress(OSError, ValueError):
            self.process.kill()
        threading.Thread(target=self.stop, name="kith-reader-reap", daemon=True).start()


# --------------------------------------------------------------------------------------- the pool


class Sandbox:
    def __init__(self, limits: SandboxLimits) -> None:
        self.limits = limits
        self.stats = SandboxStats()
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._slots = asyncio.Semaphore(limits.workers)
        self._closed = False
        # Threads of its own that wait on the workers' pipes: a file may take its whole wall clock,
        # and the loop's default executor serves the database and the memory store meanwhile.
        self._waiters = ThreadPoolExecutor(max_workers=limits.workers + 1, thread_name_prefix="kith-reader-wait")

    async def run(self, fn: Callable[..., T], *args: Any, label: str) -> T:
        """``fn(*args)`` in a worker; its result, or the ``MediaError`` it raised. ``fn`` and its
        arguments must pickle (a module-level function). Past a limit: ``LimitExceeded``; ``label``
        names the file in the message (the person's own file name, never logged here)."""
        if self._closed:
            raise RuntimeError("the reader sandbox is closed")
        async with self._slots:
            worker = await self._worker()
            self._busy.add(worker)
            self.stats.files += 1
            try:
                waiting = asyncio.get_running_loop().run_in_executor(self._waiters, worker.call, fn, args)
                answer = await asyncio.wait_for(waiting, self.limits.wall_s)
            except TimeoutError:
                await asyncio.to_thread(worker.stop)
                raise self._stopped("time", label) from None
            except (EOFError, OSError):
                code = await asyncio.to_thread(worker.stop)
                raise self._stopped(_limit_of(code), label) from None
            except asyncio.CancelledError:
                worker.stop_soon()  # its answer would never be read: the next file gets a fresh worker
                raise
            finally:
                self._busy.discard(worker)
            status, rss = answer[0], answer[-1]
            self.stats.max_rss_bytes = max(self.stats.max_rss_bytes, rss)
            # A worker whose heap grew past half its limit is replaced: its next file would start short.
            keep = status != "memory" and rss <= self.limits.memory_bytes // 2 and not self._closed
            if keep:
                self._idle.append(worker)
            else:
                await asyncio.to_thread(worker.stop)
            if status == "ok":
                result: T = answer[1]
                return result
            if status == "refused":
                raise answer[1]
            if status == "memory":
                raise self._stopped("memory", label)
            log.info("a reader failed on a file: %s", answer[1])
            raise Unsupported(f"{label} could not be read ({answer[1]})")

    def _stopped(self, limit: str, label: str) -> LimitExceeded:
        self.stats.stopped[limit] += 1
        log.warning("a reader process was stopped at its %s limit and replaced", limit)
        return LimitExceeded(label, _LIMIT_TEXT[limit](self.limits), limit=limit)

    async def _worker(self) -> _Worker:
        while self._idle:
            worker = self._idle.pop()
            if worker.process.is_alive():
                return worker
            # Died while idle (the kernel's OOM killer, an operator's kill): not the next file's fault.
            await asyncio.to_thread(worker.stop)
        worker = await asyncio.to_thread(_Worker.start, self.limits)
        self.stats.started += 1
        return worker

    async def close(self) -> None:
        """Stop every worker (busy ones too: their files' turns are ending with the daemon)."""
        self._closed = True
        workers = [*self._idle, *self._busy]
        self._idle.clear()
        for worker in workers:
            await asyncio.to_thread(worker.stop)
        self._waiters.shutdown(wait=False)


def _limit_of(exitcode: int | None) -> str:
    if exitcode == -signal.SIGXCPU:
        return "cpu"
    if exitcode == -signal.SIGKILL:
        return "memory"  # the kernel's OOM killer, or an allocation the runtime could not survive
    return "crash"


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):,.0f} MiB"


_LIMIT_TEXT: dict[str, Callable[[SandboxLimits], str]] = {
    "memory": lambda lim: ("it is too large once unpacked or decoded: reading it needs more than the memory limit "
                           f"for reading one file ({_mib(lim.memory_bytes)})"),
    "cpu": lambda lim: f"it exceeds the CPU-time limit for reading one file ({lim.cpu_s:g} s)",
    "time": lambda lim: f"it took longer than {lim.wall_s:g} second{'' if lim.wall_s == 1 else 's'} to read",
    "crash": lambda lim: "the reader stopped on it (a damaged or hostile file)",
}


# ------------------------------------------------------------------------------------ per gateway

SANDBOX: StashKey[Sandbox] = StashKey()


def sandbox(gateway: Services) -> Sandbox:
    """The gateway's reader sandbox, made on first use (its workers start with the first file).
    Its process limits are read then, from the limits in force; the parsers' own caps (pages, pixels,
    unpacked bytes) travel with each file, so a changed ``LIMITS`` applies to them at once."""
    from gateway.media.limits import media_limits

    box = gateway.stash.get(SANDBOX)
    if box is None:
        media = media_limits(gateway)
        box = gateway.stash.setdefault(SANDBOX, Sandbox(SandboxLimits(
            memory_bytes=media.read_memory_bytes, cpu_s=media.read_cpu_s, wall_s=media.extract_timeout_s,
            workers=media.read_workers)))  # fmt: skip
    return box


async def close_sandbox(gateway: Services) -> None:
    box = gateway.stash.get(SANDBOX)
    if box is not None:
        await box.close()


__all__ = ["LimitExceeded", "Sandbox", "SandboxLimits", "SandboxStats", "close_sandbox", "sandbox"]
