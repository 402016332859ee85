"""Predicate vocabulary and the text normalisation the knowledge graph matches on.

Predicates fall into four behaviours (see docs/knowledge.md):

* single-valued: one current value per (scope, subject); a new value supersedes the old one, whose
  ``valid_until`` is set, so history stays in the timeline;
* temporary: also single-valued, and short-lived, so they get a short default TTL;
* ephemeral: events and passing interests that age out after a default TTL unless the caller gives
  ``valid_until``; they are also never "identity" in the prompt;
* everything else (including ``decided``) is multi-valued and durable.
"""

from __future__ import annotations

import re
import unicodedata

SINGLE_VALUED: frozenset[str] = frozenset(
    {"works_at", "lives_in", "has_role", "has_status", "is_married_to", "has_partner", "studies_at"}
)
TEMPORARY: frozenset[str] = frozenset({"staying_in", "visiting"})
EPHEMERAL: frozenset[str] = frozenset({"interested_in", "completed", "acquired", "disposed_of", "traveled_to"})
# Durable (no TTL) but one-off: shown when the message is about it, never as always-on identity.
CONTEXTUAL: frozenset[str] = EPHEMERAL | {"decided"}

_OTHER = {"decided", "knows", "likes", "dislikes", "owns", "has_pet"}
SUGGESTED: tuple[str, ...] = tuple(sorted(SINGLE_VALUED | TEMPORARY | EPHEMERAL | _OTHER))

FUZZY_THRESHOLD = 0.6
_PREDICATE_RE = re.compile(r"[^a-z0-9]+")
_WORD_RE = re.compile(r"[0-9a-z]+")


def normalize_predicate(raw: str) -> str:
    """'Works At' / 'works-at' -> 'works_at'. Empty result means the predicate is unusable."""
    text = unicodedata.normalize("NFKC", raw).casefold().strip()
    return _PREDICATE_RE.sub("_", text).strip("_")[:64]


def normalize_entity(raw: str) -> str:
    """Matching key of a subject/object: NFKC, casefolded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", raw).casefold().split())


def words_ordered(text: str) -> list[str]:
    return _WORD_RE.findall(normalize_entity(text))


def words(text: str) -> set[str]:
    return set(words_ordered(text))


def similar(a: str, b: str, *, threshold: float = FUZZY_THRESHOLD) -> bool:
    """Word-level Jaccard >= threshold, and the numbers in both must be the same, in the same order.

    The numeric rule keeps "finished chapter 1 of thesis" and "finished chapter 2 of thesis" apart:
    their word sets overlap by 4/6, yet they are different facts.
    """
    la, lb = words_ordered(a), words_ordered(b)
    if not la or not lb:
        return normalize_entity(a) == normalize_entity(b)
    if [w for w in la if w.isdigit()] != [w for w in lb if w.isdigit()]:
        return False
    wa, wb = set(la), set(lb)
    return len(wa & wb) / len(wa | wb) >= threshold


def default_ttl_days(predicate: str, *, ephemeral_days: float, temporary_days: float) -> float | None:
    if predicate in EPHEMERAL:
        return ephemeral_days
    if predicate in TEMPORARY:
        return temporary_days
    return None


def supersedes(predicate: str) -> bool:
    return predicate in SINGLE_VALUED or predicate in TEMPORARY
