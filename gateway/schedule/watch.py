"""Hand edits of ``REMINDERS.md``, ``CRONS.json`` and ``TASKS.json`` are scheduled as they are saved.

The schedule subscribes to the gateway's one file watcher (``gateway.memory.files.watch``, which also
feeds re-indexing) for these three names in a person's root. This process's own writes
(``engine._write``, the recorder) are skipped by content, so a sync that gives a hand-added line its
id does not trigger itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from gateway.memory.files.scopes import root_for
from gateway.memory.files.watch import MemoryWatcher
from gateway.schedule.items import FILES

log = logging.getLogger("kith.schedule.watch")
OnEdit = Callable[[str, tuple[str, ...]], Awaitable[None]]
IsOwn = Callable[[str, str, str], bool]
PREFIX = "user:"


def wants(scope: str, rel: str) -> bool:
    """A schedule file at the top of a person's root."""
    return scope.startswith(PREFIX) and rel in FILES


class ScheduleEdits:
    """The subscriber: reads each changed file, drops this process's own writes, syncs per person."""

    def __init__(self, watcher: MemoryWatcher, on_edit: OnEdit, is_own: IsOwn) -> None:
        self.watcher, self.on_edit, self.is_own = watcher, on_edit, is_own
        self.seen = 0  # edits handed on (tests)
        watcher.subscribe("schedule", wants, self._handle)

    async def wait_ready(self, timeout: float = 5.0) -> bool:
        return await self.watcher.wait_ready(timeout)

    async def _handle(self, files: list[tuple[str, str]]) -> None:
        by_user: dict[str, set[str]] = {}
        for scope, rel in files:
            uid = scope.removeprefix(PREFIX)
            path = root_for(self.watcher.data_dir, scope) / rel
            try:
                text = await asyncio.to_thread(path.read_text, "utf-8")
            except OSError:
                text = ""
            if not self.is_own(uid, rel, text):
                by_user.setdefault(uid, set()).add(rel)
        for uid, rels in sorted(by_user.items()):
            self.seen += 1
            try:
                await self.on_edit(uid, tuple(sorted(rels)))
            except Exception:
                log.exception("schedule: reading the hand edit of %s %s failed", uid, sorted(rels))
