"""What a WebSocket client may do how often (``server.rate_limit``, docs/protocol.md#limits).

Every limit here is keyed by something that outlives a connection (the user, the client's address)
or is global, so reconnecting resets nothing. Each check answers at once: a client over a limit gets
an error frame, never a place in a queue.

* messages: a bucket per user plus one for everyone;
* new users (a ``client_id`` seen for the first time): a bucket per client address plus one for
  everyone, checked before the identity is created;
* turns running at once: a cap; more are answered ``busy``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from adapters.ratelimit import Allowance, Allowances
from gateway.config import RateLimit
from gateway.util.logthrottle import LogThrottle

log = logging.getLogger("kith.adapters.websocket")
LOG_INTERVAL_S = 60.0  # refusals are counted in /healthz; the log gets one line a minute per kind


class WebSocketLimits:
    def __init__(self, cfg: RateLimit) -> None:
        self.per_user = Allowances(cfg.messages_per_minute, cfg.burst)
        self.everyone = Allowance(cfg.global_messages_per_minute, cfg.global_burst)
        self.new_per_address = Allowances(cfg.new_users_per_minute, cfg.new_users_burst)
        self.new_everyone = Allowance(cfg.global_new_users_per_minute, cfg.global_new_users_burst)
        self.max_turns = cfg.max_concurrent_turns
        self.running = 0
        self.refused: Counter[str] = Counter()
        self._log = LogThrottle(log, LOG_INTERVAL_S)

    def message(self, user_id: str) -> str | None:
        """None when ``user_id`` may send a message now, else why not (for the error frame)."""
        if not self.per_user.take(user_id):
            self.refused["messages_user"] += 1
            return "too many messages; slow down"
        if not self.everyone.take():
            self.refused["messages_global"] += 1
            return "the server is receiving too many messages; try again in a minute"
        return None

    def new_user(self, address: str) -> str | None:
        """None when a client at ``address`` may create a user now, else why not."""
        # The address first: one address over its own allowance must not spend everyone's.
        if not self.new_per_address.take(address):
            self._refuse("new_users_address", f"new clients from {address or '-'} refused")
            return "too many new clients from this address; try again later, or reuse your client_id"
        if not self.new_everyone.take():
            self._refuse("new_users_global", "new clients refused (global limit)")
            return "too many new clients right now; try again later, or reuse your client_id"
        return None

    def _refuse(self, kind: str, what: str) -> None:
        self.refused[kind] += 1
        self._log.warn(kind, "websocket: %s (server.rate_limit)", what)

    @contextmanager
    def turn(self) -> Iterator[bool]:
        """A turn slot for the duration of the block; yields False (and holds nothing) when all are taken."""
        if self.running >= self.max_turns:
            self.refused["busy"] += 1
            yield False
            return
        self.running += 1
        try:
            yield True
        finally:
            self.running -= 1

    def health(self) -> dict[str, object]:
        return {"turns_running": self.running, "refused": dict(self.refused)}


HARD_FRAME_FACTOR = 16


def hard_frame_bytes(max_frame_bytes: int) -> int:
    """The size at which a frame closes the connection (1009) instead of being answered ``too_large``:
    the most one frame may make the server read and hold."""
    return max_frame_bytes * HARD_FRAME_FACTOR
