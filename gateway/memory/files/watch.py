"""Hand edits are live: a file watcher over every memory root that queues re-indexing.

``MemoryWatcher(data_dir, enqueue)`` watches ``users/``, ``channels/`` and ``personas/`` under the data
directory (recursively: a root created later is covered) with ``watchfiles`` (inotify), debounced to
``debounce_ms``, and for each changed or deleted indexable file calls ``enqueue(scope, rel)``: the same
sink guarded writes report to, which queues a ``memory.index`` job on the bus. The watcher never
indexes itself; the job re-chunks the file (a deleted file's points are purged).

This process's own guarded writes are already reported by the store, so the watcher skips them
instead of queueing each twice (a session log appended every half second would otherwise double the
index jobs): the store's report passes through ``note_write``, which keeps the content hash it wrote,
and a change whose file still has that hash is skipped. Writes of other processes (``kith distill``,
a ``kith worker``) are not skipped: those processes have no index to re-index with. Dot-names (the
store's audit, locks, temp files, ``.index/``) and files the indexer does not read are ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from watchfiles import Change, awatch

from gateway.memory.files.scopes import KINDS, ScopeError, root_for
from gateway.memory.search.indexer import indexable

log = logging.getLogger("kith.memory.watch")

Enqueue = Callable[[str, str], None]
_MAX_OWN = 20_000  # files whose last own write is remembered (oldest forgotten first)
_SCOPE_OF = {folder: kind for kind, folder in KINDS.items()}


def scope_and_rel(data_dir: Path, path: str) -> tuple[str, str] | None:
    """``<data_dir>/users/u1/people/x.md`` -> ("user:u1", "people/x.md"); None for anything else."""
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
    return (scope, rel) if indexable(rel) else None


def content_sha(data_dir: Path, scope: str, rel: str) -> str | None:
    """The file's content hash ("" when it does not exist, None when it cannot be read)."""
    try:
        return hashlib.sha256((root_for(data_dir, scope) / rel).read_bytes()).hexdigest()
    except FileNotFoundError:
        return ""
    except (OSError, ScopeError):
        return None


class MemoryWatcher:
    def __init__(self, data_dir: Path, enqueue: Enqueue, *, debounce_ms: int = 200) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.enqueue = enqueue
        self.debounce_ms = debounce_ms
        self.queued = 0  # files handed to ``enqueue`` (tests and stats)
        self.skipped_own = 0  # changes that were this process's own writes
        self._own: dict[tuple[str, str], str] = {}  # (scope, rel) -> hash this process last wrote
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

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

    async def start(self) -> None:
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
            log.exception("memory: the file watcher stopped; hand edits are indexed at the next start")
        finally:
            self._ready.set()

    def _wanted(self, change: Change, path: str) -> bool:
        return scope_and_rel(self.data_dir, path) is not None or (change == Change.added and self._is_dir(path))

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
            out += [sr for n in names if (sr := scope_and_rel(self.data_dir, os.path.join(top, n))) is not None]
        return out

    async def _handle(self, changes: set[tuple[Change, str]]) -> None:
        files = {sr for _, path in changes if (sr := scope_and_rel(self.data_dir, path)) is not None}
        for change, path in changes:
            if change == Change.added and self._is_dir(path):
                files.update(await asyncio.to_thread(self._files_below, path))
        for scope, rel in sorted(files):
            if await asyncio.to_thread(self.is_own, scope, rel):
                self.skipped_own += 1
                continue
            log.debug("memory: %s %s changed on disk; re-indexing", scope, rel)
            self.queued += 1
            try:
                self.enqueue(scope, rel)
            except Exception:
                log.exception("memory: queueing re-indexing of %s %s failed", scope, rel)
