"""Built-in plugin: relevant knowledge-graph facts in the system prompt (docs/knowledge.md).

Identity facts about the user plus current facts whose subject or object the message mentions, as a
volatile, quoted-data section with trim rank 20 ("facts": trimmed after recalled memories, before
dated memories). A group sees only the group's own facts, never a member's. Read-only: a lookup in
SQLite on the event loop (tens of microseconds), no writes, so Off-The-Record turns get it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.memory.files.scopes import channel_scope
from gateway.memory.knowledge.graph import format_facts
from gateway.turn.tiers import loads, tier_of
from gateway.types import ContextSection, ConversationKind, Stability, Turn

if TYPE_CHECKING:
    from gateway.services import Services

TRIM_RANK = 20
BUDGET_TOKENS = 400


@hookimpl
def gateway_context_sections(gateway: Services, turn: Turn) -> ContextSection | None:
    bg = gateway.config.background
    kg = gateway.kg
    if kg is None or turn.user is None or not bg.facts_in_prompt or bg.max_prompt_facts <= 0:
        return None
    if not loads(tier_of(gateway, turn), "facts"):
        return None
    msg = turn.message
    if msg.kind == ConversationKind.GROUP:
        facts = kg.select_relevant(channel_scope(msg.conversation_key), msg.text, bg.max_prompt_facts,
                                   as_of=turn.received_at)  # fmt: skip
    else:
        aliases = tuple(n for n in (turn.user.display_name, msg.display_name) if n)
        facts = kg.select_relevant(turn.user.user_id, msg.text, bg.max_prompt_facts, as_of=turn.received_at,
                                   aliases=aliases)  # fmt: skip
    text = format_facts(facts)
    if not text:
        return None
    return ContextSection(source="facts", title="Known facts", text=text.split("\n", 1)[1], priority=45,
                          budget=BUDGET_TOKENS, stability=Stability.VOLATILE, trim_rank=TRIM_RANK,
                          as_data=True)  # fmt: skip
