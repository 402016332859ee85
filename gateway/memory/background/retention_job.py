"""The retention job for one scope: dated files, their derived chunks, ended facts.

The rule (``retention_cutoff.py``): on local date D with N days of retention, the oldest kept day is D - N.

* Dated files in ``memories/`` and ``sessions/`` (nightly memories, raw session logs, writer summaries)
  older than that day are deleted through the guarded store; each delete is audited and re-indexes
  the path, which removes its chunks. A file's own audit (``<file>.audit.jsonl``) and the pre-run
  copies it names (``_history/``, kept for rollback) are deleted with it.
* Transcript turns are indexed under ``sessions/<UTC date>.md`` even when the log file is named by
  local date, so every such path of an expired UTC day is re-indexed too: with no file behind it,
  its chunks go. Days already handled by an earlier run are not visited again (``bg_retention``).
* Facts whose validity ended before local midnight of that day are deleted from the graph.

Never by age: USER.md and its audit, PATTERNS.md, the distillation tiers, people/, topics/, notes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import Any

from gateway.memory.background.retention_cutoff import cutoff_date, cutoff_instant, enabled, expired_dated_files
from gateway.memory.curation import audit as curation_audit
from gateway.memory.files.store import MemoryStore
from gateway.memory.knowledge.graph import KnowledgeGraph
from gateway.state import State

log = logging.getLogger("kith.memory.prune")
DATED = ("memories/", "sessions/")
SOURCE = "retention"


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneReport:
    scope: str
    cutoff: str  # oldest local day kept
    files: tuple[str, ...] = ()
    chunk_paths: tuple[str, ...] = ()
    facts: int = 0


def _chunk_days(first: date | None, cutoff_utc: datetime) -> list[date]:
    """UTC days whose turn chunks are wholly expired: those that ended by the cutoff instant. A day
    the cutoff falls inside is left for the next run (when it is wholly expired)."""
    last = cutoff_utc.date() - timedelta(days=1)
    if first is None or first > last:
        return []
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def prune_scope(
    *,
    store: MemoryStore,
    kg: KnowledgeGraph,
    scope: str,
    kg_scope: str,
    retention_days: int,
    tz: tzinfo,
    now: datetime,
    reindex: Callable[[str], Any] | None = None,
    turns_since: date | None = None,
) -> PruneReport:
    """Blocking (run it in a thread). ``reindex(rel)`` drops a deleted path's chunks (the memory
    service's ``index_path``); ``turns_since`` is the oldest UTC day that may still have turn chunks
    (None: no turns to visit)."""
    if not enabled(retention_days):
        return PruneReport(scope=scope, cutoff="")
    oldest = cutoff_date(now, retention_days, tz)
    cut = cutoff_instant(now, retention_days, tz)
    rels = [e.path for e in store.files() if e.path.startswith(DATED)]
    files = expired_dated_files(rels, now=now, retention_days=retention_days, tz=tz, dirs=DATED)
    for rel in files:
        store.delete(rel, source=SOURCE)
        # The writer's audit of a slot summary and its pre-run copies (_history/) go with it.
        curation_audit.drop_history(store, rel, source=SOURCE)
    chunk_paths: list[str] = []
    if reindex is not None:
        for day in _chunk_days(turns_since, cut):
            rel = f"sessions/{day.isoformat()}.md"
            if rel not in files and not store.exists(rel):
                reindex(rel)
                chunk_paths.append(rel)
        for rel in files:
            reindex(rel)  # the store's own hook may be absent (CLI, tests); re-indexing twice is harmless
    facts = kg.prune_expired(cut, user_id=kg_scope)
    if files or facts:
        log.info("retention %s: kept from %s; deleted %d files, %d facts", scope, oldest, len(files), facts)
    return PruneReport(scope=scope, cutoff=oldest.isoformat(), files=tuple(files), chunk_paths=tuple(chunk_paths),
                       facts=facts)  # fmt: skip


async def run_retention(
    *,
    state: State,
    store: MemoryStore,
    kg: KnowledgeGraph,
    scope: str,
    sessions_scope: str,
    kg_scope: str,
    retention_days: int,
    tz: tzinfo,
    now: datetime,
    reindex: Callable[[str], Any] | None = None,
) -> PruneReport:
    """The job body: state bookkeeping on the caller's thread, files and facts in a worker thread."""
    since = first_turn_day(state, sessions_scope)
    done = state.retention.get(scope)
    if since is not None and done is not None:
        since = max(since, done.date() - timedelta(days=1))  # earlier days were visited before
    report = await asyncio.to_thread(
        prune_scope, store=store, kg=kg, scope=scope, kg_scope=kg_scope, retention_days=retention_days, tz=tz,
        now=now, reindex=reindex, turns_since=since,
    )  # fmt: skip
    if enabled(retention_days):
        state.retention.set(scope, cutoff_instant(now, retention_days, tz))
    return report


def first_turn_day(state: State, scope_key: str) -> date | None:
    first = state.turns.first_in_scope(scope_key)
    return first.date() if first is not None else None
