"""Deleting one past conversation (the web chat's History, ``DELETE /api/users/{uid}/sessions/{sid}``).

What goes is the conversation itself, everywhere kith keeps it:

* its transcript rows, and with them its full-text search entries, what the model saw per turn, its
  compaction summary, its title and the session (``State.turns.delete_session``);
* its blocks in the person's session logs (``sessions/YYYY-MM-DD.md``), the other conversations of those
  days kept as they are;
* its turns in the memory index (the points of the changed logs, and every ``t:<turn id>`` point, also
  one indexed live before its log block existed), so neither recall nor semantic search finds it;
* the copies left on disk: the same scrub job as a forget (``forget.SCRUB_JOB``: the full-text segments
  merged, the index files rewritten).

What stays, on purpose: memory *derived* from the conversation, which the person may rely on
elsewhere (facts in the graph, lines the nightly cycle or the memory writer put into their notes,
``REMEMBERED.md``, files they sent). Deleting a chat should not silently take away "my sister is
called Ana" because it was first said in that chat. The answer counts the facts that cite the
conversation, and the chat says they are kept and where to forget them (the Memory console, or
``/forget``). docs/web.md, "Past conversations", says the same to the person.

There is no undo (unlike ``/forget``): the chat asks before it deletes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass
from datetime import date, timedelta
from typing import TYPE_CHECKING

from gateway.memory.edit.forget import SCRUB_JOB, scrub
from gateway.memory.files.errors import MemoryFileNotFoundError, StaleWriteError
from gateway.memory.files.scopes import user_scope
from gateway.memory.files.session_log import log_day, without_turns
from gateway.memory.search.index import point_id

if TYPE_CHECKING:
    from gateway.memory.files.store import MemoryStore
    from gateway.services import Services

log = logging.getLogger("kith.memory.drop_session")


@dataclass(frozen=True, slots=True)
class DropReport:
    messages: int  # transcript rows deleted
    log_blocks: int  # session-log blocks removed
    points: int  # index points deleted or re-embedded
    facts_kept: int  # facts that cite this conversation, kept (derived memory)


def _logs_between(store: MemoryStore, first: date, last: date) -> list[str]:
    """The person's session logs of the days ``first``..``last`` (a day either side: a log is named by
    the person's local day, the transcript's times are UTC)."""
    try:
        entries = store.list("sessions")
    except MemoryFileNotFoundError:
        return []
    out = []
    for e in entries:
        day = log_day(e.path)
        if not e.is_dir and day is not None and first - timedelta(days=1) <= day <= last + timedelta(days=1):
            out.append(e.path)
    return out


def _out_of_logs(store: MemoryStore, paths: list[str], turn_ids: set[str], session_id: str) -> tuple[list[str], int]:
    """Remove the conversation's blocks from ``paths`` (blocking); the files changed and blocks removed."""
    changed: list[str] = []
    removed = 0
    for rel in paths:
        for _attempt in range(3):  # the session log may append meanwhile: read again and retry
            try:
                text = store.read(rel)
            except MemoryFileNotFoundError:
                break
            new, n = without_turns(text, turn_ids)
            if not n:
                break
            try:
                store.write_if(rel, new, expected_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
                               source="session.delete", message_id=session_id, trust="user")  # fmt: skip
            except StaleWriteError:
                continue
            changed.append(rel)
            removed += n
            break
    return changed, removed


def _cited_facts(gateway: Services, user_id: str, session_id: str) -> int:
    """Facts whose provenance names the conversation (the memory writer's ``writer:<sid>:...``, a
    compaction's ``compaction:<sid>:...``)."""
    if gateway.kg is None:
        return 0
    return sum(1 for f in gateway.kg.all(user_id) if f":{session_id}:" in f":{f.source_ref}")


async def drop_session(gateway: Services, user_id: str, session_id: str) -> DropReport:
    """Delete the conversation ``session_id`` of ``user_id`` (the caller checked it is theirs)."""
    await gateway.hooks.flush(gateway)  # buffered session-log blocks are files too
    rows = gateway.state.turns.after(session_id, 0)
    turn_ids = {r.turn_id for r in rows}
    facts_kept = _cited_facts(gateway, user_id, session_id)
    deleted = await asyncio.to_thread(gateway.state.turns.delete_session, session_id)
    # Replies awaited for its turns would otherwise be written into a session that no longer exists.
    awaiting = getattr(gateway.sessions, "_awaiting_reply", None)
    if isinstance(awaiting, dict):
        for tid in [t for t, s in awaiting.items() if s == session_id]:
            awaiting.pop(tid, None)
    blocks = points = 0
    memory = gateway.memory
    if memory is not None and turn_ids:
        store = memory.stores.for_user(user_id)
        days = [r.created_at.date() for r in rows]
        paths = await asyncio.to_thread(_logs_between, store, min(days), max(days))
        changed, blocks = await asyncio.to_thread(_out_of_logs, store, paths, turn_ids, session_id)
        if not memory.detached:
            scope = user_scope(user_id)
            for rel in changed:
                report = await memory.indexing.index_file(scope, rel)
                points += report.deleted + report.embedded
            # A turn indexed live (before its log block was written) has a point no file re-creates.
            ids = [point_id(scope, f"t:{tid}") for tid in sorted(turn_ids)]
            await asyncio.to_thread(memory.loader.index.delete_ids, ids)
            points += len(ids)
        await gateway.hooks.memory_edited(gateway, user_id=user_id, paths=changed)
    if deleted or points:
        if gateway.bus is None or SCRUB_JOB not in gateway.bus.specs:
            await scrub(gateway, turns=bool(deleted), points=points)
        else:
            await gateway.bus.enqueue(SCRUB_JOB, {"turns": bool(deleted), "points": points},
                                      job_id=f"scrub-session-{session_id}")  # fmt: skip
    log.info("conversation %s of %s deleted: %d messages, %d log blocks, %d index points; %d facts kept",
             session_id, user_id, deleted, blocks, points, facts_kept)  # fmt: skip
    return DropReport(messages=deleted, log_blocks=blocks, points=points, facts_kept=facts_kept)
