"""Built-in plugin: session-start injection - who you are talking to, and where you left off.

At a session's first turn the plugin snapshots the conversation's standing memory and keeps it for
the whole session, so the prompt prefix stays byte-identical (the Anthropic cache breakpoint covers
it) and a nightly USER.md rewrite or a reconnect never injects anything twice:

* direct conversations: ``USER.md`` and ``PATTERNS.md`` (the profile, protected from trimming) and
  ``WORKING.md`` when it has not expired (written by compaction, so it follows the user across
  channels and daemon restarts);
* groups: the group's ``CHANNEL.md`` and its own ``WORKING.md``. A member's private profile stays
  out of group chats unless ``memory.group_private_profile`` is set;
* both: the conversation root's dated memories (``memories/YYYY-MM-DD.md`` of the last
  ``memory.dated_days`` days, ``gateway.memory.files.dated``), within ``memory.dated_budget_tokens``
  and trimmed with the digests.

Everything is quoted as data: these files hold text people wrote. With
``memory.proactive_session_greeting`` the first turn also asks the model to pick up the last thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.memory.background.jobscope import zone
from gateway.memory.files import dated, working
from gateway.memory.files.store import MemoryStore
from gateway.turn.budget import TRIM_DATED, TRIM_WORKING
from gateway.turn.tiers import loads, tier_of
from gateway.types import ContextSection, ConversationKind, Stability, StashKey, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.profile")
_MAX_SNAPSHOTS = 4096
GREETING = (
    "This is the first message of a new session. If relevant, briefly acknowledge what the user was last "
    "working on (see the working memory above) before responding to their message."
)


@dataclass(frozen=True, slots=True)
class Snapshot:
    sections: tuple[tuple[str, ContextSection], ...]  # (tier item, section)
    has_working: bool


def _file(store: MemoryStore, rel: str) -> str:
    try:
        return store.read(rel).strip() if store.exists(rel) else ""
    except Exception:  # an unreadable file must not cost the user their answer
        log.exception("could not read %s in %s", rel, store.root)
        return ""


def _section(source: str, title: str, text: str, priority: int, **kw: object) -> ContextSection:
    return ContextSection(source=source, title=title, text=text, priority=priority,
                          stability=Stability.STABLE, as_data=True, **kw)  # type: ignore[arg-type]


def take_snapshot(gateway: Services, turn: Turn) -> Snapshot:
    memory = gateway.memory
    assert memory is not None and turn.user is not None
    mem = gateway.config.memory
    msg = turn.message
    out: list[tuple[str, ContextSection]] = []
    group = msg.kind == ConversationKind.GROUP
    user_store = memory.stores.for_user(turn.user.user_id)
    if group:
        room = memory.stores.for_channel(msg.conversation_key)
        if text := _file(room, "CHANNEL.md"):
            out.append(("CHANNEL.md", _section("memory.channel", "About this conversation (channel memory)", text,
                                               85, protected=True)))
        wm_store = room
    else:
        wm_store = user_store
    if not group or mem.group_private_profile:
        if text := _file(user_store, "USER.md"):
            out.append(("USER.md", _section("memory.profile", "Who you're talking to (profile)", text, 80,
                                            protected=True)))
        if text := _file(user_store, "PATTERNS.md"):
            out.append(("PATTERNS.md", _section("memory.patterns", "Their patterns", text, 79, protected=True)))
    wm = working.read(wm_store, turn.received_at)
    if wm is not None and turn.session is not None and gateway.state.compactions.get(turn.session.session_id):
        # This session compacted (and a restart dropped the snapshot): WORKING.md is its own summary,
        # already in the prompt as the session summary, which folded in the previous working memory.
        wm = None
    if wm is not None:
        out.append(("WORKING.md", _section(
            "memory.working", f"Recent context (working memory, updated {wm.updated:%Y-%m-%d %H:%M} UTC)", wm.body,
            70, budget=mem.working_max_tokens, trim_rank=TRIM_WORKING,
        )))
    # The conversation's own dated memories (the person's calendar in a direct conversation).
    tz = zone(None if group else turn.user.timezone, gateway.config.timezone)
    days = dated.recent(wm_store, dated.local_day(turn.received_at, tz), mem.dated_days)
    if turn.session is not None:
        dated.record_injected(gateway.stash, turn.session.session_id, days)
    if days:
        out.append(("dated", _section(
            "memory.dated", f"Dated memories (memories/, last {mem.dated_days} days, newest first)",
            dated.section_text(days), 60, budget=mem.dated_budget_tokens, trim_rank=TRIM_DATED,
        )))
    return Snapshot(tuple(out), wm is not None)


SNAPSHOTS: StashKey[OrderedDict[str, Snapshot]] = StashKey()


def _snapshots(gateway: Services) -> OrderedDict[str, Snapshot]:
    return gateway.stash.setdefault(SNAPSHOTS, OrderedDict())


@hookimpl
async def gateway_context_sections(gateway: Services, turn: Turn) -> list[ContextSection]:
    if gateway.memory is None or turn.user is None or turn.session is None:
        return []
    cache = _snapshots(gateway)
    key = turn.session.session_id
    snap = cache.get(key)
    if snap is None:  # the session's first turn here (or the first since a restart)
        snap = await asyncio.to_thread(take_snapshot, gateway, turn)
        cache[key] = snap
        if len(cache) > _MAX_SNAPSHOTS:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    tier = tier_of(gateway, turn)
    sections = [section for item, section in snap.sections if loads(tier, item)]
    # Seed 003: once, at a session's first message, picking up the person's own thread: never in a
    # group (whose thread is it?) nor off the record (a private aside is no place to bring it up).
    if (gateway.config.memory.proactive_session_greeting and turn.session.is_new and snap.has_working
            and loads(tier, "WORKING.md") and not turn.otr and turn.message.kind != ConversationKind.GROUP):
        sections.append(ContextSection(source="memory.greeting", title="Session start", text=GREETING,
                                       priority=10, stability=Stability.VOLATILE, protected=True))
    return sections


@hookimpl
def gateway_users_merged(gateway: Services, into: str, source: str) -> None:
    _snapshots(gateway).clear()  # the survivor's files changed under its live sessions


@hookimpl
def gateway_memory_edited(gateway: Services, user_id: str, paths: list[str]) -> None:
    # A forgotten line must leave the next prompt, not the next session: drop this person's snapshots.
    cache = _snapshots(gateway)
    for session_id in list(cache):
        stored = gateway.state.sessions.get(session_id)
        if stored is None or stored.user_id == user_id:
            del cache[session_id]
