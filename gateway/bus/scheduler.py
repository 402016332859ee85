"""Cron scheduler: per user, in that user's timezone; any number of schedulers may run.

Every (job, user) has a "last fired slot" in Redis (``<p>:cron``). Firing is one compare-and-set
script that also enqueues, so two daemons on one Redis never fire a slot twice, and a crash between
deciding and enqueueing cannot lose the slot. After downtime only the latest missed slot is due, so
it runs once, never once per missed slot. A (job, user) seen for the first time records the
current slot without firing: a new user or a newly installed job starts with the next slot.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.bus.clock import Clock, SystemClock
from gateway.bus.cronslots import fire_instant, latest_due, slot_key
from gateway.bus.envelope import ENVELOPE_VERSION, encode_payload
from gateway.bus.keys import Keys
from gateway.bus.registry import JobSpec
from gateway.bus.scripts import Scripts

log = logging.getLogger("kith.bus.scheduler")
UsersProvider = Callable[[], Awaitable[Iterable[tuple[str, str]]] | Iterable[tuple[str, str]]]
_BATCH = 500


class Scheduler:
    def __init__(
        self,
        redis: Redis,
        scripts: Scripts,
        keys: Keys,
        specs: Sequence[JobSpec],
        *,
        users_provider: UsersProvider | None = None,
        default_tz: str = "UTC",
        clock: Clock | None = None,
    ) -> None:
        self.redis, self.scripts, self.keys = redis, scripts, keys
        self.specs = [s for s in specs if s.cron]
        self.users_provider = users_provider
        self.default_tz = default_tz
        self.clock: Clock = clock or SystemClock()
        self._known: dict[str, str] = {}  # field -> a slot known to be recorded (skips round trips)
        self._bad_tz: set[str] = set()
        self.stopping = asyncio.Event()

    async def _users_by_tz(self) -> dict[str, list[str]]:
        if self.users_provider is None:
            return {}
        result = self.users_provider()
        users = await result if inspect.isawaitable(result) else result
        groups: dict[str, list[str]] = defaultdict(list)
        for user_id, tz in users:
            groups[self._zone_name(tz)].append(user_id)
        return groups

    def _zone_name(self, tz: str) -> str:
        try:
            ZoneInfo(tz)
            return tz
        except (ZoneInfoNotFoundError, ValueError):
            if tz not in self._bad_tz:
                self._bad_tz.add(tz)
                log.warning("unknown timezone %r; using %s for its users' cron jobs", tz, self.default_tz)
            return self.default_tz

    async def tick(self) -> int:
        """Fire every due slot once. Returns how many jobs this scheduler enqueued."""
        now = self.clock.now()
        by_tz = await self._users_by_tz() if any(s.per_user for s in self.specs) else {}
        calls: list[tuple[str, list[str], list[str]]] = []  # (field, keys, args)
        for spec in self.specs:
            assert spec.cron is not None
            targets = by_tz.items() if spec.per_user else [(self.default_tz, [""])]
            for tz_name, user_ids in targets:
                tz = ZoneInfo(tz_name)
                slot = latest_due(spec.cron, tz, now)
                if slot is None:
                    continue
                key = slot_key(slot)
                for user_id in user_ids:
                    field = f"{spec.name}|{user_id}"
                    if self._known.get(field, "") >= key:
                        continue
                    payload = {"slot": key, "tz": tz_name, "scheduled_for": fire_instant(slot, tz).isoformat()}
                    if spec.per_user:
                        payload["user_id"] = user_id
                    job_id = f"cron:{spec.name}:{user_id or '-'}:{key}"
                    keys = [
                        self.keys.cron,
                        self.keys.job(job_id),
                        self.keys.stream(spec.name),
                        self.keys.delayed,
                        self.keys.queues,
                    ]
                    args = [field, key, job_id, spec.name, encode_payload(payload, 4096), str(ENVELOPE_VERSION)]
                    calls.append((field, keys, args))
        fired = 0
        for start in range(0, len(calls), _BATCH):
            chunk = calls[start : start + _BATCH]
            async with self.redis.pipeline(transaction=False) as pipe:
                for _, keys, args in chunk:
                    await self.scripts.cron_fire(keys=keys, args=args, client=pipe)
                results = await pipe.execute()
            for (field, _, args), result in zip(chunk, results, strict=True):
                self._known[field] = args[1]
                if int(result) == 1:
                    fired += 1
                    log.info("cron %s fired slot %s", field, args[1])
        return fired

    async def run(self) -> None:
        """Tick at every minute boundary until ``stop()`` (cron has minute resolution)."""
        while not self.stopping.is_set():
            try:
                await self.tick()
            except (RedisError, OSError) as exc:
                log.warning("scheduler tick failed (%s); retrying next minute", exc)
            except Exception:  # e.g. the users provider's database: keep the scheduler alive
                log.exception("scheduler tick failed; retrying next minute")
            now = self.clock.now()
            delay = 60.0 - (now.second + now.microsecond / 1e6) + 0.05
            sleeper = asyncio.ensure_future(self.clock.sleep(delay))
            stopper = asyncio.ensure_future(self.stopping.wait())
            await asyncio.wait([sleeper, stopper], return_when=asyncio.FIRST_COMPLETED)
            sleeper.cancel()
            stopper.cancel()

    def stop(self) -> None:
        self.stopping.set()
