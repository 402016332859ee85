"""Built-in plugin: the nightly sleep cycle, per user and per group conversation (docs/knowledge.md).

* ``sleep_cycle``: cron ``background.sleep.cron`` per user, in the user's timezone. One night of
  ``gateway.memory.background.sleep`` for the user's direct conversations, ending with USER.md curation.
* ``sleep_groups``: cron ``background.sleep.group_cron`` once, in the gateway's timezone; queues one
  ``sleep_channel`` job per group conversation with turns the cycle has not seen yet.
* ``sleep_channel``: one night of a group conversation, into its channel root (no curation).

After a person's night, a one-line summary of its curation (seed 004) goes to their notification
conversation, if they chose one, and to ``background.sleep.curation_log_conversation``, if set
(``curation_summary: false`` turns both off). Best effort: an undeliverable line is logged.

A failing night (model unavailable, unusable output) raises: the bus retries it with backoff and
dead-letters it after ``max_tries``; nothing was written and the turns stay for the next night.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gateway.bus.context import JobContext
from gateway.bus.registry import JobRegistry
from gateway.config import Config
from gateway.delivery.notices import notify_operator, notify_person
from gateway.hookspecs import hookimpl
from gateway.llm.provider import model_configured
from gateway.memory.background import jobscope
from gateway.memory.background.sleep import NightResult, NightScope, run_night

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.plugins.sleep_cycle")


def _instant(payload: dict[str, Any]) -> datetime:
    raw = payload.get("scheduled_for")
    return datetime.fromisoformat(raw).astimezone(UTC) if isinstance(raw, str) else datetime.now(UTC)


def _slot(payload: dict[str, Any], at: datetime) -> str:
    slot = payload.get("slot")
    return slot if isinstance(slot, str) and slot else at.strftime("%Y-%m-%dT%H:%M")


async def night(gateway: Services, scope: jobscope.JobScope, *, slot: str, before: datetime,
                curate: bool) -> NightResult:  # fmt: skip
    """One night of one scope on a gateway's services (jobs, CLI and benchmark share this)."""
    bg = gateway.config.background
    if gateway.kg is None:
        raise RuntimeError("the gateway has no knowledge graph")
    names = jobscope.display_names(gateway, scope.user_id) if scope.user_id else ()
    ns = NightScope(key=scope.memory_scope, sessions=scope.sessions, kg_scope=scope.kg_scope,
                    self_id=scope.user_id, self_names=names, curate=curate)  # fmt: skip
    return await run_night(
        state=gateway.state, kg=gateway.kg, store=jobscope.store(gateway, scope),
        provider=gateway.model(bg.sleep.backend, scope.user_id),
        curation_provider=gateway.model(bg.sleep.curation_backend, scope.user_id),
        scope=ns, slot=slot, before=before, tz=scope.tz, cfg=bg.sleep, rails=bg.curation,
    )  # fmt: skip


def _runs(gw: Services, job: str, user_id: str = "") -> bool:
    """Nights are on and a model can do them (within the person's daily budget)."""
    sleep = gw.config.background.sleep
    return bool(sleep.enabled) and model_configured(gw, sleep.backend, job, structured=True, user_id=user_id)


async def _night_job(ctx: JobContext, payload: dict[str, Any], *, job: str, key: str,
                     scope_of: Callable[[Services, str], jobscope.JobScope], curate: bool) -> None:  # fmt: skip
    """One night of the scope ``payload[key]`` names (a user id, a conversation key), if nights run."""
    gw = ctx.gateway
    name = payload.get(key)
    if not isinstance(name, str) or not _runs(gw, job):
        return
    scope = scope_of(gw, name)
    if scope.user_id and not _runs(gw, job, scope.user_id):
        return
    at = _instant(payload)
    result = await night(gw, scope, slot=_slot(payload, at), before=at, curate=curate)
    if curate and scope.user_id:
        await summarise(gw, scope.user_id, result)


def summary_line(result: NightResult) -> str | None:
    """The night's curation in one line, or None when there is nothing to say (no curation ran)."""
    if result.status != "done" or not result.curation or result.curation == "already curated":
        return None
    return (f"Memory curation, night of {result.day}: {result.turns} turns read, {result.memories} memories kept; "
            f"profile {result.curation}")


async def summarise(gw: Services, user_id: str, result: NightResult) -> None:
    cfg = gw.config.background.sleep
    line = summary_line(result)
    if line is None or not cfg.curation_summary:
        return
    await notify_person(gw, user_id, line, delivery_id=f"curation:{user_id}:{result.slot}")
    if cfg.curation_log_conversation:
        # The operator's log conversation: best effort, the night stands whatever happens there.
        await notify_operator(gw, cfg.curation_log_conversation, f"[{user_id}] {line}", what="curation summary")


async def sleep_cycle(ctx: JobContext, payload: dict[str, Any]) -> None:
    await _night_job(ctx, payload, job="sleep_cycle", key="user_id", scope_of=jobscope.for_user, curate=True)


async def sleep_groups(ctx: JobContext, payload: dict[str, Any]) -> None:
    gw = ctx.gateway
    cfg = gw.config.background.sleep
    if not (cfg.enabled and cfg.groups):
        return
    at = _instant(payload)
    slot = _slot(payload, at)
    for key in gw.state.conversations.group_keys():
        scope = jobscope.for_conversation(gw, key)
        last = gw.state.sleep_runs.last_seq(scope.memory_scope)
        newer = gw.state.turns.any_in_scope_after(scope.sessions, last)
        if newer:
            payload_out = {"conversation_key": key, "slot": slot, "scheduled_for": at.isoformat()}
            await ctx.bus.enqueue("sleep_channel", payload_out, job_id=f"sleep-channel:{scope.memory_scope}:{slot}")


async def sleep_channel(ctx: JobContext, payload: dict[str, Any]) -> None:
    await _night_job(ctx, payload, job="sleep_channel", key="conversation_key",
                     scope_of=jobscope.for_conversation, curate=False)  # fmt: skip


@hookimpl
def gateway_register_jobs(register: JobRegistry, config: Config) -> None:
    sleep = config.background.sleep
    register(sleep_cycle, name="sleep_cycle", cron=sleep.cron, timeout=900, max_tries=4)
    register(sleep_groups, name="sleep_groups", cron=sleep.group_cron, per_user=False, timeout=120)
    register(sleep_channel, name="sleep_channel", timeout=900, max_tries=4)
