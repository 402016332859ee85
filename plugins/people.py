"""Built-in plugin: the people lookup guarantee.

Before recall, and whatever recall finds, the notes on the people in the conversation are loaded
from ``people/`` (written by the memory writer), in this order:

1. the speaker's file (``people/<channel>-<account>.md``: keyed on the immutable platform id);
2. everyone else in the pending batch (a turn is one message today, so this is the speaker);
3. the conversation's recent participants (groups: the last ``memory.people_recent_participants``
   distinct speakers);
4. anyone the message mentions by a name in ``people/_aliases.json`` (kept by the memory writer) or
   in a hand-written ``## Aliases`` section of a people file (one name per bullet or line, or several
   separated by commas; a hand-written alias wins over the writer's map).

The lookup starts the turn's read deadline (``read_deadline``) and is never cut by it.
Each file is capped at ``memory.people_file_tokens``. When the prompt overflows, files are dropped
from the end of that list: mentions go first, the speaker's file last. In a group the notes come from
the group's own root; a member's private notes stay out unless ``memory.group_private_profile``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.memory.background.writer import ALIASES, person_slug
from gateway.memory.files.aliases import section_aliases
from gateway.memory.files.store import MemoryStore
from gateway.memory.search import read_deadline
from gateway.turn.budget import TRIM_PEOPLE, truncate_to_tokens
from gateway.turn.tiers import loads, tier_of
from gateway.types import ContextSection, ConversationKind, Stability, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.people")
_WORD = re.compile(r"\w+(?:-\w+)*")  # apostrophes split: "Hanna's" names Hanna
_MAX_NGRAM = 3


def aliases(store: MemoryStore) -> dict[str, str]:
    return {**written_aliases(store), **hand_aliases(store)}


def written_aliases(store: MemoryStore) -> dict[str, str]:
    if not store.exists(ALIASES):
        return {}
    try:
        data = json.loads(store.read(ALIASES))
    except ValueError:
        log.warning("%s in %s is not valid JSON; mentions are not resolved", ALIASES, store.root)
        return {}
    return {str(k).casefold(): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


# (file path, mtime_ns, size) -> names: a turn reads the people folder's listing, not every file.
_PARSED: dict[tuple[str, float, int], tuple[str, ...]] = {}


def hand_aliases(store: MemoryStore) -> dict[str, str]:
    """``name -> slug`` from the hand-written ``## Aliases`` sections of ``people/<slug>.md``."""
    out: dict[str, str] = {}
    for entry in store.files("people"):
        rel = entry.path
        if rel.count("/") != 1 or not rel.endswith(".md"):
            continue
        key = (f"{store.root}/{rel}", entry.mtime, entry.size)
        names = _PARSED.get(key)
        if names is None:
            try:
                names = tuple(section_aliases(store.read(rel)))
            except Exception:  # changed under us: the next turn reads it again
                continue
            if len(_PARSED) > 4096:
                _PARSED.clear()
            _PARSED[key] = names
        slug = rel[len("people/"):-len(".md")]
        for name in names:
            folded = " ".join(_WORD.findall(name.casefold()))
            if folded:
                out[folded] = slug
    return out


def mentioned(text: str, known: dict[str, str]) -> list[str]:
    """Slugs of people named in ``text`` (single words and phrases up to three words), in order."""
    words = [w.casefold() for w in _WORD.findall(text)]
    out: list[str] = []
    for i in range(len(words)):
        for n in range(_MAX_NGRAM, 0, -1):
            if i + n <= len(words):
                slug = known.get(" ".join(words[i:i + n]))
                if slug and slug not in out:
                    out.append(slug)
                    break
    return out


def recent_participants(gateway: Services, turn: Turn, limit: int) -> list[str]:
    msg = turn.message
    speakers = gateway.state.turns.recent_speakers(msg.channel, msg.conversation_key, limit)
    return [person_slug(msg.channel, account_id) for account_id in speakers]


def ordered_slugs(gateway: Services, turn: Turn, store: MemoryStore) -> list[str]:
    msg = turn.message
    speaker = person_slug(msg.channel, msg.account_id)
    order = [speaker]  # 1 + 2: the speaker (the whole pending batch)
    if msg.kind == ConversationKind.GROUP:
        order += recent_participants(gateway, turn, gateway.config.memory.people_recent_participants)
    order += mentioned(msg.text, aliases(store))
    return list(dict.fromkeys(order))


def people_text(gateway: Services, turn: Turn) -> str:
    memory = gateway.memory
    assert memory is not None and turn.user is not None
    msg = turn.message
    cfg = gateway.config.memory
    if msg.kind == ConversationKind.GROUP:
        stores = [memory.stores.for_channel(msg.conversation_key)]
        if cfg.group_private_profile:
            stores.append(memory.stores.for_user(turn.user.user_id))
    else:
        stores = [memory.stores.for_user(turn.user.user_id)]
    parts: list[str] = []
    seen: set[str] = set()
    for store in stores:
        for slug in ordered_slugs(gateway, turn, store):
            rel = f"people/{slug}.md"
            if slug in seen or not store.exists(rel):
                continue
            seen.add(slug)
            parts.append(truncate_to_tokens(store.read(rel).strip(), cfg.people_file_tokens))
    return "\n\n".join(parts)


@hookimpl
async def gateway_context_sections(gateway: Services, turn: Turn) -> ContextSection | None:
    if gateway.memory is None or turn.user is None or not loads(tier_of(gateway, turn), "people"):
        return None
    # The first tier of the read path starts its one deadline; this one spends from it but is never
    # cut (the correctness floor: people files surface whatever recall does).
    read_deadline.for_turn(turn, gateway.config.memory.read_deadline_ms)
    try:
        text = await asyncio.to_thread(people_text, gateway, turn)
    except Exception:
        log.exception("people lookup failed for turn %s", turn.turn_id)
        return None
    if not text:
        return None
    return ContextSection(source="memory.people", title="People in this conversation (notes)", text=text,
                          priority=60, stability=Stability.VOLATILE, trim_rank=TRIM_PEOPLE, as_data=True)
