"""One hygiene pass over a person's memory: find, propose, store. Nothing in the memory changes here.

Deterministic checks first (duplicate people files, ``duplicates.py``), then, when a model can do
it, the judged findings (``judged.py``). A finding already proposed (pending, accepted, rejected or
failed: by its fingerprint) is not proposed again, and at most ``max_proposals`` wait at once.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from gateway.memory.background.jobscope import zone
from gateway.memory.hygiene import duplicates, judged
from gateway.memory.hygiene import proposals as stored
from gateway.memory.hygiene.proposals import Proposal

if TYPE_CHECKING:
    from gateway.memory.files.store import MemoryStore
    from gateway.services import Services

log = logging.getLogger("kith.hygiene")


@dataclass(slots=True)
class RunReport:
    added: list[Proposal] = field(default_factory=list)
    pending: int = 0
    model: str = "off"  # off | used | failed
    errors: list[str] = field(default_factory=list)


def _store(store: MemoryStore, found: list[Proposal], cap: int) -> tuple[list[Proposal], int]:
    with stored.editing(store.root) as items:
        known = {p.fingerprint for p in items}
        room = cap - sum(1 for p in items if p.status == "pending")
        added = []
        for p in found:
            if p.fingerprint in known or room <= 0:
                continue
            known.add(p.fingerprint)
            items.append(p)
            added.append(p)
            room -= 1
        return added, sum(1 for p in items if p.status == "pending")


async def run_hygiene(gateway: Services, user_id: str, *, use_model: bool | None = None) -> RunReport:
    cfg = gateway.config.background.hygiene
    store = gateway.memory_store(user_id)
    report = RunReport()
    found = await asyncio.to_thread(duplicates.proposals, store)
    if cfg.use_model if use_model is None else use_model:
        from gateway.llm.provider import model_configured

        if model_configured(gateway, cfg.backend, "memory_hygiene", structured=True, user_id=user_id):
            files = await asyncio.to_thread(judged.gather, store)
            if files:
                user = gateway.state.users.get(user_id)
                today = datetime.now(zone(user.timezone if user else None, gateway.config.timezone)).date()
                text = judged.prompt(files, today, cfg.stale_days)
                try:
                    answer = await gateway.model(cfg.backend, user_id).complete(judged.request(cfg.backend, text))
                    more, errors = judged.parse(answer.text, files, store)
                    found += more
                    report.errors += errors
                    report.model = "used"
                except Exception as exc:  # the deterministic findings are still worth proposing
                    report.model = "failed"
                    report.errors.append(f"{type(exc).__name__}: {exc}")
                    log.warning("memory hygiene for %s: the model failed (%s); deterministic checks only", user_id, exc)
    report.added, report.pending = await asyncio.to_thread(_store, store, found, cfg.max_proposals)
    log.info("memory hygiene for %s: %d new proposal(s), %d pending (model %s)", user_id, len(report.added),
             report.pending, report.model)
    return report
