"""Lua scripts: every state change of a job is one atomic script.

Atomicity is what the guarantees rest on: a script's writes reach the AOF together, so a crash of a
worker or of redis-server can never leave a job acked without its dead letter, queued twice, or
neither queued nor delayed. Scripts name the keys they derive from the prefix (job hashes, streams
found through the delayed set), so the bus supports standalone and Sentinel Redis, not Cluster.
"""

from __future__ import annotations

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

_PRELUDE = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function owned(stream, group, consumer, mid)
  return #redis.call('XPENDING', stream, group, mid, mid, 1, consumer) > 0
end
local function enqueue(kjob, kstream, kdelayed, kqueues, id, name, payload, v, delay, prior)
  local st = redis.call('HGET', kjob, 'state')
  if st then return {0, st} end
  local now = now_ms()
  redis.call('SADD', kqueues, name)
  redis.call('HSET', kjob, 'name', name, 'payload', payload, 'v', v, 'enq', now, 'prior', prior)
  if tonumber(delay) > 0 then
    redis.call('ZADD', kdelayed, now + tonumber(delay), id)
    redis.call('HSET', kjob, 'state', 'delayed')
    return {1, 'delayed'}
  end
  local mid = redis.call('XADD', kstream, '*', 'id', id, 'name', name, 'payload', payload, 'v', v,
                         'enq', now, 'prior', prior)
  redis.call('HSET', kjob, 'state', 'queued', 'msg', mid)
  return {1, 'queued'}
end
local function bury(kdead, id, name, payload, v, enq, tries, err, consumer)
  redis.call('XADD', kdead, '*', 'id', id, 'name', name, 'payload', payload, 'v', v, 'enq', enq,
             'tries', tries, 'error', err, 'consumer', consumer, 'at', now_ms())
end
local function forget(kstream, group, mid, kjob)
  redis.call('XACK', kstream, group, mid)
  -- Acked entries are deleted one by one instead of MAXLEN trimming, which could drop unacked jobs.
  redis.call('XDEL', kstream, mid)
  if redis.call('HGET', kjob, 'msg') == mid then redis.call('DEL', kjob) end
end
"""

# KEYS job, stream, delayed, queues | ARGV id, name, payload, v, delay_ms
ENQUEUE = (
    _PRELUDE
    + """
return enqueue(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], 0)
"""
)

# KEYS stream, job, delayed, dead | ARGV group, consumer, mid, outcome, id, name, payload, v, enq,
# tries, backoff_ms, error. Returns 0 when this consumer no longer owns the delivery.
SETTLE = (
    _PRELUDE
    + """
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then return 0 end
local outcome = ARGV[4]
if outcome == 'dead' then
  -- The dead letter is written before the ack, inside the same atomic script.
  bury(KEYS[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[12], ARGV[2])
end
if outcome == 'retry' then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
  redis.call('XDEL', KEYS[1], ARGV[3])
  redis.call('HSET', KEYS[2], 'name', ARGV[6], 'payload', ARGV[7], 'v', ARGV[8], 'enq', ARGV[9],
             'prior', ARGV[10], 'state', 'retry', 'msg', '', 'error', ARGV[12])
  if tonumber(ARGV[11]) > 0 then
    redis.call('ZADD', KEYS[3], now_ms() + tonumber(ARGV[11]), ARGV[5])
  else  -- handed back at shutdown: straight to the stream, for any worker to take now
    local mid = redis.call('XADD', KEYS[1], '*', 'id', ARGV[5], 'name', ARGV[6], 'payload', ARGV[7],
                           'v', ARGV[8], 'enq', ARGV[9], 'prior', ARGV[10])
    redis.call('HSET', KEYS[2], 'state', 'queued', 'msg', mid)
  end
else
  forget(KEYS[1], ARGV[1], ARGV[3], KEYS[2])
end
return 1
"""
)

# Deliveries a claim has just moved to this consumer (``e``: entry id and fields, nil for an entry
# deleted while pending): each is handed over with its delivery count, or dead-lettered when that
# count (with the tries before a retry re-enqueued it) passes the cap. KEYS[2] dead | ARGV[1] group,
# ARGV[2] consumer, cap and prefix as named.
_TAKE = """
local function take(entries, cap, prefix)
  local out, buried = {}, 0
  for _, e in ipairs(entries) do
    -- Redis 6.2 returns nil for entries deleted while pending; the bus never does that.
    if e then
      local mid, f = e[1], e[2]
      local h = {}
      for i = 1, #f, 2 do h[f[i]] = f[i + 1] end
      local p = redis.call('XPENDING', KEYS[1], ARGV[1], mid, mid, 1)
      local n = tonumber(p[1][4]) + tonumber(h['prior'] or '0')
      if n > tonumber(cap) then
        bury(KEYS[2], h['id'] or '', h['name'] or '', h['payload'] or '{}', h['v'] or '0', h['enq'] or '0',
             n - 1, 'worker lost: delivered ' .. (n - 1) .. ' times without completing', ARGV[2])
        forget(KEYS[1], ARGV[1], mid, prefix .. ':job:' .. (h['id'] or ''))
        buried = buried + 1
      else
        table.insert(out, {mid, tonumber(p[1][4]), f})
      end
    end
  end
  return out, buried
end
"""

# KEYS stream, dead | ARGV group, consumer, min_idle_ms, cursor, count, max_tries, prefix
# Claims idle deliveries of dead or stuck workers; buries those past the delivery cap.
CLAIM = (
    _PRELUDE
    + _TAKE
    + """
local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], 'COUNT', ARGV[5])
local out, buried = take(r[2], ARGV[6], ARGV[7])
return {r[1], out, buried}
"""
)

# KEYS stream, dead | ARGV group, consumer, gone consumer, count, max_tries, prefix. The deliveries of a
# consumer whose process is gone (``owners.is_gone``), taken over without waiting for their idle time;
# only entries that consumer still owns when the script runs.
CLAIM_FROM = (
    _PRELUDE
    + _TAKE
    + """
local ids = {}
for _, p in ipairs(redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', ARGV[4], ARGV[3])) do
  table.insert(ids, p[1])
end
if #ids == 0 then return {{}, 0} end
local out, buried = take(redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(ids)), ARGV[5], ARGV[6])
return {out, buried}
"""
)

# KEYS stream | ARGV group, consumer, mid... Resets idle time of deliveries this consumer still owns
# (XCLAIM JUSTID does not count as a delivery); never takes back one another worker has claimed.
HEARTBEAT = (
    _PRELUDE
    + """
local mine, args = {}, {KEYS[1], ARGV[1], ARGV[2], 0}
for i = 3, #ARGV do
  if owned(KEYS[1], ARGV[1], ARGV[2], ARGV[i]) then
    table.insert(mine, ARGV[i])
    table.insert(args, ARGV[i])
  end
end
if #mine > 0 then
  table.insert(args, 'JUSTID')
  redis.call('XCLAIM', unpack(args))
end
return mine
"""
)

# KEYS delayed | ARGV prefix, limit. Moves due jobs (delays, retry backoff) to their streams.
PROMOTE = (
    _PRELUDE
    + """
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  local kjob = ARGV[1] .. ':job:' .. id
  local h = redis.call('HMGET', kjob, 'name', 'payload', 'v', 'enq', 'prior')
  if h[1] then
    local mid = redis.call('XADD', ARGV[1] .. ':q:' .. h[1], '*', 'id', id, 'name', h[1], 'payload', h[2],
                           'v', h[3], 'enq', h[4], 'prior', h[5])
    redis.call('HSET', kjob, 'state', 'queued', 'msg', mid)
  end
  redis.call('ZREM', KEYS[1], id)
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {#ids, nxt[2] or -1, now}
"""
)

# KEYS cron, job, stream, delayed, queues | ARGV field, slot, id, name, payload, v
# Compare-and-set on the last fired slot: two schedulers never fire one slot twice.
CRON_FIRE = (
    _PRELUDE
    + """
local last = redis.call('HGET', KEYS[1], ARGV[1])
if last and last >= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if not last then return -1 end
enqueue(KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[3], ARGV[4], ARGV[5], ARGV[6], 0, 0)
return 1
"""
)

# KEYS dead, job, stream, delayed, queues | ARGV entry, id, name, payload, v
REQUEUE_DEAD = (
    _PRELUDE
    + """
if #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) == 0 then return {-1, 'gone'} end
local r = enqueue(KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[3], ARGV[4], ARGV[5], 0, 0)
redis.call('XDEL', KEYS[1], ARGV[1])
return r
"""
)

# KEYS stream | ARGV group, idle_ms, self. Drops consumers of dead workers once they own nothing;
# a consumer that still owns deliveries is kept, or its pending entries would be lost.
JANITOR = """
local n = 0
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local h = {}
  for i = 1, #c, 2 do h[c[i]] = c[i + 1] end
  if h['name'] ~= ARGV[3] and tonumber(h['pending']) == 0 and tonumber(h['idle']) > tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], h['name'])
    n = n + 1
  end
end
return n
"""

# KEYS stream | ARGV group, consumer. A graceful worker removes its consumer once it owns nothing.
LEAVE = (
    _PRELUDE
    + """
if #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) > 0 then return 0 end
return redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
"""
)


class Scripts:
    """The scripts registered on one client (EVALSHA, reloaded automatically after a restart)."""

    def __init__(self, redis: Redis) -> None:
        self.enqueue: AsyncScript = redis.register_script(ENQUEUE)
        self.settle: AsyncScript = redis.register_script(SETTLE)
        self.claim: AsyncScript = redis.register_script(CLAIM)
        self.heartbeat: AsyncScript = redis.register_script(HEARTBEAT)
        self.promote: AsyncScript = redis.register_script(PROMOTE)
        self.cron_fire: AsyncScript = redis.register_script(CRON_FIRE)
        self.requeue_dead: AsyncScript = redis.register_script(REQUEUE_DEAD)
        self.claim_from: AsyncScript = redis.register_script(CLAIM_FROM)
        self.janitor: AsyncScript = redis.register_script(JANITOR)
        self.leave: AsyncScript = redis.register_script(LEAVE)
