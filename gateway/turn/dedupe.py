"""Persistent dedupe on (channel, platform message id).

A key is claimed in memory when a turn starts, so concurrent redeliveries of one update are dropped
at once, and persisted when the turn completes, in the transaction that stores its reply (never for
Off-The-Record turns, which leave no trace). A redelivery after a restart, or to another node, finds
the persisted key; a key is never persisted without the reply it stands for, or that redelivery would
be dropped as answered with no answer stored.

Keys are kept for ``retention`` (30 days by default), far longer than any platform redelivers an
update (Telegram keeps undelivered updates for 24 hours; webhook senders retry for minutes to hours).
Older keys are pruned from ``persist``: on the first one after start, then at most once per
``prune_every_s``; the oldest keys first, at most ``prune_batch`` per statement, so a table grown
large by an older version never stalls the event loop (the rest goes on the next persists).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from gateway.state import State

RETENTION = timedelta(days=30)
PRUNE_EVERY_S = 3600.0
PRUNE_BATCH = 5000


class Dedupe:
    def __init__(
        self,
        state: State,
        *,
        capacity: int = 100_000,
        retention: timedelta = RETENTION,
        prune_every_s: float = PRUNE_EVERY_S,
        prune_batch: int = PRUNE_BATCH,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.state = state
        self.capacity = capacity
        self.retention = retention
        self.prune_every_s = prune_every_s
        self.prune_batch = prune_batch
        self.clock = clock
        self.pruned = 0
        self._recent: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._next_prune = 0.0  # monotonic; 0 = at the first persist

    def claim(self, channel: str, message_id: str) -> bool:
        """True if this message is new and now claimed by the caller."""
        key = (channel, message_id)
        if key in self._recent or self.state.dedupe.seen(channel, message_id):
            return False
        self._recent[key] = None
        if len(self._recent) > self.capacity:
            self._recent.popitem(last=False)
        return True

    def persist(self, channel: str, message_id: str) -> None:
        """``mark`` the key, then ``prune_if_due``: for a turn that stores nothing else."""
        self.mark(channel, message_id)
        self.prune_if_due()

    def mark(self, channel: str, message_id: str) -> None:
        """Persist the key, and nothing else: inside the transaction that stores the turn's reply, so
        the key never commits without it (gateway/turn.py)."""
        if message_id:
            self.state.dedupe.mark_seen(channel, message_id, self.clock())

    def prune_if_due(self) -> None:
        if time.monotonic() >= self._next_prune:
            self.prune()

    def prune(self) -> int:
        """Delete keys older than the retention window (one batch); how many went."""
        n = self.state.dedupe.prune(self.clock() - self.retention, self.prune_batch)
        self.pruned += n
        # A full batch means more are waiting: the next persist takes the next batch.
        self._next_prune = 0.0 if n >= self.prune_batch else time.monotonic() + self.prune_every_s
        return n
