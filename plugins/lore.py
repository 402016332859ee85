"""Built-in plugin: the persona's lore in the prompt, labelled as the persona's background.

Two ways in, one section ("Background of <persona>"), after the person's recalled memories:

* **Triggered**: entries whose keys appear in the recent messages, constant entries always, within the
  lorebook's and this section's token budget, in insertion order (``gateway.personas.lore_select``).
* **Recalled**: hybrid recall in the persona's own scope (``persona:<name>``, which the memory service
  indexes like any root) for the message, limited to files under ``lore/`` that did not trigger and are
  not disabled; so a hand-written lore file without keys still surfaces when it is relevant.

Lore is the persona's, not the person's: it is rendered as quoted data under its own title, never
mixed into "Recalled memories", so the model can tell "what this character knows" from "what this
person told me". Group conversations get it too (nothing in it is private to anyone).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.memory.files.errors import MemoryStoreError
from gateway.memory.files.scopes import ScopeError
from gateway.personas import FileCache, persona_store
from gateway.personas.choice import turn_persona
from gateway.personas.lore import LoreRule, parse_entry, rule_of
from gateway.personas.lore_select import LORE_DIR, Entry, load_books, select
from gateway.turn.budget import TRIM_RECALLED
from gateway.turn.tiers import loads, tier_of
from gateway.types import ContextSection, Stability, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.lore")

SOURCE = "persona.lore"
BUDGET_TOKENS = 600
RECALL_K = 3
FILES = FileCache()


def _recent(turn: Turn) -> list[str]:
    """The messages to scan for keys, newest first: this one, then the live history backwards."""
    return [turn.message.text, *(m.content for m in reversed(turn.history))]


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.casefold()) if len(w) >= 4}


def plain_entry(path: str, text: str) -> Entry:
    """A lore file written by hand (no marker): its heading is the title, the rest the content."""
    body = text.strip()
    head, _, rest = body.partition("\n")
    if head.startswith("# "):
        return Entry(book="", path=path, rule=LoreRule(title=head[2:].strip(), content=rest.strip()))
    return Entry(book="", path=path, rule=LoreRule(title=path.rsplit("/", 1)[-1][:-3], content=body))


async def _recalled(gateway: Services, turn: Turn, name: str, skip: set[str]) -> list[Entry]:
    """Lore recall finds what keys cannot: files without keys (hand-written background) and entries
    whose keys are regular expressions (not evaluated, see ``lore.triggered``). An entry with plain
    keys enters only by its keys, as its author set it up; and a hit must share a word with the
    message, so an unrelated file is not pulled in just for being the nearest."""
    memory = gateway.memory
    if memory is None or memory.detached or not turn.message.text.strip():
        return []
    try:
        hits = await memory.recall(scope=f"persona:{name}", query=turn.message.text, k=RECALL_K * 4,
                                   now=turn.received_at)  # fmt: skip
    except ScopeError:
        return []
    store = persona_store(gateway, name)
    query = _words(turn.message.text)
    out: list[Entry] = []
    for hit in hits:
        if not hit.source.startswith(LORE_DIR + "/") or hit.source in skip or len(out) >= RECALL_K:
            continue
        skip.add(hit.source)
        text, _ = FILES.read(store, hit.source)
        parsed = parse_entry(text)
        entry = Entry(book="", path=hit.source, rule=rule_of(*parsed)) if parsed else plain_entry(hit.source, text)
        rule = entry.rule
        if not rule.enabled or rule.constant or (rule.keys and not rule.use_regex):
            continue
        if query & _words(rule.title + " " + rule.content):
            out.append(entry)
    return out


def render(name: str, triggered: list[Entry], recalled: list[Entry]) -> str:
    lines = [f"Background of the persona {name} (its lore, not the person's memory):"]
    for e in [*triggered, *recalled]:
        body = " ".join(e.rule.content.split())
        lines.append(f"- [{e.rule.title or e.path}] {body}")
    return "\n".join(lines)


@hookimpl
async def gateway_context_sections(gateway: Services, turn: Turn) -> ContextSection | None:
    tier = tier_of(gateway, turn)
    if not loads(tier, "recall"):
        return None
    name = turn_persona(gateway, turn)
    try:
        store = persona_store(gateway, name)
        books = load_books(store, FILES)
    except MemoryStoreError as exc:
        log.warning("lore of persona %s unreadable: %s", name, exc)
        return None
    if not books:
        return None
    chosen = select(books, _recent(turn), seed=turn.turn_id, budget_tokens=BUDGET_TOKENS)
    # Recall only when some file can enter that way (no plain keys): most cards' books cannot.
    recallable = any(e.rule.enabled and not e.rule.constant and (not e.rule.keys or e.rule.use_regex)
                     for book in books for e in book.entries)  # fmt: skip
    recalled = await _recalled(gateway, turn, name, {e.path for e in chosen}) if recallable else []
    if not chosen and not recalled:
        return None
    text = render(name, chosen, recalled)
    return ContextSection(source=f"{SOURCE}:{name}", title=f"Background of {name}", text=text,
                          priority=35, budget=BUDGET_TOKENS + 200, stability=Stability.VOLATILE,
                          trim_rank=TRIM_RECALLED, as_data=True)
