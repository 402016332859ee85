"""Built-in plugin: the retention job (``background.retention.memory_retention_days``; docs/knowledge.md).

``retention`` runs per user at ``background.retention.cron`` in the user's timezone;
``retention_groups`` runs once per slot in the gateway's timezone over every group conversation.
Both delete expired dated files and their derived chunks and prune facts that ended before the
cutoff; the profile and the tiers are never pruned by age. With 0 days (the default) nothing is
pruned. Groups keep their memory for ``group_retention_days`` (unset: the same days as a person's).
``retention`` also deletes the person's forget undo records whose window has closed
(``gateway.memory.edit.undo.KEEP_DAYS``), whatever the retention days.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gateway.bus.context import JobContext
from gateway.bus.registry import JobRegistry
from gateway.config import Config
from gateway.hookspecs import hookimpl
from gateway.memory.background import jobscope
from gateway.memory.background.retention_job import PruneReport, run_retention
from gateway.memory.edit import undo
from gateway.memory.files.scopes import root_for, user_scope

if TYPE_CHECKING:
    from gateway.services import Services


def _now(payload: dict[str, Any]) -> datetime:
    raw = payload.get("scheduled_for")
    return datetime.fromisoformat(raw).astimezone(UTC) if isinstance(raw, str) else datetime.now(UTC)


async def prune(gateway: Services, scope: jobscope.JobScope, now: datetime, days: int) -> PruneReport:
    memory = gateway.memory
    sink = memory.indexing.index_sink or memory.indexing.enqueue_local

    def reindex(rel: str) -> None:
        sink(scope.memory_scope, rel)

    return await run_retention(
        state=gateway.state, store=jobscope.store(gateway, scope), kg=gateway.kg, scope=scope.memory_scope,
        sessions_scope=scope.sessions, kg_scope=scope.kg_scope,
        retention_days=days, tz=scope.tz, now=now,
        reindex=reindex,
    )  # fmt: skip


async def retention(ctx: JobContext, payload: dict[str, Any]) -> None:
    gw = ctx.gateway
    user_id = payload.get("user_id")
    if not isinstance(user_id, str):
        return
    # The undo window of the person's forgets closes here too, not only at their next forget: what
    # they forgot then leaves the data dir for good (issue 28). The root is not opened as a store,
    # which would create the folder of a person erased meanwhile.
    await asyncio.to_thread(undo.expire, root_for(gw.data_dir, user_scope(user_id)))
    days = gw.config.background.retention.memory_retention_days
    if days > 0:
        await prune(gw, jobscope.for_user(gw, user_id), _now(payload), days)


async def retention_groups(ctx: JobContext, payload: dict[str, Any]) -> None:
    gw = ctx.gateway
    days = gw.config.background.retention.group_days  # group and channel memory: a setting of its own
    if days <= 0:
        return
    for key in gw.state.conversations.group_keys():
        await prune(gw, jobscope.for_conversation(gw, key), _now(payload), days)


@hookimpl
def gateway_register_jobs(register: JobRegistry, config: Config) -> None:
    cron = config.background.retention.cron
    register(retention, name="retention", cron=cron, timeout=600, max_tries=3)
    register(retention_groups, name="retention_groups", cron=cron, per_user=False, timeout=1800, max_tries=3)
