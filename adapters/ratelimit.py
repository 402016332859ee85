"""Rate limits: outbound pacing that waits, inbound allowances that refuse.

Outbound: each platform publishes a send rate (Telegram ~1 msg/s per chat and 30/s overall, Discord 5
per 5 s per channel, Nextcloud brute-force protection); pacing ourselves keeps chunks of one long reply
in order and avoids most 429s. When one comes anyway, the caller's ``retry_after`` extractor says how
long the platform asked us to wait, and we wait exactly that (capped) before trying the same chunk again.

Inbound (``Allowance``, ``Allowances``): a client over its allowance is told so at once; nothing waits
in a queue on its behalf.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

log = logging.getLogger("kith.adapters.ratelimit")


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up; ``acquire`` waits for one."""

    __slots__ = ("_lock", "_stamp", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        # The lock makes waiters queue in arrival order, which keeps chunks of one reply in order.
        async with self._lock:
            while True:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
                self._stamp = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                await asyncio.sleep((1 - self._tokens) / self.rate)


class RateLimiter:
    """A global bucket and one bucket per key (chat / channel / room), both must grant a send."""

    def __init__(self, *, per_key_rate: float, per_key_burst: int, global_rate: float, global_burst: int):
        self._per_key = (per_key_rate, per_key_burst)
        self._global = TokenBucket(global_rate, global_burst)
        self._buckets: dict[str, TokenBucket] = {}

    async def acquire(self, key: str) -> None:
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) > 10_000:  # bound memory: idle buckets are full anyway
                self._buckets.clear()
            bucket = self._buckets[key] = TokenBucket(*self._per_key)
        await bucket.acquire()
        await self._global.acquire()


class Allowance:
    """A token bucket that answers at once: ``per_minute`` refill, at most ``burst`` saved up."""

    __slots__ = ("capacity", "rate", "tokens", "updated")

    def __init__(self, per_minute: float, burst: int) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(burst)
        self.tokens = float(burst)
        self.updated = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class Allowances:
    """One ``Allowance`` per key (a user, a client address), the least recently used dropped first.

    Keys outlive connections, so reconnecting does not refill anything. The bound keeps memory flat
    under a flood of keys; the key evicted is the one idle longest, whose bucket has refilled anyway
    unless ``max_keys`` others were busier since.
    """

    def __init__(self, per_minute: float, burst: int, *, max_keys: int = 10_000) -> None:
        self.per_minute, self.burst, self.max_keys = per_minute, burst, max_keys
        self._buckets: OrderedDict[str, Allowance] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, key: str) -> bool:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = Allowance(self.per_minute, self.burst)
            if len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
        return bucket.take()


async def with_retry(
    call: Callable[[], Awaitable[T]],
    *,
    retry_after: Callable[[BaseException], float | None],
    what: str,
    attempts: int = 5,
    max_wait_s: float = 60.0,
) -> T:
    """Run ``call``; when ``retry_after(exc)`` returns seconds, wait and retry (up to ``attempts``)."""
    for attempt in range(1, attempts + 1):
        try:
            return await call()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # Cancelled while the call failed (Python 3.11's wait_for can turn the cancel into its
                # TimeoutError): a retry would hold up the stop or restart that asked for it.
                raise asyncio.CancelledError from exc
            wait = retry_after(exc)
            if wait is None or attempt == attempts:
                raise
            wait = min(max(wait, 0.0), max_wait_s)
            log.warning("%s rate limited (attempt %d/%d), retrying in %.2fs", what, attempt, attempts, wait)
            await asyncio.sleep(wait)
    raise AssertionError("unreachable")
