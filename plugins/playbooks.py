"""Built-in plugin: the person's playbooks relevant to this message (seed 004, ``gateway.memory.files.playbooks``).

Playbooks are private like the profile: a direct conversation reads the person's own ``playbooks/``;
a group reads them only with ``memory.group_private_profile``. The section is volatile (it follows
the message) and quoted as data, and it carries ``TRIM_PLAYBOOKS``: on overflow the budgeter cuts
recalled memories, then facts, then dated memories, and playbooks last.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.memory.files import playbooks
from gateway.turn.budget import TRIM_PLAYBOOKS
from gateway.turn.tiers import loads, tier_of
from gateway.types import ContextSection, ConversationKind, Stability, Turn

if TYPE_CHECKING:
    from gateway.services import Services

SOURCE = "memory.playbooks"


@hookimpl
async def gateway_context_sections(gateway: Services, turn: Turn) -> ContextSection | None:
    memory = gateway.memory
    mem = gateway.config.memory
    if memory is None or turn.user is None or mem.playbooks_k <= 0 or not turn.message.text.strip():
        return None
    if turn.message.kind == ConversationKind.GROUP and not mem.group_private_profile:
        return None
    if not loads(tier_of(gateway, turn), "playbooks"):
        return None
    store = memory.stores.for_user(turn.user.user_id)
    found = await asyncio.to_thread(playbooks.relevant, store, turn.message.text, limit=mem.playbooks_k)
    if not found:
        return None
    turn.stash[playbooks.INJECTED] = frozenset(p.path for p in found)
    return ContextSection(source=SOURCE, title="Playbooks", text=playbooks.section_text(found), priority=50,
                          budget=mem.playbooks_budget_tokens, stability=Stability.VOLATILE,
                          trim_rank=TRIM_PLAYBOOKS, as_data=True)
