"""Hand edits are live: one file watcher over every memory root; its subscribers decide what to do.

``MemoryWatcher(data_dir, enqueue)`` watches ``users/``, ``channels/`` and ``personas/`` under the data
directory (recursively: a root created later is covered) with ``watchfiles`` (inotify), debounced to
``debounce_ms``, and hands each batch of changed files to its subscribers (``subscribe``), each with
its own filter: one inotify watch for the whole tree, however many parts of kith care about edits.

The re-indexing subscriber (``enqueue`` given) calls ``enqueue(scope, rel)`` for each changed or
deleted indexable file: the same sink guarded writes report to, which queues a ``memory.index`` job on
the bus. The watcher never indexes itself; the job re-chunks the file (a deleted file's points are
purged). The schedule subscribes for ``REMINDERS.md``, ``CRONS.json`` and ``TASKS.json``
(``gateway.schedule.watch``).

This process's own guarded writes are already reported by the store, so the re-indexing subscriber
skips them instead of queueing each twice (a session log appended every half second would otherwise
double the index jobs): the store's report passes through ``note_write``, which keeps the content
hash it wrote, and a change whose file still has that hash is skipped. Writes of other processes
(``kith distill``, a ``kith worker``) are not skipped: those processes have no index to re-index
with. Dot-names (the store's audit, locks, temp files, ``.index/``) are never reported.

One watcher per gateway: ``shared(gateway)`` makes it (stashed under ``WATCHER``), the plugins that
need it subscribe and ``start`` it (starting twice is one start).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from watchfiles import Change, awatch

from gateway.memory.files.kinds import indexable
from gateway.memory.files.scopes import KINDS, ScopeError, root_for
from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.memory.watch")

Enqueue = Callable[[str, str], None]
#: A subscriber's filter: (scope, rel) -> whether it wants changes of that file.
Wants = Callable[[str, str], bool]
#: A subscriber: the files it wants that changed in one debounced batch, sorted.
OnChange = Callable[[list[tuple[str, str]]], Awaitable[None]]
_MAX_OWN = 20_000  # files whose last own write is remembered (oldest forgotten first)
_SCOPE_OF = {folder: kind for kind, folder in KINDS.items()}


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    wants: Wants
    on_change: OnChange


def scope_rel(data_dir: Path, path: str) -> tuple[str, str] | None:
    """``<data_dir>/users/u1/people/x.md`` -> ("user:u1", "people/x.md") for any file of a memory root
    (dot-names excluded); None for anything else."""
    try:
        parts = Path(path).relative_to(data_dir).parts
    except ValueError:
        return None
    if len(parts) < 3 or parts[0] not in _SCOPE_OF or any(p.startswith(".") for p in parts[1:]):
        return None
    scope, rel = f"{_SCOPE_OF[parts[0]]}:{parts[1]}", "/".join(parts[2:])
    try:
        root_for(data_dir, scope)
    except ScopeError:
        return None
    return scope, rel


def scope_and_rel(data_dir: Path, path: str) -> tuple[str, str] | None:
    """``scope_rel`` for the files the index reads only."""
    found = scope_rel(data_dir, path)
    return found if found is not None and indexable(found[1]) else None


def content_sha(data_dir: Path, scope: str, rel: str) -> str | None:
    """The file's content hash ("" when it does not exist, None when it cannot be read)."""
    try:
        return hashlib.sha256((root_for(data_dir, scope) / rel).read_bytes()).hexdigest()
    except FileNotFoundError:
        return ""
    except (OSError, ScopeError):
        return None


class MemoryWatcher:
    def __init__(self, data_dir: Path, enqueue: Enqueue | None = None, *, debounce_ms: int = 200) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.debounce_ms = debounce_ms
        self.subscriptions: list[Subscription] = []
        self.enqueue: Enqueue | None = None
        self.queued = 0  # files handed to ``enqueue`` (tests and stats)
        self.skipped_own = 0  # changes that were this process's own writes
        self._own: dict[tuple[str, str], str] = {}  # (scope, rel) -> hash this process last wrote
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        if enqueue is not None:
            self.index_with(enqueue)

    def index_with(self, enqueue: Enqueue) -> None:
        """Subscribe re-indexing: each changed indexable file that is not this process's own write."""
        self.enqueue = enqueue
        self.subscribe("index", lambda scope, rel: indexable(rel), self._reindex)

    def subscribe(self, name: str, wants: Wants, on_change: OnChange) -> None:
        """Hand ``on_change`` the changed files ``wants`` picks (from the next batch on)."""
        self.subscriptions.append(Subscription(name, wants, on_change))

    def note_write(self, scope: str, rel: str) -> None:
        """A guarded write of this process (the store's report; any thread): remember what it wrote."""
        if not indexable(rel):
            return
        sha = content_sha(self.data_dir, scope, rel)
        if sha is None:
            return
        self._own.pop((scope, rel), None)
        self._own[(scope, rel)] = sha  # re-inserted: dict order = recency
        if len(self._own) > _MAX_OWN:
            self._own.pop(next(iter(self._own)), None)

    def is_own(self, scope: str, rel: str) -> bool:
        """Whether the file is as this process last wrote it (blocking: hashes the file)."""
        noted = self._own.get((scope, rel))
        return noted is not None and content_sha(self.data_dir, scope, rel) == noted

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        if self.running:
            return
        for folder in KINDS.values():
            (self.data_dir / folder).mkdir(parents=True, exist_ok=True, mode=0o700)
        self._stop.clear()
        self._task = asyncio.create_task(self._run(), name="memory:watch")

    async def wait_ready(self, timeout: float = 5.0) -> bool:
        """Wait until the inotify watches are in place (the first quiet ``rust_timeout``), so a change
        made after this returns is seen. Start does not wait: the gateway need not be held up."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), timeout=timeout)
        return self._ready.is_set()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        paths = [self.data_dir / folder for folder in KINDS.values()]
        try:
            watch = awatch(*paths, debounce=self.debounce_ms, step=50, stop_event=self._stop,
                           watch_filter=self._wanted, recursive=True, yield_on_timeout=True, rust_timeout=500)
            async for changes in watch:
                self._ready.set()
                if changes:
                    await self._handle(changes)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("memory: the file watcher stopped; hand edits are read at the next start")
        finally:
            self._ready.set()

    def _wants(self, scope: str, rel: str) -> bool:
        return any(s.wants(scope, rel) for s in self.subscriptions)

    def _wanted(self, change: Change, path: str) -> bool:
        found = scope_rel(self.data_dir, path)
        if found is not None and self._wants(*found):
            return True
        return change == Change.added and self._is_dir(path)

    def _is_dir(self, path: str) -> bool:
        try:
            parts = Path(path).relative_to(self.data_dir).parts
        except ValueError:
            return False
        return (len(parts) >= 2 and parts[0] in _SCOPE_OF and not any(p.startswith(".") for p in parts[1:])
                and os.path.isdir(path) and not os.path.islink(path))  # fmt: skip

    def _files_below(self, path: str) -> list[tuple[str, str]]:
        """Files in a directory that appeared (a new root, a ``git pull``): written before inotify
        watched the directory, so no event of their own may ever come."""
        out = []
        for top, dirs, names in os.walk(path):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            out += [sr for n in names if (sr := scope_rel(self.data_dir, os.path.join(top, n))) is not None]
        return out

    async def _handle(self, changes: set[tuple[Change, str]]) -> None:
        files = {sr for _, path in changes if (sr := scope_rel(self.data_dir, path)) is not None}
        for change, path in changes:
            if change == Change.added and self._is_dir(path):
                files.update(await asyncio.to_thread(self._files_below, path))
        for sub in list(self.subscriptions):
            wanted = sorted(f for f in files if sub.wants(*f))
            if not wanted:
                continue
            try:
                await sub.on_change(wanted)
            except Exception:
                log.exception("memory watch: subscriber %s failed on %d file(s)", sub.name, len(wanted))

    async def _reindex(self, files: list[tuple[str, str]]) -> None:
        assert self.enqueue is not None
        for scope, rel in files:
            if await asyncio.to_thread(self.is_own, scope, rel):
                self.skipped_own += 1
                continue
            log.debug("memory: %s %s changed on disk; re-indexing", scope, rel)
            self.queued += 1
            try:
                self.enqueue(scope, rel)
            except Exception:
                log.exception("memory: queueing re-indexing of %s %s failed", scope, rel)


WATCHER: StashKey[MemoryWatcher] = StashKey()


def shared(gateway: Services) -> MemoryWatcher:
    """The gateway's one watcher (made on first use; subscribers then ``start`` it)."""
    w = gateway.stash.get(WATCHER)
    if w is None:
        w = MemoryWatcher(gateway.data_dir)
        gateway.stash[WATCHER] = w
    return w
