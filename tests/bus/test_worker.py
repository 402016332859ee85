"""Enqueue, run, retry, dead-letter, heartbeats and shutdown, against a real server."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.bus import JobContext, PayloadError, UnknownJob
from gateway.bus.keys import GROUP
from gateway.config import Config

from .conftest import bus_config, eventually, new_bus, running, spec, stopped


async def test_handler_gets_payload_and_context(config: Config) -> None:
    seen: list[tuple[JobContext, dict[str, Any]]] = []

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        seen.append((ctx, payload))

    gateway = object()
    bus = await new_bus(config, [spec("index_turn", handler)], ctx_factory=lambda: gateway)
    try:
        async with running(bus):
            job_id = await bus.enqueue("index_turn", {"turn_id": 7}, job_id="index:7")
            await eventually(lambda: seen)
        ctx, payload = seen[0]
        assert payload == {"turn_id": 7}
        assert (ctx.job_id, ctx.name, ctx.attempt, ctx.gateway, ctx.bus) == (job_id, "index_turn", 1, gateway, bus)
        assert ctx.max_tries == config.bus.max_tries
        # Done jobs leave nothing behind: no stream entry, no pending delivery, no job record.
        assert await bus.redis.xlen(bus.keys.stream("index_turn")) == 0
        assert (await bus.redis.xpending(bus.keys.stream("index_turn"), GROUP))["pending"] == 0
        assert not await bus.redis.exists(bus.keys.job(job_id))
    finally:
        await bus.close()


async def test_sync_handlers_run_in_a_thread(config: Config) -> None:
    seen: list[int] = []

    def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        time.sleep(0.05)  # would block the loop if it ran there
        seen.append(payload["n"])

    bus = await new_bus(config, [spec("sync", handler)])
    try:
        async with running(bus, 4):
            for n in range(4):
                await bus.enqueue("sync", {"n": n})
            await eventually(lambda: len(seen) == 4)
        assert sorted(seen) == [0, 1, 2, 3]
    finally:
        await bus.close()


async def test_job_id_is_idempotent_while_pending(config: Config) -> None:
    runs: list[str] = []

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        runs.append(ctx.job_id)

    bus = await new_bus(config, [spec("compact", handler)])
    try:
        for _ in range(3):
            assert await bus.enqueue("compact", {"session": "s1"}, job_id="compact:s1") == "compact:s1"
        assert await bus.redis.xlen(bus.keys.stream("compact")) == 1
        await bus.enqueue("compact", {"session": "s2"}, job_id="compact:s2", delay=30)
        await bus.enqueue("compact", {"session": "s2"}, job_id="compact:s2")  # delayed counts as pending
        async with running(bus):
            await eventually(lambda: runs == ["compact:s1"])

            async def acked() -> bool:  # the handler has run; its id is free once the job is acked
                return any(s.name == "compact" and s.pending == 0 and s.in_flight == 0 for s in await bus.status())

            await eventually(acked)
            # Once done, the same id may be queued again.
            await bus.enqueue("compact", {"session": "s1"}, job_id="compact:s1")
            await eventually(lambda: runs == ["compact:s1", "compact:s1"])
        assert [s.delayed for s in await bus.status() if s.name == "compact"] == [1]
    finally:
        await bus.close()


async def test_delay(config: Config) -> None:
    started: list[float] = []

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        started.append(time.monotonic())

    bus = await new_bus(config, [spec("later", handler)])
    try:
        async with running(bus):
            t0 = time.monotonic()
            await bus.enqueue("later", {}, delay=0.4)
            await eventually(lambda: started, timeout=5)
        assert 0.38 <= started[0] - t0 < 3.0  # generous: the machine is shared
    finally:
        await bus.close()


async def test_payload_rules(config: Config) -> None:
    bus = await new_bus(config, [spec("known", lambda ctx, p: None)])
    try:
        with pytest.raises(UnknownJob):
            await bus.enqueue("typo", {})
        with pytest.raises(PayloadError, match="JSON object"):
            await bus.enqueue("known", ["not", "a", "mapping"])  # type: ignore[arg-type]
        with pytest.raises(PayloadError, match="ids"):
            await bus.enqueue("known", {"text": "x" * 10_000})
        with pytest.raises(PayloadError, match="JSON"):
            await bus.enqueue("known", {"nan": float("nan")})
        with pytest.raises(PayloadError, match="job_id"):
            await bus.enqueue("known", {}, job_id="has space")
        assert await bus.redis.xlen(bus.keys.stream("known")) == 0
    finally:
        await bus.close()


async def test_retries_with_backoff_then_success(config: Config) -> None:
    attempts: list[tuple[int, float]] = []

    async def flaky(ctx: JobContext, payload: dict[str, Any]) -> None:
        attempts.append((ctx.attempt, time.monotonic()))
        if ctx.attempt < 3:
            raise RuntimeError("transient")

    config = bus_config(Path(str(config.data_dir)).parent, retry_backoff_s=0.2, retry_backoff_max_s=5)
    bus = await new_bus(config, [spec("flaky", flaky, max_tries=5)])
    try:
        async with running(bus):
            await bus.enqueue("flaky", {})
            await eventually(lambda: len(attempts) == 3, timeout=10)
            await eventually(lambda: _settled(bus, "flaky"))
        assert [a for a, _ in attempts] == [1, 2, 3]
        gap1, gap2 = attempts[1][1] - attempts[0][1], attempts[2][1] - attempts[1][1]
        assert gap1 >= 0.09 and gap2 >= 0.19  # 0.2 * 2**(n-1), jittered down to half at most
        assert await bus.dead() == []
    finally:
        await bus.close()


async def _settled(bus: Any, name: str) -> bool:
    return await bus.redis.xlen(bus.keys.stream(name)) == 0 and await bus.redis.zcard(bus.keys.delayed) == 0


async def test_raising_poison_is_dead_lettered_after_exactly_n_deliveries(config: Config) -> None:
    poison_runs: list[int] = []
    healthy: set[int] = set()

    async def poison(ctx: JobContext, payload: dict[str, Any]) -> None:
        poison_runs.append(ctx.attempt)
        raise ValueError(f"bad record {payload['id']}")

    async def ok(ctx: JobContext, payload: dict[str, Any]) -> None:
        healthy.add(payload["n"])

    bus = await new_bus(config, [spec("poison", poison, max_tries=4), spec("ok", ok)])
    try:
        async with running(bus, 4):
            await bus.enqueue("poison", {"id": 42}, job_id="p42")
            for n in range(100):
                await bus.enqueue("ok", {"n": n})
            await eventually(lambda: len(healthy) == 100)
            dead = await eventually(bus.dead)
            await eventually(lambda: _settled(bus, "poison"))
        assert poison_runs == [1, 2, 3, 4]
        assert len(dead) == 1 and dead[0].job_id == "p42" and dead[0].tries == 4
        assert "ValueError: bad record 42" in dead[0].error
        assert not await bus.redis.exists(bus.keys.job("p42"))
        [st] = [s for s in await bus.status() if s.name == "poison"]
        assert (st.pending, st.in_flight, st.dead) == (0, 0, 1)
    finally:
        await bus.close()


async def test_timeout_counts_as_a_failure(config: Config) -> None:
    async def slow(ctx: JobContext, payload: dict[str, Any]) -> None:
        await asyncio.sleep(10)

    bus = await new_bus(config, [spec("slow", slow, timeout=0.05, max_tries=2)])
    try:
        async with running(bus):
            await bus.enqueue("slow", {})
            dead = await eventually(bus.dead)
        assert dead[0].tries == 2 and "TimeoutError" in dead[0].error
    finally:
        await bus.close()


async def test_dead_letter_retry(config: Config) -> None:
    fail = True
    done: list[str] = []

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        if fail:
            raise RuntimeError("down")
        done.append(ctx.job_id)

    bus = await new_bus(config, [spec("sync_contacts", handler, max_tries=1)])
    try:
        async with running(bus):
            await bus.enqueue("sync_contacts", {"user": "ann"}, job_id="sync:ann")
            await eventually(bus.dead)
            fail = False
            assert await bus.retry("nope") == "not-found"
            assert await bus.retry("sync:ann") == "queued"
            await eventually(lambda: done == ["sync:ann"])
        assert await bus.dead() == []
    finally:
        await bus.close()


@pytest.mark.serial  # heartbeats every 100 ms against a 300 ms claim: a loaded machine misses them
async def test_long_job_runs_exactly_once(tmp_path: Path) -> None:
    """A job 10x longer than the claim idle time, with an idle second worker waiting to claim."""
    config = bus_config(tmp_path, claim_idle_ms=300)
    runs: list[str] = []

    async def long(ctx: JobContext, payload: dict[str, Any]) -> None:
        runs.append(ctx.job_id)
        await asyncio.sleep(3.0)  # 10x claim_idle_ms

    a = await new_bus(config, [spec("long", long)])
    b = await new_bus(config.model_copy(), [spec("long", long)], own_server=False)
    try:
        async with running(a, 1), running(b, 1):
            t0 = time.monotonic()
            await a.enqueue("long", {}, job_id="the-long-one")
            await eventually(lambda: _settled(a, "long"), timeout=10)
            assert time.monotonic() - t0 >= 3.0
            await asyncio.sleep(0.5)  # two more claim rounds of the idle worker
        assert runs == ["the-long-one"]
    finally:
        await b.close()
        await a.close()


async def test_a_stalled_worker_loses_its_job(tmp_path: Path) -> None:
    """The control for the test above: a consumer that took a job and then sends no heartbeats (a
    dead process, or a handler blocking its loop) loses it to a live worker after claim_idle_ms."""
    config = bus_config(tmp_path, claim_idle_ms=200)
    runs: list[tuple[str, int]] = []

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        runs.append((ctx.job_id, ctx.attempt))

    a = await new_bus(config, [spec("stall", handler)])
    b = await new_bus(config.model_copy(), [spec("stall", handler)], own_server=False)
    try:
        await a.redis.xgroup_create(a.keys.stream("stall"), GROUP, id="0", mkstream=True)
        await a.enqueue("stall", {}, job_id="j")
        await a.redis.xreadgroup(GROUP, "stalled", {a.keys.stream("stall"): ">"}, count=1)
        t0 = time.monotonic()
        async with running(b, 1):
            await eventually(lambda: runs, timeout=5)
            waited = time.monotonic() - t0
            await eventually(lambda: _settled(a, "stall"), timeout=5)
        assert runs == [("j", 2)]  # the stalled delivery counted as the first
        assert 0.2 <= waited < 2.0
        consumers = {c["name"]: c["pending"] for c in await a.redis.xinfo_consumers(a.keys.stream("stall"), GROUP)}
        assert consumers.get("stalled") == 0
    finally:
        await b.close()
        await a.close()


async def test_claim_follows_the_cursor(tmp_path: Path) -> None:
    """60 deliveries abandoned by a dead consumer; a worker with 4 slots claims them in many
    XAUTOCLAIM calls, following the cursor, and runs each exactly once."""
    config = bus_config(tmp_path, claim_idle_ms=100)
    runs: list[int] = []

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        runs.append(payload["n"])
        assert ctx.attempt == 2

    bus = await new_bus(config, [spec("orphans", handler)])
    try:
        stream = bus.keys.stream("orphans")
        await bus.redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
        for n in range(60):
            await bus.enqueue("orphans", {"n": n})
        await bus.redis.xreadgroup(GROUP, "dead-worker", {stream: ">"}, count=100)
        async with running(bus, 4):
            await eventually(lambda: len(runs) == 60, timeout=15)
            await eventually(lambda: _settled(bus, "orphans"))
        assert sorted(runs) == list(range(60))
    finally:
        await bus.close()


async def test_graceful_shutdown_finishes_running_jobs(config: Config) -> None:
    finished: list[str] = []
    started = asyncio.Event()

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        started.set()
        await asyncio.sleep(0.3)
        finished.append(ctx.job_id)

    bus = await new_bus(config, [spec("finish_me", handler)])
    try:
        async with running(bus):
            await bus.enqueue("finish_me", {}, job_id="f1")
            await started.wait()
        # stop_workers returned: the job finished and was acked before it did.
        assert finished == ["f1"]
        assert await bus.redis.xlen(bus.keys.stream("finish_me")) == 0
        consumers = await bus.redis.xinfo_consumers(bus.keys.stream("finish_me"), GROUP)
        assert consumers == []  # a graceful worker removes its consumer
    finally:
        await bus.close()


async def test_shutdown_past_grace_hands_the_job_back(tmp_path: Path) -> None:
    config = bus_config(tmp_path, shutdown_grace_s=0.1)
    attempts: list[int] = []
    started = asyncio.Event()

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        attempts.append(ctx.attempt)
        started.set()
        await asyncio.sleep(30)

    bus = await new_bus(config, [spec("too_long", handler)])
    try:
        async with running(bus):
            await bus.enqueue("too_long", {}, job_id="t")
            await started.wait()
        # Back in the queue at once (no claim_idle wait), and the interrupted delivery is not counted.
        assert await bus.redis.hget(bus.keys.job("t"), "prior") == "0"
        await eventually(lambda: bus.redis.xlen(bus.keys.stream("too_long")), timeout=10)
    finally:
        await bus.close()


@pytest.mark.long
async def test_poison_that_kills_its_worker_is_dead_lettered_after_n_deliveries(tmp_path: Path) -> None:
    """A job that kills the worker process on receipt (max_tries=3) is delivered exactly 3 times, then
    dead-lettered by the next claimer; healthy jobs keep flowing through the restarts."""
    import sqlite3

    from .chaos_worker import SCHEMA
    from .procs import Workers

    db = tmp_path / "effects.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA journal_mode=WAL")  # before any worker opens it: no race to switch
        con.executescript(SCHEMA)
    config = bus_config(tmp_path, claim_idle_ms=500)
    bus = await new_bus(config)
    workers = Workers(config.data_dir, db, tmp_path, claim_idle_ms=500)
    try:
        await asyncio.gather(workers.start(0), workers.start(1))
        supervisor = asyncio.create_task(workers.supervise())
        await bus.enqueue("poison_exit", {}, job_id="poison")
        for n in range(60):
            await bus.enqueue("effect", {"n": n}, job_id=f"ok{n}")
        dead = await eventually(bus.dead, timeout=60)

        def count(sql: str) -> int:
            with sqlite3.connect(db, timeout=30) as con:
                return int(con.execute(sql).fetchone()[0])

        await eventually(lambda: count("SELECT COUNT(DISTINCT job_id) FROM effects") == 60, timeout=60)
        assert count("SELECT COUNT(*) FROM executions WHERE job_id = 'poison'") == 3
        assert [(d.job_id, d.tries) for d in dead] == [("poison", 3)]
        assert "worker lost: delivered 3 times" in dead[0].error
        assert count("SELECT COUNT(*) FROM effects") == 60  # redelivered healthy jobs: no second effect
        workers.stopping = True
        await supervisor
    finally:
        await workers.stop()
        await bus.close()


async def test_a_failing_worker_loop_stops_the_worker_loudly(config: Config) -> None:
    """An unexpected server reply in the read loop must not leave a worker that heartbeats but no
    longer reads: run_workers raises, so the host's supervision sees it."""
    from redis.exceptions import ResponseError

    bus = await new_bus(config, [spec("fragile", lambda ctx, p: None)])
    try:
        task = asyncio.create_task(bus.run_workers(block_ms=50))
        await eventually(lambda: bus.worker is not None)
        await eventually(lambda: bus.redis.exists(bus.keys.stream("fragile")))
        await bus.redis.delete(bus.keys.stream("fragile"))
        await bus.redis.set(bus.keys.stream("fragile"), "not a stream")  # WRONGTYPE on the next read
        with pytest.raises(ResponseError, match="WRONGTYPE"):
            await asyncio.wait_for(task, 10)
        assert bus.worker is None
    finally:
        await bus.close()


async def test_stop_interrupts_the_blocking_read(config: Config) -> None:
    """``stop()`` does not wait out XREADGROUP's block: with a one-minute block, an idle worker still
    stops at once (it used to sit in the read until the block ran out)."""
    bus = await new_bus(config, [spec("idle", lambda ctx, payload: None)])
    try:
        task = asyncio.create_task(bus.run_workers(block_ms=60_000))
        await eventually(lambda: bus.worker is not None)
        await asyncio.sleep(0.2)  # the read loop is inside its blocking read now
        await asyncio.wait_for(bus.stop_workers(), timeout=10)
        await asyncio.wait_for(task, timeout=5)  # far below the 60 s block
    finally:
        await bus.close()


async def test_jobs_enqueued_around_a_stop_are_all_run(tmp_path: Path) -> None:
    """Interrupting the read can leave an entry the server handed over in the stopped consumer's
    pending list: it is claimed by the next worker, never lost."""
    config = bus_config(tmp_path, claim_idle_ms=200)
    ran: list[str] = []

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        ran.append(ctx.job_id)

    bus = await new_bus(config, [spec("around", handler)])
    try:
        for round_ in range(20):
            task = asyncio.create_task(bus.run_workers(block_ms=60_000))
            await eventually(lambda: bus.worker is not None)
            await bus.enqueue("around", {}, job_id=f"r{round_}")
            await stopped(bus, task)  # bounded: this once hung under a loaded -n 4 run (never alone)
        async with running(bus):
            await eventually(lambda: len(set(ran)) == 20)
        assert sorted(set(ran)) == sorted(f"r{i}" for i in range(20))
    finally:
        await bus.close()


async def test_a_capped_job_never_holds_more_slots_than_its_cap(config: Config) -> None:
    # Before: index jobs (which wait on one embedding thread per process) took every slot of a
    # busy worker, and every other job, reminders included, queued behind their backlog.
    now = {"slow": 0, "most": 0}
    quick_done: list[int] = []
    slow_done: list[int] = []
    release = asyncio.Event()

    async def slow(ctx: JobContext, payload: dict[str, Any]) -> None:
        now["slow"] += 1
        now["most"] = max(now["most"], now["slow"])
        try:
            await release.wait()
        finally:
            now["slow"] -= 1
        slow_done.append(payload["n"])

    async def quick(ctx: JobContext, payload: dict[str, Any]) -> None:
        quick_done.append(payload["n"])

    bus = await new_bus(config, [spec("slow", slow, concurrency=2), spec("quick", quick)])
    try:
        async with running(bus, 4):
            for n in range(6):
                await bus.enqueue("slow", {"n": n})
            await eventually(lambda: now["slow"] == 2)
            for n in range(10):
                await bus.enqueue("quick", {"n": n})
            await eventually(lambda: len(quick_done) == 10)  # while both slow ones still hold their slots
            assert now == {"slow": 2, "most": 2} and slow_done == []
            release.set()
            await eventually(lambda: len(slow_done) == 6)
        assert now["most"] == 2
    finally:
        await bus.close()


async def test_a_stop_that_lands_inside_a_heartbeat_call_still_stops_the_worker(tmp_path: Path) -> None:
    # redis-py can turn a cancel that lands inside a command into a ConnectionError, which the heartbeat
    # retries: the worker used to cancel its heartbeat and wait for it for ever (a hung stop_workers
    # under a loaded -n 4 run). Here every heartbeat call is cut off that way.
    import redis.exceptions

    config = bus_config(tmp_path, heartbeat_ms=20)
    release = asyncio.Event()

    async def held(ctx: JobContext, payload: dict[str, Any]) -> None:
        await release.wait()  # a running job, so the heartbeat has a delivery to refresh

    bus = await new_bus(config, [spec("held", held)])
    in_call = asyncio.Event()

    async def heartbeat_swallowing_cancel(**kw: Any) -> list[str]:
        in_call.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise redis.exceptions.ConnectionError("Connection closed by server.") from None
        return []

    try:
        task = asyncio.create_task(bus.run_workers(block_ms=50))
        await eventually(lambda: bus.worker is not None)
        worker = bus.worker
        assert worker is not None
        worker.scripts.heartbeat = heartbeat_swallowing_cancel  # type: ignore[method-assign]
        await bus.enqueue("held", {})
        await asyncio.wait_for(in_call.wait(), 10)
        release.set()
        await stopped(bus, task, timeout=10)
    finally:
        await bus.close()
