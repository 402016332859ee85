"""Hand edits of ``REMINDERS.md``, ``CRONS.json`` and ``TASKS.json`` are scheduled as they are saved.

The memory watcher (``gateway.memory.files.watch``) only reports files the index reads (``.md``,
``.txt``), so the schedule has its own small inotify watch (``watchfiles``) over ``users/``, filtered
to these three names, debounced. This process's own writes (``engine._write``) are skipped by
content, so a sync that gives a hand-added line its id does not trigger itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from watchfiles import Change, awatch

from gateway.schedule.items import FILES

log = logging.getLogger("kith.schedule.watch")
OnEdit = Callable[[str, tuple[str, ...]], Awaitable[None]]
IsOwn = Callable[[str, str, str], bool]


def user_file(users_dir: Path, path: str) -> tuple[str, str] | None:
    """``<users>/u1/REMINDERS.md`` -> ("u1", "REMINDERS.md"); None for anything else."""
    try:
        parts = Path(path).relative_to(users_dir).parts
    except ValueError:
        return None
    if len(parts) != 2 or parts[1] not in FILES or parts[0].startswith("."):
        return None
    return parts[0], parts[1]


class ScheduleWatcher:
    def __init__(self, users_dir: Path, on_edit: OnEdit, is_own: IsOwn, *, debounce_ms: int = 200) -> None:
        self.users_dir = Path(users_dir).resolve()
        self.on_edit, self.is_own, self.debounce_ms = on_edit, is_own, debounce_ms
        self.seen = 0  # edits handed on (tests)
        self._stop = asyncio.Event()
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.users_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._task = asyncio.create_task(self._run(), name="schedule:watch")

    async def wait_ready(self, timeout: float = 5.0) -> bool:
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
        try:
            async for changes in awatch(self.users_dir, debounce=self.debounce_ms, step=50, stop_event=self._stop,
                                        watch_filter=self._wanted, recursive=True, yield_on_timeout=True,
                                        rust_timeout=500):
                self._ready.set()
                if changes:
                    await self._handle(changes)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("schedule: the file watcher stopped; hand edits are read at the next start")
        finally:
            self._ready.set()

    def _wanted(self, change: Change, path: str) -> bool:
        return user_file(self.users_dir, path) is not None

    async def _handle(self, changes: set[tuple[Change, str]]) -> None:
        by_user: dict[str, set[str]] = {}
        for _, path in changes:
            found = user_file(self.users_dir, path)
            if found is None:
                continue
            uid, rel = found
            try:
                text = await asyncio.to_thread((self.users_dir / uid / rel).read_text, "utf-8")
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
