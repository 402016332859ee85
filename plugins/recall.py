"""Built-in plugin: per-turn hybrid recall for the current message.

Scopes: a direct conversation recalls from the user's memory; a group recalls from the group's own
memory (its channel root) and never from a member's private one. A channel configured with
``identity.channel_scope: channel`` has users of its own, so its memories stay apart by scope.
Hits already in the prompt (turns of the live history, files the session-start injection loads)
are dropped, and the rest are rendered as quoted data with their source and date: a memory is
evidence, never an instruction. Hybrid recall and the filter tier spend from the turn's one read
deadline (``read_deadline``): the search is waited for at most what is left of it, the filter gets
the rest.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.memory.background.jobscope import zone
from gateway.memory.files import dated, playbooks
from gateway.memory.files.kinds import indexable
from gateway.memory.files.scopes import channel_scope, user_scope
from gateway.memory.search import filter_tier, read_deadline, readiness
from gateway.memory.search.recall import Hit
from gateway.memory.search.recall_context import hits_section
from gateway.turn.tiers import file_loads, loads, tier_of
from gateway.types import ContextSection, ConversationKind, StashKey, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.recall")

# Files the session-start injection puts in the prompt whole: recalling a piece of them repeats it.
INJECTED_FILES = frozenset({
    "USER.md", "PATTERNS.md", "WORKING.md", "CHANNEL.md", "MEMORY_SHORT.md", "MEMORY_MID.md", "MEMORY_LONG.md",
})
RECALLED: StashKey[list[Hit]] = StashKey()


def recall_scopes(gateway: Services, turn: Turn) -> list[str]:
    msg = turn.message
    if msg.kind == ConversationKind.GROUP:
        scopes = [channel_scope(msg.conversation_key)]
        if gateway.config.memory.group_private_recall and turn.user is not None:
            scopes.append(user_scope(turn.user.user_id))
        return scopes
    return [user_scope(turn.user.user_id)] if turn.user is not None else []


def keep(hit: Hit, history_ids: set[str], tier: int, injected: Callable[[str], bool] = lambda rel: False) -> bool:
    if hit.turn_ids and set(hit.turn_ids) <= history_ids:
        return False  # the live history already holds these turns verbatim
    if hit.kind == "turn":
        return True
    # Files loaded whole are already in the prompt (the profile, the recent dated memories); files
    # above this tier (a tier-4 scratchpad) must not surface through a search hit either.
    return hit.source not in INJECTED_FILES and not injected(hit.source) and file_loads(tier, hit.source)


def dated_injected(gateway: Services, turn: Turn, tier: int) -> Callable[[str], bool]:
    """Whether a file is one of the dated memories the session-start injection loads for this turn."""
    days = gateway.config.memory.dated_days
    if not days or not loads(tier, "dated"):
        return lambda rel: False
    # The session's snapshot is frozen at its first turn: a dated file written since is not in the
    # prompt, so only the files the snapshot holds are dropped.
    recorded = dated.injected(gateway.stash, turn.session.session_id) if turn.session is not None else None
    if recorded is not None:
        return recorded.__contains__
    group = turn.message.kind == ConversationKind.GROUP
    tz = zone(None if group or turn.user is None else turn.user.timezone, gateway.config.timezone)
    today = dated.local_day(turn.received_at, tz)
    return lambda rel: dated.in_window(rel, today, days)


def literal_hits(gateway: Services, scopes: list[str], phrase: str, limit: int = 16) -> list[Hit]:
    """Lines of the scopes' indexable files that contain ``phrase`` (case-blind), as recall hits."""
    memory = gateway.memory
    assert memory is not None
    out: list[Hit] = []
    for scope in scopes:
        for g in memory.stores.store_for(scope).grep(re.escape(phrase)):
            if not indexable(g.path) or len(out) >= limit:
                continue
            out.append(Hit(text=g.line.strip()[:600], source=g.path, scope=scope, date="", score=0.0,
                           chunk_id=f"grep:{g.path}:{g.line_no}"))
    return out


def _retrieved(task: asyncio.Future[list[Hit]]) -> None:
    if not task.cancelled():
        task.exception()  # an abandoned search's failure is not "never retrieved"


async def _within(deadline: read_deadline.ReadDeadline, search: Awaitable[list[Hit]]) -> list[Hit] | None:
    """The hybrid hits, or None when the read deadline ran out first. A search past the deadline is
    abandoned, not cancelled: it is local work that finishes by itself, and cancelling a search in a
    worker thread would not stop it anyway."""
    left = deadline.remaining()
    if left <= 0:
        if inspect.iscoroutine(search):
            search.close()  # never started
        return None
    task = asyncio.ensure_future(search)
    done, _ = await asyncio.wait({task}, timeout=left)
    if not done:
        task.add_done_callback(_retrieved)
        return None
    return task.result()


@hookimpl
async def gateway_context_sections(gateway: Services, turn: Turn) -> ContextSection | None:
    memory = gateway.memory
    k = gateway.config.memory.recall_k
    if memory is None or memory.detached or turn.user is None or k <= 0:
        return None
    if (why := readiness.unavailable(memory)) is not None:
        turn.stash[readiness.RECALL_SKIPPED] = why  # the turn does not wait for it, and says so
        return None
    if (why := readiness.degraded(memory)) is not None:
        turn.stash[readiness.RECALL_SKIPPED] = why  # recall runs on keywords alone, and says so
    tier = tier_of(gateway, turn)
    if not loads(tier, "recall") or not turn.message.text.strip():
        return None
    deadline = read_deadline.for_turn(turn, gateway.config.memory.read_deadline_ms)
    scopes = recall_scopes(gateway, turn)
    history_ids = {m.turn_id for m in turn.history if m.turn_id}
    # Over-fetch: hits dropped as already present must not leave the prompt short of memories, and the
    # filter tier (when configured) chooses among more candidates than it keeps.
    fetch = max(k * 2, gateway.config.memory.filter_tier.candidates if filter_tier.active_backend(gateway) else 0)
    # "yesterday" in the message is the person's yesterday (a group has no one zone: the gateway's).
    group = turn.message.kind == ConversationKind.GROUP
    tz = zone(None if group else turn.user.timezone, gateway.config.timezone)
    hits = await _within(deadline, memory.recall(scope=scopes, query=turn.message.text, k=fetch,
                                                  now=turn.received_at, tz=tz))
    if hits is None:
        spent = deadline.spent_ms()
        turn.stash[filter_tier.DECISION] = filter_tier.FilterDecision(
            "timeout", 0.0, 0, (), f"hybrid recall had no time left of the read deadline "
            f"({gateway.config.memory.read_deadline_ms} ms; {spent:.0f} ms spent)")
        log.info("recall skipped for turn %s: the read deadline is spent (%.0f ms)", turn.turn_id, spent)
        return None
    in_dated = dated_injected(gateway, turn, tier)
    in_playbooks = turn.stash.get(playbooks.INJECTED) or frozenset()

    def injected(rel: str) -> bool:
        return in_dated(rel) or rel in in_playbooks

    candidates = [h for h in hits if keep(h, history_ids, tier, injected)]
    async def grep(phrase: str) -> list[Hit]:
        # The filter's one escalation: a literal search of the same files recall reads, under the
        # same rules (indexable files only, nothing above the tier, nothing already in the prompt).
        found = await asyncio.to_thread(literal_hits, gateway, scopes, phrase)
        return [h for h in found if keep(h, history_ids, tier, injected)]

    kept, decision = await filter_tier.filter_hits(gateway, turn, turn.message.text, candidates, k, grep=grep,
                                                   budget_s=deadline.remaining())
    turn.stash[filter_tier.DECISION] = decision
    turn.stash[RECALLED] = kept
    return hits_section(kept, budget_tokens=gateway.config.memory.recall_budget_tokens)
