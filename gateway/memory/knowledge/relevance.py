"""Which facts join the prompt, and how they read there.

Relevance is deliberately lexical and cheap (it runs on every turn): identity facts are always in,
and any other fact is in when its subject or object appears in the message as a whole phrase.
Phrase matching uses word n-grams of the message, so "Anna" does not match "Annabel" and the cost is
one pass over the message plus one set lookup per distinct entity.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from gateway.memory.knowledge import predicates as preds
from gateway.state import Fact

MAX_NGRAM = 6  # entities longer than six words are matched on their first six


def _key(text: str) -> str:
    return " ".join(preds.words_ordered(text)[:MAX_NGRAM])


def _ngrams(message: str) -> set[str]:
    toks = preds.words_ordered(message)
    out: set[str] = set()
    for n in range(1, MAX_NGRAM + 1):
        for i in range(len(toks) - n + 1):
            out.add(" ".join(toks[i : i + n]))
    return out


def _rank(f: Fact) -> tuple[int, float, float]:
    # Single-valued facts (where someone lives, works) first, then confidence, then most recent.
    return (0 if f.predicate in preds.SINGLE_VALUED else 1, -f.confidence, -f.valid_from.timestamp())


def select_relevant_facts(facts: Sequence[Fact], message: str, *, limit: int, identities: Iterable[str]) -> list[Fact]:
    """Pick up to ``limit`` of ``facts`` (already filtered to current ones).

    At least half the slots stay open for message-mentioned facts when there are any, so a user with
    many identity facts still gets the facts the current message is about.
    """
    if limit <= 0:
        return []
    ids = {preds.normalize_entity(i) for i in identities if i}
    grams = _ngrams(message)
    identity: list[Fact] = []
    mentioned: list[Fact] = []
    for f in facts:
        if preds.normalize_entity(f.subject) in ids and f.predicate not in preds.CONTEXTUAL:
            identity.append(f)
        elif (_key(f.subject) in grams and _key(f.subject)) or (_key(f.object) in grams and _key(f.object)):
            mentioned.append(f)
    identity.sort(key=_rank)
    mentioned.sort(key=_rank)
    reserve = min(len(mentioned), limit // 2)
    chosen = identity[: limit - reserve]
    return chosen + mentioned[: limit - len(chosen)]


def _day(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%d")


def format_facts(facts: Sequence[Fact], *, header: str = "Known facts") -> str:
    """Render facts as a compact Markdown list; empty string for no facts (no empty section)."""
    if not facts:
        return ""
    lines = [f"## {header}"]
    for f in facts:
        when = f"since {_day(f.valid_from)}"
        if f.valid_until is not None:
            when += f", until {_day(f.valid_until)}"
        lines.append(f"- {f.subject} {f.predicate.replace('_', ' ')} {f.object} ({when})")
    return "\n".join(lines) + "\n"
