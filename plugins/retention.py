"""Built-in plugin: the retention job (``background.retention.memory_retention_days``; docs/knowledge.md).

``retention`` runs per user at ``background.retention.cron`` in the user's timezone;
``retention_groups`` runs once per slot in the gateway's timezone over every group conversation.
Both delete expired dated files and their derived chunks and prune facts that ended before the
cutoff; the profile and the tiers are never pruned by age. With 0 days (the default) nothing runs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gateway.bus.context import JobContext
from gateway.bus.registry import JobRegistry
from gateway.config import Config
from gateway.hookspecs import hookimpl
from gateway.memory.background import jobscope
from gateway.memory.background.retention_job import PruneReport, run_retention


def _now(payload: dict[str, Any]) -> datetime:
    raw = payload.get("scheduled_for")
    return datetime.fromisoformat(raw).astimezone(UTC) if isinstance(raw, str) else datetime.now(UTC)


async def prune(gateway: Any, scope: jobscope.JobScope, now: datetime) -> PruneReport:
    memory = gateway.memory
    sink = memory.indexing.index_sink or memory.indexing.enqueue_local

    def reindex(rel: str) -> None:
        sink(scope.memory_scope, rel)

    return await run_retention(
        state=gateway.state, store=jobscope.store(gateway, scope), kg=gateway.kg, scope=scope.memory_scope,
        sessions_scope=scope.sessions, kg_scope=scope.kg_scope,
        retention_days=gateway.config.background.retention.memory_retention_days, tz=scope.tz, now=now,
        reindex=reindex,
    )  # fmt: skip


async def retention(ctx: JobContext, payload: dict[str, Any]) -> None:
    gw = ctx.gateway
    user_id = payload.get("user_id")
    if gw.config.background.retention.memory_retention_days > 0 and isinstance(user_id, str):
        await prune(gw, jobscope.for_user(gw, user_id), _now(payload))


async def retention_groups(ctx: JobContext, payload: dict[str, Any]) -> None:
    gw = ctx.gateway
    if gw.config.background.retention.memory_retention_days <= 0:
        return
    for key in gw.state.conversations.group_keys():
        await prune(gw, jobscope.for_conversation(gw, key), _now(payload))


@hookimpl
def gateway_register_jobs(register: JobRegistry, config: Config) -> None:
    cron = config.background.retention.cron
    register(retention, name="retention", cron=cron, timeout=600, max_tries=3)
    register(retention_groups, name="retention_groups", cron=cron, per_user=False, timeout=1800, max_tries=3)
