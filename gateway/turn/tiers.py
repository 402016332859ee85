"""Context tiers 1-4: how much of a person's and a persona's memory a turn loads.

Higher tiers load more (slower, more prompt tokens, richer answers). Each item (a file, a context
stage or a model tool) enters at one tier and stays loaded at every tier above it:

====  =====================================================================================
tier  adds
====  =====================================================================================
1     persona ``IDENTITY.md`` only: lightweight tasks
2     ``SOUL.md``, ``PROTOCOLS.md``, the profile (``USER.md``, ``PATTERNS.md``), ``WORKING.md``,
      ``MEMORY_SHORT.md``, ``MEMORY_MID.md``, ``REMINDERS.md``, ``CHANNEL.md``, dated memories, people,
      facts, recall, playbooks; tools ``memory_search``, ``memory_get``, ``follow_links``, ``reminders``:
      standard chat (default)
3     ``MEMORY_LONG.md``, ``CONTEXT_TIERS.md``: deep sessions, long tasks
4     ``SCRATCH.md``, ``TASKS.json``; tools ``scratchpad``, ``tasks``: full state, agent mode
====  =====================================================================================

A turn's tier, first match wins: the request (``Turn.tier``, or ``"tier"`` in the inbound message's
raw payload, which the WebSocket protocol carries), the conversation
(``context.conversation_tier["<channel>:<conversation>"]``), the person's own setting (``User.tier``,
``PATCH /api/users/{uid}/settings``), the channel (``context.channel_tier``), then
``context.default_tier``. Stages ask ``loads(tier, "USER.md")`` instead of comparing numbers, so
the table here is the only place that knows where an item enters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.services import Services
    from gateway.types import Turn

MIN_TIER = 1
MAX_TIER = 4

# item -> the lowest tier that loads it
TIER_OF_ITEM: Mapping[str, int] = {
    # persona files (<data_dir>/personas/<name>/)
    "IDENTITY.md": 1,
    "SOUL.md": 2,
    "PROTOCOLS.md": 2,
    "CONTEXT_TIERS.md": 3,
    # the user's files (<data_dir>/users/<id>/)
    "USER.md": 2,
    "PATTERNS.md": 2,
    "WORKING.md": 2,
    "MEMORY_SHORT.md": 2,
    "MEMORY_MID.md": 2,
    "REMINDERS.md": 2,
    "MEMORY_LONG.md": 3,
    "SCRATCH.md": 4,
    "TASKS.json": 4,
    # the conversation's shared memory (<data_dir>/channels/<key>/)
    "CHANNEL.md": 2,
    # context stages
    "dated": 2,  # memories/YYYY-MM-DD.md of the last memory.dated_days days (session-start injection)
    "people": 2,
    "facts": 2,
    "recall": 2,
    "playbooks": 2,
    # model tools
    "memory_search": 2,
    "memory_get": 2,
    "follow_links": 2,
    "reminders": 2,
    "scratchpad": 4,
    "tasks": 4,
}


def clamp(tier: int) -> int:
    return max(MIN_TIER, min(MAX_TIER, tier))


def loads(tier: int, item: str) -> bool:
    """Whether a turn at ``tier`` loads ``item`` (a key of ``TIER_OF_ITEM``).

    An unknown item raises ``KeyError``: a typo must fail loudly in tests, not silently load nothing.
    """
    try:
        entry = TIER_OF_ITEM[item]
    except KeyError:
        raise KeyError(f"unknown tier item {item!r}; known: {', '.join(sorted(TIER_OF_ITEM))}") from None
    return tier >= entry


# The table's files by a normalized name: a caller may spell a path "./SCRATCH.md", "/SCRATCH.md" or
# (on a case-insensitive file system, the same file) "scratch.md".
_TIER_OF_FILE: Mapping[str, int] = {item.casefold(): entry for item, entry in TIER_OF_ITEM.items() if "." in item}


def file_loads(tier: int, path: str) -> bool:
    """Whether a memory file may appear at ``tier``: a file of the table only from its tier, any other
    file (sessions/, people/, notes) always. For stages and tools that read or quote files (recall,
    ``memory_get``, ``memory_search``), so a tier-4 scratchpad does not surface at tier 2."""
    normalized = "/".join(p for p in path.strip().split("/") if p not in ("", "."))
    entry = _TIER_OF_FILE.get(normalized.casefold())
    return entry is None or tier >= entry


def items_at(tier: int) -> list[str]:
    """Every item a turn at ``tier`` loads, in table order (for ``kith context`` and docs)."""
    return [item for item, entry in TIER_OF_ITEM.items() if tier >= entry]


def _as_tier(value: Any) -> int | None:
    # The raw payload comes from a client: accept 2 or "2", ignore anything else rather than fail the turn.
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return clamp(value)
    if isinstance(value, str) and value.strip().isdigit():
        return clamp(int(value.strip()))
    return None


def tier_of(gateway: Services, turn: Turn) -> int:
    """The context tier of ``turn`` (see the module docstring for the order of precedence)."""
    if turn.tier is not None:
        return clamp(turn.tier)
    msg = turn.message
    requested = _as_tier(msg.raw.get("tier")) if msg.raw else None
    if requested is not None:
        return requested
    ctx = gateway.config.context
    if msg.conversation_key in ctx.conversation_tier:
        return clamp(ctx.conversation_tier[msg.conversation_key])
    if turn.user is not None and turn.user.tier is not None:
        return clamp(turn.user.tier)
    if msg.channel in ctx.channel_tier:
        return clamp(ctx.channel_tier[msg.channel])
    return clamp(ctx.default_tier)
