"""How far the mailbox is handled: a low-water mark over IMAP UIDs.

Mails are handled concurrently and finish out of order, so "the highest UID handled" would skip a
slower one after a restart. The mark is the highest UID below which every mail is handled: a new mail
always gets a higher UID than any before it (RFC 3501), so below the lowest UID still being handled,
every UID that exists is done. The adapter stores the mark; a restart fetches what lies above it.
"""

from __future__ import annotations


class UidMark:
    def __init__(self, done_to: int = 0) -> None:
        self.done_to = done_to  # every UID up to this one is handled
        self._started: set[int] = set()  # handed out, not finished
        self._finished: set[int] = set()  # finished above the mark (out of order)

    def reset(self, done_to: int) -> None:
        self.done_to = done_to
        self._started.clear()
        self._finished.clear()

    def new(self, uids: list[int]) -> list[int]:
        """Of ``uids`` (a search answer), those not handled nor being handled, in order."""
        return sorted(u for u in set(uids) if u > self.done_to and u not in self._started and u not in self._finished)

    def start(self, uid: int) -> None:
        self._started.add(uid)

    def finish(self, uid: int) -> bool:
        """``uid`` is handled; whether the mark moved (and is worth storing)."""
        self._started.discard(uid)
        self._finished.add(uid)
        mark = min(self._started) - 1 if self._started else max(self._finished)
        if mark <= self.done_to:
            return False
        self.done_to = mark
        self._finished = {u for u in self._finished if u > mark}
        return True
