"""Built-in plugin: the nightly sleep cycle, per user and per group conversation (docs/knowledge.md).

* ``sleep_cycle``: cron ``background.sleep.cron`` per user, in the user's timezone. One night of
  ``gateway.memory.sleep`` for the user's direct conversations, ending with USER.md curation.
* ``sleep_groups``: cron ``background.sleep.group_cron`` once, in the gateway's timezone; queues one
  ``sleep_channel`` job per group conversation with turns the cycle has not seen yet.
* ``sleep_channel``: one night of a group conversation, into its channel root (no curation).

A failing night (model unavailable, unusable output) raises: the bus retries it with backoff and
dead-letters it after ``max_tries``; nothing was written and the turns stay for the next night.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from gateway.bus.context import JobContext
from gateway.config import Config
from gateway.hookspecs import hookimpl
from gateway.llm.provider import model_configured
from gateway.memory import jobscope, progress
from gateway.memory.sleep import NightResult, NightScope, run_night

log = logging.getLogger("kith.plugins.sleep_cycle")
_CRON = {"user": "0 3 * * *", "groups": "30 3 * * *"}


def _instant(payload: dict[str, Any]) -> datetime:
    raw = payload.get("scheduled_for")
    return datetime.fromisoformat(raw).astimezone(UTC) if isinstance(raw, str) else datetime.now(UTC)


def _slot(payload: dict[str, Any], at: datetime) -> str:
    slot = payload.get("slot")
    return slot if isinstance(slot, str) and slot else at.strftime("%Y-%m-%dT%H:%M")


async def night(gateway: Any, scope: jobscope.JobScope, *, slot: str, before: datetime,
                curate: bool) -> NightResult:  # fmt: skip
    """One night of one scope on a gateway's services (jobs, CLI and benchmark share this)."""
    bg = gateway.config.background
    if gateway.kg is None:
        raise RuntimeError("the gateway has no knowledge graph")
    names = jobscope.display_names(gateway, scope.user_id) if scope.user_id else ()
    ns = NightScope(key=scope.memory_scope, sessions=scope.sessions, kg_scope=scope.kg_scope,
                    self_id=scope.user_id, self_names=names, curate=curate)  # fmt: skip
    return await run_night(
        db=gateway.state.db, kg=gateway.kg, store=jobscope.store(gateway, scope),
        provider=gateway.llm(bg.sleep.backend), curation_provider=gateway.llm(bg.sleep.curation_backend),
        scope=ns, slot=slot, before=before, tz=scope.tz, cfg=bg.sleep, rails=bg.curation,
    )  # fmt: skip


def _runs(gw: Any, job: str) -> bool:
    """Nights are on and a model can do them."""
    sleep = gw.config.background.sleep
    return bool(sleep.enabled) and model_configured(gw, sleep.backend, job, structured=True)


async def sleep_cycle(ctx: JobContext, payload: dict[str, Any]) -> None:
    gw = ctx.gateway
    user_id = payload.get("user_id")
    if not isinstance(user_id, str) or not _runs(gw, "sleep_cycle"):
        return
    at = _instant(payload)
    await night(gw, jobscope.for_user(gw, user_id), slot=_slot(payload, at), before=at, curate=True)


async def sleep_groups(ctx: JobContext, payload: dict[str, Any]) -> None:
    gw = ctx.gateway
    cfg = gw.config.background.sleep
    if not (cfg.enabled and cfg.groups):
        return
    at = _instant(payload)
    slot = _slot(payload, at)
    rows = gw.state.all("SELECT conversation_key FROM conversations WHERE kind='group' ORDER BY conversation_key")
    for (key,) in rows:
        scope = jobscope.for_conversation(gw, key)
        last = progress.sleep_last_seq(gw.state.db, scope.memory_scope)
        newer = gw.state.one(
            "SELECT 1 FROM turns t JOIN sessions s ON s.session_id=t.session_id WHERE s.scope_key=? AND t.seq>? "
            "LIMIT 1", scope.sessions, last,
        )  # fmt: skip
        if newer is not None:
            payload_out = {"conversation_key": key, "slot": slot, "scheduled_for": at.isoformat()}
            await ctx.bus.enqueue("sleep_channel", payload_out, job_id=f"sleep-channel:{scope.memory_scope}:{slot}")


async def sleep_channel(ctx: JobContext, payload: dict[str, Any]) -> None:
    gw = ctx.gateway
    key = payload.get("conversation_key")
    if not isinstance(key, str) or not _runs(gw, "sleep_channel"):
        return
    at = _instant(payload)
    await night(gw, jobscope.for_conversation(gw, key), slot=_slot(payload, at), before=at, curate=False)


@hookimpl
def gateway_configure(config: Config) -> None:
    # Cron expressions are needed when jobs are registered, which the hook gives no config to.
    _CRON["user"], _CRON["groups"] = config.background.sleep.cron, config.background.sleep.group_cron


@hookimpl
def gateway_register_jobs(register: Any) -> None:
    register(sleep_cycle, name="sleep_cycle", cron=_CRON["user"], timeout=900, max_tries=4)
    register(sleep_groups, name="sleep_groups", cron=_CRON["groups"], per_user=False, timeout=120)
    register(sleep_channel, name="sleep_channel", timeout=900, max_tries=4)
