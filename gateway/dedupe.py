"""Persistent dedupe on (channel, platform message id).

A key is claimed in memory when a turn starts, so concurrent redeliveries of one update are dropped
at once, and persisted in SQLite when the turn completes (never for Off-The-Record turns, which
leave no trace). A redelivery after a restart finds the persisted key.
"""

from __future__ import annotations

from collections import OrderedDict

from gateway.state import State


class Dedupe:
    def __init__(self, state: State, *, capacity: int = 100_000) -> None:
        self.state = state
        self.capacity = capacity
        self._recent: OrderedDict[tuple[str, str], None] = OrderedDict()

    def claim(self, channel: str, message_id: str) -> bool:
        """True if this message is new and now claimed by the caller."""
        key = (channel, message_id)
        if key in self._recent or self.state.seen(channel, message_id):
            return False
        self._recent[key] = None
        if len(self._recent) > self.capacity:
            self._recent.popitem(last=False)
        return True

    def persist(self, channel: str, message_id: str) -> None:
        if message_id:
            self.state.mark_seen(channel, message_id)
