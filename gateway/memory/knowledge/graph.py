"""Temporal knowledge graph: subject/predicate/object facts with validity windows.

Facts are never overwritten: a new value of a single-valued predicate closes the old row
(``valid_until``), so ``current()`` answers "what is true now" and ``timeline()`` answers "what was
ever true". Semantics, predicate classes and the idempotency rule are documented in docs/knowledge.md.
The rules live here; the rows are the state's (``State.knowledge``), changed in ``State.tx()``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from gateway.memory.knowledge import predicates as preds
from gateway.memory.knowledge.relevance import format_facts, select_relevant_facts
from gateway.memory.knowledge.timestamps import TimeLike, parse_time, utcnow
from gateway.state import Fact, NewFact, State, open_state

__all__ = ["AddResult", "Fact", "KnowledgeGraph", "format_facts", "replay_key"]

MAX_TEXT = 300  # chars of a subject or object; longer is a sentence, not an entity

AddStatus = Literal["inserted", "duplicate", "merged", "replayed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AddResult:
    fact: Fact
    status: AddStatus  # inserted | duplicate (exact) | merged (near-duplicate) | replayed (same source)
    superseded: tuple[int, ...] = ()


def replay_key(
    user_id: str, subject_key: str, predicate: str, object_key: str, source_type: str, source_ref: str
) -> str | None:
    """Idempotency key: the same claim from the same source is one row, however often it is replayed.

    Without a ``source_ref`` there is no way to tell a replay from a genuine repeat, so no key is set
    and only the current-duplicate check in ``add`` applies.
    """
    if not source_ref:
        return None
    raw = "\x00".join((user_id, subject_key, predicate, object_key, source_type, source_ref))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class KnowledgeGraph:
    """The graph on a state: the gateway's (``KnowledgeGraph(gateway.state)``, sharing its one
    connection), or a database file of its own (``KnowledgeGraph(path)``: the CLI, tests), which it
    opens with the knowledge tables only and closes on ``close()``."""

    def __init__(
        self,
        state: State | Path | str,
        *,
        ephemeral_ttl_days: float = 90.0,
        temporary_ttl_days: float = 14.0,
        fuzzy_threshold: float = preds.FUZZY_THRESHOLD,
        owned: bool = False,
    ) -> None:
        # owned: close() closes the state too (a file opened here, or a state a command opened for it)
        self._owned = owned or isinstance(state, Path | str)
        if isinstance(state, Path | str):
            self.path: Path | None = Path(state)
            self.state: State = open_state(self.path, components=("knowledge",))
        else:
            self.path, self.state = None, state
        self.ephemeral_ttl_days = ephemeral_ttl_days
        self.temporary_ttl_days = temporary_ttl_days
        self.fuzzy_threshold = fuzzy_threshold

    def close(self) -> None:
        if self._owned:
            self.state.close()

    def __enter__(self) -> KnowledgeGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------ writes

    def add(
        self,
        user_id: str,
        subject: str,
        predicate: str,
        object: str,
        *,
        valid_from: TimeLike | None = None,
        valid_until: TimeLike | None = None,
        confidence: float = 1.0,
        source_type: str = "manual",
        source_ref: str = "",
        now: TimeLike | None = None,
    ) -> AddResult:
        """Insert a fact, or return the row that already holds it. Raises ValueError on bad input."""
        subject, obj, pred = subject.strip(), object.strip(), preds.normalize_predicate(predicate)
        if not user_id or not subject or not obj or not pred:
            raise ValueError("user_id, subject, predicate and object must be non-empty")
        if len(subject) > MAX_TEXT or len(obj) > MAX_TEXT:
            raise ValueError(f"subject and object are limited to {MAX_TEXT} characters")
        created = parse_time(now if now is not None else utcnow())
        vf = parse_time(valid_from) if valid_from is not None else created
        if valid_until is not None:
            vu: datetime | None = parse_time(valid_until)
        else:
            ttl = preds.default_ttl_days(
                pred, ephemeral_days=self.ephemeral_ttl_days, temporary_days=self.temporary_ttl_days
            )
            vu = vf + timedelta(days=ttl) if ttl is not None else None
        if vu is not None and vu <= vf:
            raise ValueError("valid_until must be later than valid_from")
        conf = min(1.0, max(0.0, float(confidence)))
        skey, okey = preds.normalize_entity(subject), preds.normalize_entity(obj)
        rkey = replay_key(user_id, skey, pred, okey, source_type, source_ref)
        new = NewFact(user_id=user_id, subject=subject, subject_key=skey, predicate=pred, object=obj, object_key=okey,
                      valid_from=vf, valid_until=vu, confidence=conf, source_type=source_type,
                      source_ref=source_ref, replay_key=rkey, created_at=created)  # fmt: skip
        with self.state.tx():
            return self._add_locked(new)

    def _add_locked(self, new: NewFact) -> AddResult:
        facts = self.state.knowledge
        if new.replay_key is not None:
            replayed = facts.by_replay_key(new.replay_key)
            if replayed is not None:
                return AddResult(fact=replayed, status="replayed")
        vf, vu = new.valid_from, new.valid_until
        # Rows of the same (scope, subject, predicate) whose window overlaps the new one.
        overlapping = facts.overlapping(new.user_id, new.subject_key, new.predicate, vf, vu)
        for old in overlapping:
            exact = preds.normalize_entity(old.object) == new.object_key
            if exact or preds.similar(old.object, new.object, threshold=self.fuzzy_threshold):
                return self._merge(old, vf, vu, new.confidence, "duplicate" if exact else "merged")
        superseded: list[int] = []
        if preds.supersedes(new.predicate):
            for old in overlapping:
                if old.valid_from <= vf:
                    facts.end(old.id, vf)
                    superseded.append(old.id)
                else:
                    # A later value is already known: the new fact is history and ends where it begins.
                    later = old.valid_from
                    vu = later if vu is None or later < vu else vu
        fact = facts.insert(replace(new, valid_until=vu))
        return AddResult(fact=fact, status="inserted", superseded=tuple(superseded))

    def _merge(self, old: Fact, vf: datetime, vu: datetime | None, conf: float, status: AddStatus) -> AddResult:
        """Fold a repeat into the existing row: earliest start, highest confidence, and a refreshed
        TTL for auto-expiring predicates (mentioning an interest again keeps it alive)."""
        new_vf = min(old.valid_from, vf)
        new_vu = old.valid_until
        ttl_pred = old.predicate in preds.EPHEMERAL or old.predicate in preds.TEMPORARY
        if ttl_pred and new_vu is not None and vu is not None and vu > new_vu:
            new_vu = vu
        new_conf = max(old.confidence, conf)
        fact = self.state.knowledge.reshape(old.id, valid_from=new_vf, valid_until=new_vu, confidence=new_conf)
        return AddResult(fact=fact, status=status)

    def invalidate(self, fact_id: int, *, at: TimeLike | None = None) -> bool:
        """End a fact's validity (kept in the timeline). False if unknown or already ended by then."""
        with self.state.tx():
            return self.state.knowledge.invalidate(fact_id, parse_time(at if at is not None else utcnow()))

    def delete(self, fact_id: int) -> bool:
        """Hard delete (a wrong fact, not an outdated one: use invalidate for those)."""
        with self.state.tx():
            return self.state.knowledge.delete(fact_id)

    def prune_expired(self, before: TimeLike, *, user_id: str | None = None) -> int:
        """Delete facts whose validity ended before ``before`` (the retention cutoff)."""
        with self.state.tx():
            return self.state.knowledge.prune_expired(parse_time(before), user_id=user_id)

    # ------------------------------------------------------------------------------------- reads

    def get(self, fact_id: int) -> Fact | None:
        return self.state.knowledge.get(fact_id)

    def current(
        self,
        user_id: str | None = None,
        *,
        as_of: TimeLike | None = None,
        subject: str | None = None,
        predicate: str | None = None,
    ) -> list[Fact]:
        """Facts valid at ``as_of`` (default now): valid_from <= t < valid_until."""
        return self.state.knowledge.current(
            parse_time(as_of if as_of is not None else utcnow()), user_id=user_id,
            subject_key=preds.normalize_entity(subject) if subject is not None else None,
            predicate=preds.normalize_predicate(predicate) if predicate is not None else None,
        )  # fmt: skip

    def all(self, user_id: str | None = None) -> list[Fact]:
        return self.state.knowledge.all(user_id)

    def timeline(self, entity: str, *, user_id: str | None = None) -> list[Fact]:
        """Every fact, past and present, whose subject or object is ``entity``, oldest first."""
        return self.state.knowledge.timeline(preds.normalize_entity(entity), user_id=user_id)

    def select_relevant(
        self,
        user_id: str,
        message: str,
        limit: int = 20,
        *,
        as_of: TimeLike | None = None,
        aliases: Iterable[str] = (),
    ) -> list[Fact]:
        """Prompt facts: identity facts (subject is the user or an alias; not ephemeral/decided)
        plus current facts whose subject or object is mentioned in ``message``."""
        at = parse_time(as_of) if as_of is not None else utcnow()
        facts = self.current(user_id, as_of=at)
        return select_relevant_facts(facts, message, limit=limit, identities=(user_id, *aliases))

    format_for_prompt = staticmethod(format_facts)
