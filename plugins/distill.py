"""Built-in plugin: distillation tiers as jobs, and the ``/distill`` HTTP API (docs/memory.md).

Jobs ``distill_short`` / ``distill_mid`` / ``distill_long`` run per user at their tier's cron in the
user's timezone (a disabled tier's cron job returns at once; a manual run forces it). Each run is
recorded in ``bg_distill``; after a run of a tier listed in ``distill.notify_tiers`` a short notice
goes to ``distill.notify_conversation`` (a conversation key such as ``telegram:12345``).

HTTP, on the gateway's one aiohttp application:

* ``POST /distill/{short|mid|long}`` with ``{"user": "<id>"}`` (or ``?user=``): queues a forced run,
  answers 202 with the job id;
* ``GET /distill/status[?user=<id>]``: the last run of each tier per user, and the tier settings.

Both need ``Authorization: Bearer <server.token>``; with no token configured only loopback clients
are served (the server refuses a non-loopback bind without a token anyway).
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from gateway.bus.context import JobContext
from gateway.config import Config
from gateway.hookspecs import hookimpl
from gateway.httpauth import require_operator
from gateway.llm.provider import model_configured
from gateway.memory import jobscope, progress
from gateway.memory.distill import FILES, TIERS, DistillResult, Tier, run_tier
from gateway.types import ConversationAddress, ConversationKind, Reply

if TYPE_CHECKING:
    from gateway.app import Gateway

log = logging.getLogger("kith.plugins.distill")
_CRON: dict[str, str] = {"short": "0 3 * * *", "mid": "30 3 * * 0", "long": "0 4 1 * *"}


async def distill(gateway: Any, user_id: str, tier: Tier, *, force: bool = False,
                  now: datetime | None = None) -> DistillResult:  # fmt: skip
    """Run one tier for one user on a gateway's services, recording it (jobs and the CLI share this)."""
    cfg = gateway.config.background.distill
    scope = jobscope.for_user(gateway, user_id)
    db = gateway.state.db
    progress.distill_started(db, user_id, tier)
    providers = {"main": gateway.llm("main"), "cheap": gateway.llm("cheap")}
    try:
        result = await run_tier(tier, store=jobscope.store(gateway, scope), cfg=cfg, providers=providers,
                                now=now or datetime.now(UTC), force=force)  # fmt: skip
    except Exception as exc:
        progress.distill_finished(db, user_id, tier, "failed", f"{type(exc).__name__}: {exc}", 0)
        raise
    progress.distill_finished(db, user_id, tier, result.status, result.detail, result.chars)
    if result.status == "written" and tier in cfg.notify_tiers and cfg.notify_conversation:
        await notify(gateway, cfg.notify_conversation, f"Memory distilled for {user_id}: {result.file} "
                     f"updated ({result.chars} characters).")  # fmt: skip
    return result


async def notify(gateway: Any, conversation_key: str, text: str) -> None:
    """Best effort: a notice that cannot be delivered is logged, the distillation stands."""
    row = gateway.state.one(
        "SELECT channel, conversation_id, kind, user_id, persona FROM conversations WHERE conversation_key=?",
        conversation_key,
    )
    if row is None:
        log.warning("distill notification: conversation %s is unknown (no message seen from it)", conversation_key)
        return
    address = ConversationAddress(channel=row[0], conversation_id=row[1], kind=ConversationKind(row[2]),
                                  user_id=row[3], persona=row[4])  # fmt: skip
    try:
        await gateway.send(address, Reply(text=text, chunks=(text,), notice=True))
    except Exception as exc:
        log.warning("distill notification to %s failed: %s", conversation_key, exc)


def _job(tier: Tier) -> Any:
    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        user_id = payload.get("user_id")
        backend = getattr(ctx.gateway.config.background.distill, tier).backend
        if tier != "short" and not model_configured(ctx.gateway, backend, f"distill_{tier}", structured=True):
            return
        if isinstance(user_id, str):
            await distill(ctx.gateway, user_id, tier, force=bool(payload.get("force")))

    handler.__name__ = f"distill_{tier}"
    return handler


@hookimpl
def gateway_configure(config: Config) -> None:
    for tier in TIERS:
        _CRON[tier] = getattr(config.background.distill, tier).cron  # jobs are registered without a config


@hookimpl
def gateway_register_jobs(register: Any) -> None:
    for tier in TIERS:
        register(_job(tier), name=f"distill_{tier}", cron=_CRON[tier], timeout=600, max_tries=3)


# ------------------------------------------------------------------------------------------- HTTP


def routes(gateway: Gateway) -> list[web.RouteDef]:
    async def start(request: web.Request) -> web.Response:
        require_operator(gateway.config, request)
        tier = request.match_info["tier"]
        if tier not in TIERS:
            raise web.HTTPNotFound(text=f"unknown tier {tier!r}; one of {', '.join(TIERS)}")
        body: dict[str, Any] = {}
        if request.can_read_body:
            try:
                loaded = await request.json()
            except ValueError:
                raise web.HTTPBadRequest(text="body must be JSON") from None
            body = loaded if isinstance(loaded, dict) else {}
        user = str(body.get("user") or request.query.get("user") or "")
        if not user or gateway.state.user(user) is None:
            raise web.HTTPBadRequest(text="unknown or missing user")
        if gateway.bus is None:
            raise web.HTTPServiceUnavailable(text="the job bus is not running")
        job_id = await gateway.bus.enqueue(f"distill_{tier}", {"user_id": user, "force": True},
                                           job_id=f"distill-{tier}:{user}:{uuid.uuid4().hex[:12]}")  # fmt: skip
        return web.json_response({"job_id": job_id, "tier": tier, "user": user, "file": FILES[tier]}, status=202)

    async def status(request: web.Request) -> web.Response:
        require_operator(gateway.config, request)
        cfg = gateway.config.background.distill
        tiers = {t: {"enabled": getattr(cfg, t).enabled, "cron": getattr(cfg, t).cron,
                     "backend": getattr(cfg, t).backend, "file": FILES[t]} for t in TIERS}  # fmt: skip
        runs = progress.distill_status(gateway.state.db, request.query.get("user") or None)
        return web.json_response({"tiers": tiers, "runs": runs})

    return [web.post("/distill/{tier}", start), web.get("/distill/status", status)]


@hookimpl
def gateway_startup(gateway: Gateway) -> None:
    if not gateway.http_app.router.frozen:
        gateway.http_app.router.add_routes(routes(gateway))
