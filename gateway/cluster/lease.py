"""``Lease``: one holder at a time for a named role, on Redis, with a fencing token.

Acquiring is one script: when the key is free it takes the next value of a counter (``INCR``, the
fencing token, strictly increasing over every grant) and sets ``holder|token`` with a TTL (``SET ...
PX``); renewing and releasing compare the whole value first, so a holder whose lease ran out can
neither extend nor delete its successor's. Each grant, release and renewal is also written down with
the server's clock (a short history stream and a hash of last renewals), so operators and the
multi-node test can check that two grants never overlapped.

The holder counts its lease as valid only until ``ttl * SAFETY`` after it *sent* the request that
granted or renewed it: Redis counts the TTL from when it handled that request, later, so the holder
always gives up first. Leader work must stop as soon as ``held()`` turns False (``role.py`` does).
"""

from __future__ import annotations

import math
import secrets
import time
from dataclasses import dataclass

from redis.asyncio import Redis

SAFETY = 0.8  # share of the TTL the holder relies on (clock rate drift, scheduling delays)

_ACQUIRE = """
local cur = redis.call('GET', KEYS[1])
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if cur then
  local sep = string.find(cur, '|', 1, true)
  if sep and string.sub(cur, 1, sep - 1) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    redis.call('HSET', KEYS[4], string.sub(cur, sep + 1), ms)
    return tonumber(string.sub(cur, sep + 1))
  end
  return 0
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. token, 'PX', ARGV[2])
redis.call('HSET', KEYS[4], token, ms)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', 1000, '*', 'event', 'acquired', 'holder', ARGV[1], 'token', token,
           'at_ms', ms)
return token
"""

_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local now = redis.call('TIME')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[3], tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
return 1
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[3], ARGV[3], ms)
redis.call('XADD', KEYS[2], 'MAXLEN', '~', 1000, '*', 'event', 'released', 'holder', ARGV[2], 'token', ARGV[3],
           'at_ms', ms)
return 1
"""


@dataclass(frozen=True, slots=True)
class Grant:
    """One grant of the lease, as recorded: who, which token, when (server ms), last renewal."""

    holder: str
    token: int
    acquired_ms: int
    renewed_ms: int
    released_ms: int | None


class Lease:
    def __init__(self, redis: Redis, name: str, ttl: float, *, holder: str, prefix: str = "kith") -> None:
        """``holder``: this process (``node_id`` plus a random suffix, so a restarted node with the same
        id is a new holder that waits for its predecessor's lease to run out)."""
        self.redis, self.name, self.ttl = redis, name, ttl
        self.holder = f"{holder}/{secrets.token_hex(3)}"
        self.key = f"{prefix}:lease:{name}"
        self.fence_key = f"{self.key}:fence"  # INCR: the fencing tokens
        self.history_key = f"{self.key}:history"  # stream of grants and releases (server time)
        self.renewed_key = f"{self.key}:renewed"  # token -> last renewal (server ms)
        self.token: int | None = None
        self._valid_until = 0.0
        self._ttl_ms = str(math.ceil(ttl * 1000))
        self._acquire = redis.register_script(_ACQUIRE)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)

    @property
    def value(self) -> str:
        return f"{self.holder}|{self.token}"

    def held(self) -> bool:
        """True while this process may act as the holder (checked locally, no round trip)."""
        return self.token is not None and time.monotonic() < self._valid_until

    def remaining(self) -> float:
        return max(self._valid_until - time.monotonic(), 0.0) if self.token is not None else 0.0

    async def acquire(self) -> int | None:
        """Take the lease if it is free (or keep it if it is ours); the fencing token, or None."""
        sent = time.monotonic()
        token = int(await self._acquire(keys=[self.key, self.fence_key, self.history_key, self.renewed_key],
                                        args=[self.holder, self._ttl_ms]))
        if not token:
            self.token = None
            return None
        self.token = token
        self._valid_until = sent + self.ttl * SAFETY
        return token

    async def renew(self) -> bool:
        """Extend our lease; False (and no longer held) when it ran out or another holder has it."""
        if self.token is None:
            return False
        sent = time.monotonic()
        ok = int(await self._renew(keys=[self.key, self.renewed_key], args=[self.value, self._ttl_ms, self.token]))
        if not ok:
            self.token = None
            return False
        self._valid_until = sent + self.ttl * SAFETY
        return True

    async def release(self) -> bool:
        """Give the lease up now (a clean stop): the next node need not wait for the TTL."""
        if self.token is None:
            return False
        value, token = self.value, self.token
        self.token = None
        return bool(int(await self._release(keys=[self.key, self.history_key, self.renewed_key],
                                            args=[value, self.holder, token])))

    def forget(self) -> None:
        """Stop counting on the lease without a round trip (Redis unreachable, validity over)."""
        self.token = None

    async def still_current(self, token: int) -> bool:
        """Fencing check before an effect that must not come from a deposed holder: is ``token`` the
        token of the lease's current grant?"""
        value = await self.redis.get(self.key)
        return value is not None and str(value).rpartition("|")[2] == str(token)

    async def current(self) -> tuple[str, int] | None:
        """(holder, token) of the current grant, None when nobody holds it."""
        value = await self.redis.get(self.key)
        if value is None:
            return None
        holder, _, token = str(value).rpartition("|")
        return holder, int(token)

    async def history(self) -> list[Grant]:
        """Every recorded grant, oldest first (the last ~1000 events)."""
        entries = await self.redis.xrange(self.history_key)
        renewed = {int(k): int(v) for k, v in (await self.redis.hgetall(self.renewed_key)).items()}
        grants: dict[int, Grant] = {}
        for _, fields in entries:
            token = int(fields["token"])
            at = int(fields["at_ms"])
            if fields["event"] == "acquired":
                grants[token] = Grant(fields["holder"], token, at, renewed.get(token, at), None)
            elif token in grants:
                g = grants[token]
                grants[token] = Grant(g.holder, token, g.acquired_ms, max(g.renewed_ms, at), at)
        return [grants[t] for t in sorted(grants)]
