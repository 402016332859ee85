"""Cron scheduler: per user, in that user's timezone; any number of schedulers may run.

Every (job, user) has a "last fired slot" in Redis (``<p>:cron``). Firing is one compare-and-set
script that also enqueues, so two daemons on one Redis never fire a slot twice, and a crash between
deciding and enqueueing cannot lose the slot. After downtime only the latest missed slot is due, so
it runs once, never once per missed slot. A (job, user) seen for the first time records the
current slot without firing: a new user or a newly installed job starts with the next slot.

The work of a tick follows what is due, not how many users there are: a tick reads the distinct
timezones (``cronusers``), computes each job's latest slot per zone, and reads the users of a zone
only when a slot moved there since this scheduler last went through it; users added since the last
tick are read to record their first slot. A quiet minute with 100,000 users reads no user at all.
A scheduler's first tick goes through everyone once (it knows no zone yet), a page at a time.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.bus.clock import Clock, SystemClock
from gateway.bus.cronslots import fire_instant, latest_due, slot_key
from gateway.bus.cronusers import ListedUsers, Position, UserDirectory
from gateway.bus.envelope import ENVELOPE_VERSION, encode_payload
from gateway.bus.keys import Keys
from gateway.bus.registry import JobSpec
from gateway.bus.scripts import Scripts

log = logging.getLogger("kith.bus.scheduler")
Users = UserDirectory | Iterable[tuple[str, str]]
#: Returns a ``UserDirectory`` (the daemon's State), or every (user id, timezone) pair (tests, plugins).
UsersProvider = Callable[[], Awaitable[Users] | Users]
# Small enough that building one page's calls or one pipeline stays well under 20 ms of the event
# loop (100,000 new people at 500 a page stalled it 190 ms, kith bench schedule); the loop runs
# other tasks between pipelines.
_BATCH = 100  # script calls per pipeline round trip
_PAGE = 100  # users read at a time
Call = tuple[str, list[str], list[str]]  # (field, keys, args) of one cron_fire


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
        self._zone_done: dict[tuple[str, str], str] = {}  # (job, raw timezone) -> slot gone through
        self._since: Position | None = None  # users added after this are new to this scheduler
        self._listed: dict[str, int] = {}  # positions for ListedUsers (list providers)
        self._bad_tz: set[str] = set()
        self._slots: dict[tuple[str, str], datetime | None] = {}  # (cron, zone) -> latest due, this tick
        self.visited = 0  # users the last tick read: what a tick costs, for tests and benchmarks
        self.stopping = asyncio.Event()

    async def _directory(self) -> UserDirectory | None:
        if self.users_provider is None:
            return None
        result = self.users_provider()
        users = await result if inspect.isawaitable(result) else result
        if isinstance(users, UserDirectory):
            return users
        return ListedUsers(users, self._listed)

    def _zone_name(self, tz: str) -> str:
        if not tz:
            return self.default_tz  # no timezone of their own: the gateway's
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
        self.visited = 0
        self._slots.clear()
        fired = 0
        per_user = [s for s in self.specs if s.per_user]
        directory = await self._directory() if per_user else None
        if directory is not None:
            fired += await self._tick_users(directory, per_user, now)
        calls: list[Call] = []
        for spec in self.specs:
            if not spec.per_user:
                self._add_call(calls, spec, "", self.default_tz, ZoneInfo(self.default_tz), now)
        return fired + await self._fire(calls)

    async def _tick_users(self, directory: UserDirectory, specs: list[JobSpec], now: datetime) -> int:
        fired = 0
        if self._since is None:
            # First tick: every zone is new to us below, so everyone up to here is read there.
            self._since = directory.newest_user_position()
        for raw in directory.user_timezones():
            zone = self._zone_name(raw)
            tz = ZoneInfo(zone)
            moved = []
            for spec in specs:
                slot = self._slot(spec, zone, tz, now)
                if slot is not None and self._zone_done.get((spec.name, raw), "") < slot_key(slot):
                    moved.append((spec, slot_key(slot)))
            if not moved:
                continue
            after = ""
            while True:
                page = directory.users_in_timezone(raw, after=after, limit=_PAGE)
                self.visited += len(page)
                calls: list[Call] = []
                for user_id in page:
                    for spec, _ in moved:
                        self._add_call(calls, spec, user_id, zone, tz, now)
                fired += await self._fire(calls)  # yields to the loop between pages
                if len(page) < _PAGE:
                    break
                after = page[-1]
            for spec, key in moved:
                self._zone_done[(spec.name, raw)] = key
        # Users added since the last tick: their first sight records the current slot.
        while True:
            added = directory.users_added_since(self._since, limit=_PAGE)
            if not added:
                break
            self.visited += len(added)
            calls = []
            for (_, user_id), raw in added:
                zone = self._zone_name(raw)
                for spec in specs:
                    self._add_call(calls, spec, user_id, zone, ZoneInfo(zone), now)
            fired += await self._fire(calls)
            self._since = added[-1][0]
            if len(added) < _PAGE:
                break
        return fired

    def _add_call(self, calls: list[Call], spec: JobSpec, user_id: str, tz_name: str, tz: ZoneInfo,
                  now: datetime) -> None:
        """Queue the compare-and-set for (job, user) at the job's latest due slot in ``tz``."""
        slot = self._slot(spec, tz_name, tz, now)
        if slot is None:
            return
        key = slot_key(slot)
        field = f"{spec.name}|{user_id}"
        if self._known.get(field, "") >= key:
            return
        payload = {"slot": key, "tz": tz_name, "scheduled_for": fire_instant(slot, tz).isoformat()}
        if spec.per_user:
            payload["user_id"] = user_id
        job_id = f"cron:{spec.name}:{user_id or '-'}:{key}"
        keys = [self.keys.cron, self.keys.job(job_id), self.keys.stream(spec.name), self.keys.delayed,
                self.keys.queues]
        args = [field, key, job_id, spec.name, encode_payload(payload, 4096), str(ENVELOPE_VERSION)]
        calls.append((field, keys, args))

    def _slot(self, spec: JobSpec, tz_name: str, tz: ZoneInfo, now: datetime) -> datetime | None:
        # croniter is slow next to a dict lookup: once per (cron, zone) and tick, not per user.
        assert spec.cron is not None
        cache_key = (spec.cron, tz_name)
        if cache_key not in self._slots:
            self._slots[cache_key] = latest_due(spec.cron, tz, now)
        return self._slots[cache_key]

    async def _fire(self, calls: list[Call]) -> int:
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
            await asyncio.sleep(0)  # a reply read at once from the socket buffer does not yield
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
