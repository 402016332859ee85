"""Issue 28, "Failures are visible": the operator gets one notice a day at most while memory jobs are
dead-lettered or failing again and again (gateway/ops/attention_notice.py).

Real gateway, real bus (a dead letter made by a job that fails), real outbox; the notice reaches a
recording channel. Time is the cron slot's, given by the test: nothing waits for a day."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.app import Gateway
from gateway.bus.context import JobContext
from gateway.bus.registry import JobRegistry
from gateway.hookspecs import hookimpl
from gateway.identity.owner import local_owner
from gateway.ops.attention_notice import JOB, WATERMARK, Outcome, check
from gateway.state.delivery import DeliveryPrefs
from gateway.testing import GatewayFactory
from tests.background.conftest import FAST_BUS
from tests.delivery.test_outbox import Recorder, RecorderPlugin

SECRET = "sk-attention-test-0123456789"  # the model key: an error quoting it must not carry it on
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class FailingMemoryJob:
    """A memory job (its name has the memory prefix) whose every try fails: one try, then dead."""

    @hookimpl
    def gateway_register_jobs(self, register: JobRegistry) -> None:
        register(self.memory_probe, name="memory_probe", max_tries=1)

    async def memory_probe(self, ctx: JobContext[Any], payload: dict[str, Any]) -> None:
        raise RuntimeError(f"unusable answer from the model at https://llm.example/v1?key={SECRET}")


async def start(kith_gateway: GatewayFactory, **notice: Any) -> Gateway:
    Recorder.sent = []
    Recorder.down = False
    return await kith_gateway(plugins=(RecorderPlugin(), FailingMemoryJob()), bus=FAST_BUS,
                              llm={"provider": "echo", "api_key": SECRET},
                              background={"attention_notice": notice} if notice else {})  # fmt: skip


def operator(gw: Gateway) -> str:
    """The local owner, reachable on the recording channel they prefer."""
    uid = local_owner(gw.identities, name="Olga")
    gw.state.identities.add("recorder", "olga-dm", uid, display_name="Olga", source="test", at=T0)
    gw.state.outbox.set_prefs(uid, DeliveryPrefs(preferred_channel="recorder"))
    return uid


async def dead_letter(gw: Gateway, job_id: str = "probe-1") -> None:
    assert gw.bus is not None
    await gw.bus.enqueue("memory_probe", {"n": 1}, job_id=job_id)
    for _ in range(400):  # bounded: one try, no backoff
        await gw.settle()
        if any(d.job_id == job_id for d in await gw.bus.dead()):
            return
        await asyncio.sleep(0.025)
    raise AssertionError("the failing job never reached its dead letter")


def slot(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M")


async def run_job(gw: Gateway, at: datetime) -> None:
    """The cron job as the scheduler fires it (its payload and job id), run by the bus's worker."""
    assert gw.bus is not None
    await gw.bus.enqueue(JOB, {"slot": slot(at), "tz": "UTC", "scheduled_for": at.isoformat()},
                         job_id=f"cron:{JOB}:-:{slot(at)}")  # fmt: skip
    await gw.settle()


async def test_one_notice_a_day_while_memory_jobs_are_dead_and_none_when_healthy(
    kith_gateway: GatewayFactory,
) -> None:
    gw = await start(kith_gateway)
    uid = operator(gw)
    assert await check(gw, now=T0, slot=slot(T0)) == Outcome.HEALTHY
    assert Recorder.sent == [] and gw.state.watermarks.get(WATERMARK) == 0

    await dead_letter(gw)
    await run_job(gw, T0)  # the cron job, through the bus
    assert len(Recorder.sent) == 1, Recorder.sent
    where, text = Recorder.sent[0]
    assert where == "olga-dm"
    assert "1 memory job(s) dead-lettered (memory_probe 1)" in text
    assert "memory_probe probe-1: RuntimeError: unusable answer from the model" in text
    assert SECRET not in text and "key=***" in text
    assert "kith jobs dead" in text
    [row] = [e for e in gw.state.outbox.list_for(uid) if e.kind == "attention"]
    assert row.status == "sent" and row.notice

    # The same slot again (a retried job) and later the same day: nothing more.
    await run_job(gw, T0)
    for later in (timedelta(minutes=15), timedelta(hours=12), timedelta(hours=23, minutes=59)):
        assert await check(gw, now=T0 + later, slot=slot(T0 + later)) == Outcome.SENT_RECENTLY
    assert len(Recorder.sent) == 1

    # The next day, still dead: one more.
    day2 = T0 + timedelta(hours=24)
    assert await check(gw, now=day2, slot=slot(day2)) == Outcome.SENT
    assert len(Recorder.sent) == 2 and "dead-lettered (memory_probe 1)" in Recorder.sent[1][1]

    # Dealt with (discarded): no notice the day after, and the outbox holds just the two.
    assert gw.bus is not None and await gw.bus.discard("probe-1")
    day3 = T0 + timedelta(hours=48)
    assert await check(gw, now=day3, slot=slot(day3)) == Outcome.HEALTHY
    assert len(Recorder.sent) == 2
    assert len([e for e in gw.state.outbox.list_for(uid) if e.kind == "attention"]) == 2


async def test_a_restart_within_the_day_does_not_send_again(kith_gateway: GatewayFactory) -> None:
    gw = await start(kith_gateway)
    operator(gw)
    await dead_letter(gw)
    assert await check(gw, now=T0, slot=slot(T0)) == Outcome.SENT
    config = gw.config
    await gw.close()

    again = await kith_gateway(plugins=(RecorderPlugin(), FailingMemoryJob()), config=config)
    assert again.bus is not None and [d.job_id for d in await again.bus.dead()] == ["probe-1"]
    later = T0 + timedelta(hours=3)
    assert await check(again, now=later, slot=slot(later)) == Outcome.SENT_RECENTLY
    assert len(Recorder.sent) == 1


async def test_a_configured_operator_gets_it(kith_gateway: GatewayFactory) -> None:
    gw = await start(kith_gateway, user="ops-user")
    local_owner(gw.identities, name="Owner")  # not the one configured
    gw.state.users.ensure("ops-user", display_name="Ops", timezone="UTC")
    gw.state.identities.add("recorder", "ops-dm", "ops-user", display_name="Ops", source="test", at=T0)
    await dead_letter(gw)
    assert await check(gw, now=T0, slot=slot(T0)) == Outcome.SENT
    assert [where for where, _ in Recorder.sent] == ["ops-dm"]


async def test_off_means_off(kith_gateway: GatewayFactory) -> None:
    gw = await start(kith_gateway, enabled=False)
    operator(gw)
    await dead_letter(gw)
    await run_job(gw, T0)
    assert await check(gw, now=T0, slot=slot(T0)) == Outcome.OFF
    assert Recorder.sent == [] and gw.state.watermarks.get(WATERMARK) == 0


async def test_no_operator_sends_nothing(kith_gateway: GatewayFactory) -> None:
    gw = await start(kith_gateway, user="nobody")  # a user id that does not exist, and no owner
    await dead_letter(gw)
    assert await check(gw, now=T0, slot=slot(T0)) == Outcome.NO_OPERATOR
    assert Recorder.sent == [] and gw.state.watermarks.get(WATERMARK) == 0
