"""Outbound pacing: a token bucket per conversation plus retries on the platform's 429.

Each platform publishes a send rate (Telegram ~1 msg/s per chat and 30/s overall, Discord 5 per 5 s
per channel, Nextcloud brute-force protection); pacing ourselves keeps chunks of one long reply in
order and avoids most 429s. When one comes anyway, the caller's ``retry_after`` extractor says how long
the platform asked us to wait, and we wait exactly that (capped) before trying the same chunk again.
"""

from __future__ import annotations

import asyncio
import logging
import time
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
            wait = retry_after(exc)
            if wait is None or attempt == attempts:
                raise
            wait = min(max(wait, 0.0), max_wait_s)
            log.warning("%s rate limited (attempt %d/%d), retrying in %.2fs", what, attempt, attempts, wait)
            await asyncio.sleep(wait)
    raise AssertionError("unreachable")
