"""Accepting or rejecting a hygiene proposal: only the person decides, and only then does a file change.

Accept checks every file of the proposal against the SHA-256 it had when the proposal was made (a
file edited since, by the person, a night job or the writer, makes the proposal stale: it is marked
failed and nothing is written), then writes through the guarded store: ``write_if`` (the hash again,
under the file's lock) for new texts, ``delete`` for removed files. Every write leaves the store's
audit line with ``source="hygiene:<actor>"`` and the proposal id as ``message_id``; the changed
files are re-indexed by the store's hook and the person's session snapshots dropped
(``gateway_memory_edited``), so the next prompt sees the tidied memory.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gateway.memory.files.errors import MemoryFileNotFoundError, MemoryStoreError
from gateway.memory.hygiene import proposals as store_of
from gateway.memory.hygiene.proposals import Proposal

if TYPE_CHECKING:
    from gateway.memory.files.store import MemoryStore
    from gateway.services import Services

log = logging.getLogger("kith.hygiene")


@dataclass(frozen=True, slots=True)
class Decision:
    status: str  # accepted | rejected | stale | unknown | failed
    proposal: Proposal | None
    message: str


def sha256_of(store: MemoryStore, rel: str) -> str:
    try:
        return hashlib.sha256(store.read_bytes(rel)).hexdigest()
    except MemoryFileNotFoundError:
        return ""


def _apply(store: MemoryStore, proposal: Proposal, actor: str) -> list[str]:
    stale = [c.path for c in proposal.changes if sha256_of(store, c.path) != c.before_sha256]
    if stale:
        raise StaleProposal(stale)
    kw = {"source": f"hygiene:{actor}", "message_id": proposal.id, "trust": "user"}
    written = []
    for change in [c for c in proposal.changes if c.after is not None]:
        store.write_if(change.path, change.after or "", expected_sha256=change.before_sha256, **kw)
        written.append(change.path)
    for change in [c for c in proposal.changes if c.after is None]:
        if sha256_of(store, change.path) != change.before_sha256:
            raise StaleProposal([change.path])
        store.delete(change.path, **kw)
        written.append(change.path)
    return written


class StaleProposal(Exception):
    def __init__(self, paths: list[str]) -> None:
        super().__init__(", ".join(paths))
        self.paths = paths


def _find(items: list[Proposal], ref: str) -> Proposal | None:
    """A pending proposal by id, or by its 1-based number in the pending list (``/tidy accept 2``)."""
    pending = [p for p in items if p.status == "pending"]
    if ref.isdigit() and 1 <= int(ref) <= len(pending):
        return pending[int(ref) - 1]
    return next((p for p in pending if p.id == ref), None)


def decide_sync(store: MemoryStore, ref: str, *, accept: bool, actor: str) -> Decision:
    with store_of.editing(store.root) as items:
        proposal = _find(items, ref.strip())
        if proposal is None:
            return Decision("unknown", None, f"No pending proposal {ref!r}; /tidy lists them.")
        proposal.decided = datetime.now(UTC).isoformat(timespec="seconds")
        proposal.actor = actor
        if not accept:
            proposal.status = "rejected"
            return Decision("rejected", proposal, f"Dropped: {proposal.title}. Nothing was changed.")
        try:
            written = _apply(store, proposal, actor)
        except StaleProposal as exc:
            proposal.status, proposal.reason = "failed", f"changed since it was proposed: {exc}"
            return Decision("stale", proposal, f"Not applied: {exc} changed since this was proposed. "
                                               "The next weekly check looks again.")
        except MemoryStoreError as exc:
            proposal.status, proposal.reason = "failed", f"{type(exc).__name__}: {exc}"
            log.warning("hygiene proposal %s failed: %s", proposal.id, exc)
            return Decision("failed", proposal, f"Not applied: {exc}")
        proposal.status = "accepted"
        log.info("hygiene proposal %s (%s) accepted by %s: %s", proposal.id, proposal.kind, actor, ", ".join(written))
        return Decision("accepted", proposal, f"Done: {proposal.title} ({', '.join(written)}).")


async def decide(gateway: Services, user_id: str, ref: str, *, accept: bool, actor: str) -> Decision:
    store = gateway.memory_store(user_id)
    result = await asyncio.to_thread(decide_sync, store, ref, accept=accept, actor=actor)
    if result.status in ("accepted", "failed") and result.proposal is not None:
        await gateway.hooks.memory_edited(gateway, user_id=user_id, paths=result.proposal.paths)
    return result
