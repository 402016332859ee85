"""Built-in plugin: per-turn hybrid recall for the current message.

Scopes: a direct conversation recalls from the user's memory; a group recalls from the group's own
memory (its channel root) and never from a member's private one. A channel configured with
``identity.channel_scope: channel`` has users of its own, so its memories stay apart by scope.
Hits already in the prompt (turns of the live history, files the session-start injection loads)
are dropped, and the rest are rendered as quoted data with their source and date: a memory is
evidence, never an instruction.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.memory.files.scopes import channel_scope, user_scope
from gateway.memory.search.recall import Hit
from gateway.memory.search.recall_context import hits_section
from gateway.tiers import file_loads, loads, tier_of
from gateway.types import ContextSection, ConversationKind, StashKey, Turn

if TYPE_CHECKING:
    from gateway.app import Gateway

log = logging.getLogger("kith.recall")

# Files the session-start injection puts in the prompt whole: recalling a piece of them repeats it.
INJECTED_FILES = frozenset({
    "USER.md", "PATTERNS.md", "WORKING.md", "CHANNEL.md", "MEMORY_SHORT.md", "MEMORY_MID.md", "MEMORY_LONG.md",
})
RECALLED: StashKey[list[Hit]] = StashKey()


def recall_scopes(gateway: Gateway, turn: Turn) -> list[str]:
    msg = turn.message
    if msg.kind == ConversationKind.GROUP:
        scopes = [channel_scope(msg.conversation_key)]
        if gateway.config.memory.group_private_recall and turn.user is not None:
            scopes.append(user_scope(turn.user.user_id))
        return scopes
    return [user_scope(turn.user.user_id)] if turn.user is not None else []


def keep(hit: Hit, history_ids: set[str], tier: int) -> bool:
    if hit.turn_ids and set(hit.turn_ids) <= history_ids:
        return False  # the live history already holds these turns verbatim
    if hit.kind == "turn":
        return True
    # Files loaded whole are already in the prompt; files above this tier (a tier-4 scratchpad) must
    # not surface through a search hit either.
    return hit.source not in INJECTED_FILES and file_loads(tier, hit.source)


@hookimpl
async def gateway_context_sections(gateway: Gateway, turn: Turn) -> ContextSection | None:
    memory = gateway.memory
    k = gateway.config.memory.recall_k
    if memory is None or memory.detached or turn.user is None or k <= 0:
        return None
    tier = tier_of(gateway, turn)
    if not loads(tier, "recall") or not turn.message.text.strip():
        return None
    scopes = recall_scopes(gateway, turn)
    history_ids = {m.turn_id for m in turn.history if m.turn_id}
    # Over-fetch: hits dropped as already present must not leave the prompt short of memories.
    hits = await memory.recall(scope=scopes, query=turn.message.text, k=k * 2, now=turn.received_at)
    kept = [h for h in hits if keep(h, history_ids, tier)][:k]
    turn.stash[RECALLED] = kept
    return hits_section(kept, budget_tokens=gateway.config.memory.recall_budget_tokens)
