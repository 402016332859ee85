"""Built-in plugin: distillation tiers as jobs, and the operator's distillation routes (docs/memory.md).

Jobs ``distill_short`` / ``distill_mid`` / ``distill_long`` run per user at their tier's cron in the
user's timezone (a disabled tier's cron job returns at once; a manual run forces it). Each run is
recorded in ``bg_distill``; after a run of a tier listed in ``distill.notify_tiers`` a short notice
goes to the person's own notification conversation (their ``notify_conversation`` setting, through
the outbox: docs/proactive.md) and, deprecated, the operator's copy to ``distill.notify_conversation``
(a conversation key such as ``telegram:12345``).

HTTP, declared through ``gateway_register_routes`` (docs/api.md; operator only, in the OpenAPI document):

* ``POST /api/users/{uid}/distill/{short|mid|long}``: queues a forced run, answers 202 with the job id;
* ``GET /api/distill[?user=<id>]``: the last run of each tier per user, and the tier settings.

A person's own tiers and their last runs are ``GET /api/users/{uid}/distill`` (the memory console).
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import Field

from gateway.bus.context import JobContext
from gateway.bus.registry import JobRegistry
from gateway.config import Config
from gateway.delivery.notices import notify_operator, notify_person
from gateway.hookspecs import hookimpl
from gateway.http.api.registry import RouteRegistry
from gateway.http.api.spec import Answer, ApiError, Call, Query, Route
from gateway.llm.provider import model_configured
from gateway.memory.background import jobscope
from gateway.memory.background.distill import FILES, TIERS, DistillResult, Tier, run_tier

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.plugins.distill")


async def distill(gateway: Services, user_id: str, tier: Tier, *, force: bool = False,
                  now: datetime | None = None) -> DistillResult:  # fmt: skip
    """Run one tier for one user on a gateway's services, recording it (jobs and the CLI share this)."""
    cfg = gateway.config.background.distill
    scope = jobscope.for_user(gateway, user_id)
    runs = gateway.state.distill_runs
    runs.started(user_id, tier)
    providers = {role: gateway.model(role, user_id) for role in gateway.config.llm.role_names()}
    try:
        result = await run_tier(tier, store=jobscope.store(gateway, scope), cfg=cfg, providers=providers,
                                now=now or datetime.now(UTC), force=force)  # fmt: skip
    except Exception as exc:
        runs.finished(user_id, tier, "failed", f"{type(exc).__name__}: {exc}", 0)
        raise
    runs.finished(user_id, tier, result.status, result.detail, result.chars)
    if result.status == "written" and tier in cfg.notify_tiers:
        # The person's own notification conversation (gateway/delivery/notices.py) ...
        await notify_person(gateway, user_id, f"Memory distilled: {result.file} updated ({result.chars} characters).")
        if cfg.notify_conversation:  # ... and the operator's copy: the old global key, deprecated
            await notify_operator(gateway, cfg.notify_conversation, f"Memory distilled for {user_id}: {result.file} "
                                  f"updated ({result.chars} characters).", what="distill notification")  # fmt: skip
    return result


def _job(tier: Tier) -> Any:
    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        user_id = payload.get("user_id")
        backend = getattr(ctx.gateway.config.background.distill, tier).backend
        if tier != "short" and not model_configured(ctx.gateway, backend, f"distill_{tier}", structured=True,
                                                    user_id=user_id if isinstance(user_id, str) else ""):
            return
        if isinstance(user_id, str):
            await distill(ctx.gateway, user_id, tier, force=bool(payload.get("force")))

    handler.__name__ = f"distill_{tier}"
    return handler


@hookimpl
def gateway_register_jobs(register: JobRegistry, config: Config) -> None:
    for tier in TIERS:
        cron = getattr(config.background.distill, tier).cron
        register(_job(tier), name=f"distill_{tier}", cron=cron, timeout=600, max_tries=3)


# ------------------------------------------------------------------------------------------- HTTP


class Queued(Answer):
    job_id: str
    tier: str
    user: str
    file: str = Field(description="the tier's file in the person's memory")


class TierSettings(Answer):
    enabled: bool
    cron: str
    backend: str
    file: str


class StatusQuery(Query):
    user: str | None = Field(None, min_length=1, max_length=200, description="one person; absent: everyone")


class Status(Answer):
    tiers: dict[str, TierSettings]
    runs: list[dict[str, Any]] = Field(description="the last run of each tier per user")


async def start(call: Call) -> Queued:
    user = call.user_id()
    tier = call.param("tier")
    if tier not in TIERS:
        raise ApiError(404, f"unknown tier {tier!r}; one of {', '.join(TIERS)}")
    bus = call.gateway.bus
    if bus is None:
        raise ApiError(503, "the job bus is not running")
    job_id = await bus.enqueue(f"distill_{tier}", {"user_id": user, "force": True},
                               job_id=f"distill-{tier}:{user}:{uuid.uuid4().hex[:12]}")  # fmt: skip
    return Queued(job_id=job_id, tier=tier, user=user, file=FILES[tier])


async def status(call: Call) -> Status:
    cfg = call.gateway.config.background.distill
    tiers = {t: TierSettings(enabled=getattr(cfg, t).enabled, cron=getattr(cfg, t).cron,
                             backend=getattr(cfg, t).backend, file=FILES[t]) for t in TIERS}  # fmt: skip
    query: StatusQuery = call.query
    return Status(tiers=tiers, runs=call.gateway.state.distill_runs.status(query.user))


ROUTES = [
    Route("POST", "/api/users/{uid}/distill/{tier}", "run a distillation tier for a person now (operator)", Queued,
          start, operator=True, status=202, tag="operator", errors=(401, 403, 404, 503),
          params={"tier": {"type": "string", "enum": list(TIERS)}},
          description="Queues a forced run on the job bus; the person's tiers show it when it is done."),
    Route("GET", "/api/distill", "the distillation tiers' settings and every person's last runs (operator)", Status,
          status, query=StatusQuery, operator=True, tag="operator", errors=(400, 401, 403)),
]


@hookimpl
def gateway_register_routes(register: RouteRegistry) -> None:
    for route in ROUTES:
        register(route)
