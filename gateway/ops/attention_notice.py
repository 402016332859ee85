"""The operator's notice about memory jobs that need attention: one a day at most (issue 28).

``kith doctor``, ``/healthz`` and the console's "needs attention" list show dead-lettered and
repeatedly failing memory jobs to whoever looks. An operator who does not look would never learn
that people's memory has stopped growing, so the job ``attention_notice`` (cron
``background.attention_notice.cron``, once per slot in the whole cluster) reads the same view
(gateway/ops/memory_jobs.py) and, when something needs attention and no notice went out in the last
24 hours, sends one through the outbox: recorded, routed to the operator's notification conversation
or preferred channel, retried, held through their quiet hours (gateway/delivery/routing.py).

* **Who**: ``background.attention_notice.user`` (a user id), else the local owner
  (gateway/identity/owner.py). Neither: nothing is sent, and a warning is logged.
* **Once a day**: the time of the last notice is the ``watermarks`` row ``ops.attention_notice``
  (Unix seconds), written after the outbox recorded the notice, so a restart does not send again
  within the day. The delivery id is the cron slot's, so a retried job records the notice once.
  A day later it is sent again if jobs still need attention; never while all is well.
* **What**: the count per job and the last line of the newest error, as doctor shows them (job
  names and ids, never payloads), with any configured secret replaced by ``***``.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from gateway.bus.context import JobContext
from gateway.bus.registry import JobRegistry
from gateway.config import Config
from gateway.delivery.outbox import deliver
from gateway.hookspecs import hookimpl
from gateway.identity.owner import OWNER_ACCOUNT, OWNER_CHANNEL
from gateway.logs import collect_secrets
from gateway.ops.memory_jobs import MemoryJobs, memory_jobs

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.ops.attention_notice")

JOB = "attention_notice"  # not a memory job's prefix: a failing notice never counts itself
KIND = "attention"
WATERMARK = "ops.attention_notice"
INTERVAL = timedelta(hours=24)


class Outcome(StrEnum):
    OFF = "off"
    HEALTHY = "healthy"
    SENT_RECENTLY = "sent recently"
    NO_OPERATOR = "no operator"
    SENT = "sent"


def operator_of(gateway: Services) -> str | None:
    """The user id the notice goes to: the configured one while that person exists, else the owner."""
    configured = gateway.config.background.attention_notice.user
    if configured:
        return configured if gateway.state.users.get(configured) is not None else None
    return gateway.identities.lookup(OWNER_CHANNEL, OWNER_ACCOUNT)


def notice_text(found: MemoryJobs, secrets: list[str]) -> str:
    lines = ["kith: memory jobs need attention, so what people tell the assistant may not be remembered.",
             *(f"- {problem}" for problem in found.problems()),
             "`kith doctor` shows the state, `kith jobs dead` the jobs and their errors, `kith jobs retry ID` "
             "queues one again (or the console's Needs attention list). At most one such notice a day "
             "(background.attention_notice)."]  # fmt: skip
    text = "\n".join(lines)
    for secret in sorted((s for s in secrets if len(s) >= 6), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


async def check(gateway: Services, *, now: datetime, slot: str) -> Outcome:
    """One look: send the notice when memory jobs need attention and none went out within a day."""
    cfg = gateway.config.background.attention_notice
    if not cfg.enabled or gateway.bus is None:
        return Outcome.OFF
    found = await memory_jobs(gateway.bus.redis, gateway.bus.keys)
    if found.ok:
        return Outcome.HEALTHY
    last = gateway.state.watermarks.get(WATERMARK)
    # A last time in the future (the clock was set back) does not silence the notice for good.
    if last and 0 <= now.timestamp() - last < INTERVAL.total_seconds():
        return Outcome.SENT_RECENTLY
    operator = operator_of(gateway)
    if operator is None:
        log.warning("memory jobs need attention and there is no operator to tell: set "
                    "background.attention_notice.user, or sign in once as the local owner")  # fmt: skip
        return Outcome.NO_OPERATOR
    await deliver(gateway, user_id=operator, text=notice_text(found, collect_secrets(gateway.config)), kind=KIND,
                  origin=None, delivery_id=f"{KIND}:{operator}:{slot}", notice=True)  # fmt: skip
    gateway.state.watermarks.set(WATERMARK, int(now.timestamp()))
    log.info("told the operator %s: %d dead-lettered, %d failing memory job(s)", operator, found.dead, found.failing)
    return Outcome.SENT


async def attention_notice(ctx: JobContext[Services], payload: dict[str, Any]) -> None:
    raw = payload.get("scheduled_for")
    now = datetime.fromisoformat(raw).astimezone(UTC) if isinstance(raw, str) else datetime.now(UTC)
    slot = payload.get("slot")
    await check(ctx.gateway, now=now, slot=slot if isinstance(slot, str) and slot else now.strftime("%Y-%m-%dT%H:%M"))


@hookimpl
def gateway_register_jobs(register: JobRegistry, config: Config) -> None:
    register(attention_notice, name=JOB, cron=config.background.attention_notice.cron, per_user=False, timeout=60,
             max_tries=2)  # fmt: skip
