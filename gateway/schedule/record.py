"""Recording fired occurrences in the files, batched: one write per person and file, off the event loop.

A fire delivers through the outbox first (its ``delivery_id`` names the occurrence, so the outbox row
is what makes a fire happen once) and then hands a ``Mark`` here. The recorder coalesces the marks
of one person's file made within ``window`` seconds (ten reminders due in the same minute are one
rewrite of ``REMINDERS.md``, not ten), applies them to the file as it is then (hand edits made in
between are kept: the write is conditioned on the content it read and redone when it changed), and
writes in worker threads, at most ``concurrency`` at once: a write syncs to disk twice.

Until a mark is written, ``pending`` answers for it: a job that fires the same occurrence again
(a retried job, or a re-arm from a hand edit made in between) sees it as done. A crash before the
write loses only the ``last=``/``sent=`` record, never the delivery or its uniqueness: the next start
arms the occurrence again, the fire finds its outbox row already sent and sends nothing
(docs/proactive.md, "Delivery guarantees").

These writes are bookkeeping, not something a person said: they are not re-indexed one by one. The
memory watcher is told they are this process's own (so it does not queue them either), and each
file is re-indexed once, ``reindex_after`` seconds (ten minutes) after its first unindexed mark.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from gateway.memory.files.errors import MemoryFileNotFoundError, StaleWriteError
from gateway.memory.files.watch import WATCHER
from gateway.schedule.items import REMINDERS, TASKS, mark_cron_run, mark_task_alerted, set_reminder

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.schedule")

WINDOW_S = 0.05  # how long the first mark of a batch waits for others (one fire's worth of latency)
CONCURRENCY = 4  # file writes in flight at once (each in a worker thread)
# A file's bookkeeping is re-indexed at most this often. Long: a re-index is a bus job that embeds the
# file, and a thousand of them queued in the middle of a busy minute held its fires up (kith bench
# schedule: p99 59 s with 30 s here); the marks it would index are comments and check boxes.
REINDEX_AFTER_S = 600.0
_RETRIES = 5  # conditioned writes redone when the file changed under us


@dataclass(frozen=True, slots=True)
class Mark:
    item_id: str
    occurrence: datetime  # the occurrence delivered (recurring: the next one counts from it)
    at: datetime  # when it was delivered
    one_shot: bool


Key = tuple[str, str]  # (user id, file)


def apply(rel: str, text: str, marks: list[Mark]) -> tuple[str, bool]:
    """``text`` with every mark recorded (``last=``/``sent=``/``alerted``/``last_run``)."""
    changed = False
    for mark in marks:
        if rel == REMINDERS:
            if mark.one_shot:
                text, did = set_reminder(text, mark.item_id, status="sent", last=mark.at)
            else:
                text, did = set_reminder(text, mark.item_id, last=mark.occurrence)
        elif rel == TASKS:
            text, did = mark_task_alerted(text, mark.item_id, mark.at)
        else:
            text, did = mark_cron_run(text, mark.item_id, mark.occurrence)
        changed = changed or did
    return text, changed


class Recorder:
    def __init__(self, gateway: Services, own: dict[Key, str], *, window: float = WINDOW_S,
                 concurrency: int = CONCURRENCY, reindex_after: float = REINDEX_AFTER_S) -> None:  # fmt: skip
        self.gateway, self.own = gateway, own
        self.window, self.reindex_after = window, reindex_after
        self.pending: dict[Key, dict[str, Mark]] = {}  # not yet handed to a write
        self.writing: dict[Key, dict[str, Mark]] = {}  # being written now
        self.writes = 0  # files written (tests, bench)
        self._limit = asyncio.Semaphore(concurrency)
        self._unindexed: dict[Key, float] = {}  # written, not yet re-indexed: first write's monotonic time
        self._wake = asyncio.Event()
        self._hurry = asyncio.Event()  # flush: write the batch without waiting out the window
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    # ----------------------------------------------------------------------------------- marks

    def add(self, uid: str, rel: str, mark: Mark) -> None:
        """Record ``mark`` soon (the file write happens on the recorder's task)."""
        self.pending.setdefault((uid, rel), {})[mark.item_id] = mark
        self._idle.clear()
        if self._closed:  # after shutdown began: no task to hand it to, write it here
            self._write_now((uid, rel))
            return
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="schedule:record")
        self._wake.set()

    def recorded(self, uid: str, rel: str, item_id: str) -> Mark | None:
        """The mark of ``item_id`` that is not in the file yet, if any."""
        key = (uid, rel)
        return self.pending.get(key, {}).get(item_id) or self.writing.get(key, {}).get(item_id)

    async def flush(self) -> None:
        """Until every mark made so far is in its file (tests; shutdown)."""
        while self.pending or self.writing:
            self._wake.set()
            self._hurry.set()
            if self._task is None or self._task.done():
                self._task = asyncio.create_task(self._run(), name="schedule:record")
            await self._idle.wait()
            if self.pending and self._task.done():  # the task failed: do not spin
                break

    async def close(self) -> None:
        """Write what is left and write later marks directly. Files not re-indexed yet are left to
        the next start's ``memory.sync`` (it re-indexes by content hash): no index work at shutdown."""
        await self.flush()
        self._closed = True
        if self._task is not None:
            # The task is told to end, not cancelled: on Python 3.11 ``wait_for`` swallows a
            # cancellation that arrives as the event it waits on is set (flush() sets it), and the
            # task then waited for ever, holding up the gateway's shutdown.
            self._wake.set()
            self._hurry.set()
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout=10)
            except TimeoutError:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    # ------------------------------------------------------------------------------------ task

    async def _run(self) -> None:
        while True:
            timeout = self._next_reindex()
            if not self.pending:
                self._idle.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            self._wake.clear()
            if self._closed:  # close() flushed first; later marks are written directly
                return
            if self.pending:
                with contextlib.suppress(TimeoutError):  # the fires of the same instant join the batch
                    await asyncio.wait_for(self._hurry.wait(), timeout=self.window)
                self._hurry.clear()
                batch, self.pending = self.pending, {}
                self.writing.update(batch)
                await asyncio.gather(*(self._write(key, marks) for key, marks in batch.items()))
                if not self.pending:
                    self._idle.set()
            self._reindex()

    async def _write(self, key: Key, marks: dict[str, Mark]) -> None:
        try:
            async with self._limit:
                await asyncio.to_thread(self._write_file, key, list(marks.values()))
        except Exception:
            log.exception("schedule: could not record %d fired item(s) in %s of %s; retrying", len(marks),
                          key[1], key[0])  # fmt: skip
            for item_id, mark in marks.items():  # back in line, unless a newer mark took its place
                self.pending.setdefault(key, {}).setdefault(item_id, mark)
            await asyncio.sleep(1.0)
        finally:
            if self.writing.get(key) is marks:
                del self.writing[key]

    def _write_now(self, key: Key) -> None:
        marks = self.pending.pop(key, {})
        try:
            self._write_file(key, list(marks.values()))
        except Exception:
            log.exception("schedule: could not record fired item(s) in %s of %s", key[1], key[0])

    def _write_file(self, key: Key, marks: list[Mark]) -> None:
        """Blocking: read, apply, write if unchanged since the read (redone when it changed)."""
        uid, rel = key
        base = self.gateway.memory_store(uid)
        assert self.gateway.memory is not None  # memory_store raised otherwise
        # The person's root, but heard by the schedule alone: bookkeeping is re-indexed later, in one go.
        store = self.gateway.memory.stores.unwatched(base.root, audit_path=base.audit_path,
                                                     on_write=lambda rel, uid=uid: self._written(uid, rel))
        for _ in range(_RETRIES):
            try:
                raw = store.read_bytes(rel)
            except MemoryFileNotFoundError:
                return  # deleted: nothing left to record in
            new, changed = apply(rel, raw.decode("utf-8", errors="replace"), marks)
            if not changed:
                return
            self.own[key] = new
            try:
                store.write_if(rel, new, expected_sha256=hashlib.sha256(raw).hexdigest(), source="job:schedule_due")
            except StaleWriteError:
                continue  # a hand edit or a tool write landed in between: apply to that
            self.writes += 1
            return
        log.warning("schedule: %s of %s kept changing; %d fired item(s) not recorded", rel, uid, len(marks))

    # -------------------------------------------------------------------------------- indexing

    def _written(self, uid: str, rel: str) -> None:
        """The store's report of a bookkeeping write (worker thread): the watcher must not re-index it."""
        watcher = self.gateway.stash.get(WATCHER)
        if watcher is not None:
            watcher.note_write(f"user:{uid}", rel)
        self._unindexed.setdefault((uid, rel), time.monotonic())

    def _next_reindex(self) -> float | None:
        if not self._unindexed:
            return None
        return max(0.0, min(self._unindexed.values()) + self.reindex_after - time.monotonic())

    def _reindex(self) -> None:
        memory = self.gateway.memory
        cutoff = time.monotonic() - self.reindex_after
        due = [k for k, t in list(self._unindexed.items()) if t <= cutoff]
        for key in due:
            self._unindexed.pop(key, None)
            if memory is None or memory.detached:
                continue
            sink: Callable[[str, str], None] = memory.indexing.index_sink or memory.indexing.enqueue_local
            try:
                sink(f"user:{key[0]}", key[1])
            except Exception:
                log.exception("schedule: queueing re-indexing of %s of %s failed", key[1], key[0])
