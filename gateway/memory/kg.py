"""Temporal knowledge graph: subject/predicate/object facts with validity windows, on SQLite.

Facts are never overwritten: a new value of a single-valued predicate closes the old row
(``valid_until``), so ``current()`` answers "what is true now" and ``timeline()`` answers "what was
ever true". Semantics, predicate classes and the idempotency rule are documented in docs/knowledge.md.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gateway.memory import kg_predicates as preds
from gateway.memory.kg_schema import COLUMNS, Fact, connect, replay_key, row_to_fact
from gateway.memory.kg_select import format_facts, select_relevant_facts
from gateway.memory.kg_time import TimeLike, add_days, from_db, parse_time, to_db, utcnow

__all__ = ["AddResult", "Fact", "KnowledgeGraph", "format_facts"]

MAX_TEXT = 300  # chars of a subject or object; longer is a sentence, not an entity

AddStatus = Literal["inserted", "duplicate", "merged", "replayed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AddResult:
    fact: Fact
    status: AddStatus  # inserted | duplicate (exact) | merged (near-duplicate) | replayed (same source)
    superseded: tuple[int, ...] = ()


class KnowledgeGraph:
    def __init__(
        self,
        path: Path | str,
        *,
        ephemeral_ttl_days: float = 90.0,
        temporary_ttl_days: float = 14.0,
        fuzzy_threshold: float = preds.FUZZY_THRESHOLD,
    ) -> None:
        self.path = Path(path)
        self.ephemeral_ttl_days = ephemeral_ttl_days
        self.temporary_ttl_days = temporary_ttl_days
        self.fuzzy_threshold = fuzzy_threshold
        self._conn = connect(str(self.path))
        self._lock = threading.Lock()  # one connection, shared by threads (asyncio.to_thread callers)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> KnowledgeGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[None]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:  # also on cancellation: never leave a transaction open; re-raised
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _select(self, where: str, params: Iterable[object], order: str = "valid_from, id") -> list[Fact]:
        sql = f"SELECT {COLUMNS} FROM kg_facts WHERE {where} ORDER BY {order}"
        with self._lock:
            rows = self._conn.execute(sql, tuple(params)).fetchall()
        return [row_to_fact(r) for r in rows]

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
        created = to_db(now if now is not None else utcnow())
        vf = to_db(valid_from) if valid_from is not None else created
        if valid_until is not None:
            vu: str | None = to_db(valid_until)
        else:
            ttl = preds.default_ttl_days(
                pred, ephemeral_days=self.ephemeral_ttl_days, temporary_days=self.temporary_ttl_days
            )
            vu = add_days(from_db(vf), ttl) if ttl is not None else None
        if vu is not None and vu <= vf:
            raise ValueError("valid_until must be later than valid_from")
        conf = min(1.0, max(0.0, float(confidence)))
        skey, okey = preds.normalize_entity(subject), preds.normalize_entity(obj)
        rkey = replay_key(user_id, skey, pred, okey, source_type, source_ref)
        with self._tx():
            return self._add_locked(
                user_id, subject, skey, pred, obj, okey, vf, vu, conf, source_type, source_ref, rkey, created
            )

    def _add_locked(
        self,
        user_id: str,
        subject: str,
        skey: str,
        pred: str,
        obj: str,
        okey: str,
        vf: str,
        vu: str | None,
        conf: float,
        source_type: str,
        source_ref: str,
        rkey: str | None,
        created: str,
    ) -> AddResult:
        c = self._conn
        if rkey is not None:
            row = c.execute(f"SELECT {COLUMNS} FROM kg_facts WHERE replay_key = ?", (rkey,)).fetchone()
            if row is not None:
                return AddResult(fact=row_to_fact(row), status="replayed")
        # Rows of the same (scope, subject, predicate) whose window overlaps the new one.
        overlapping = [
            row_to_fact(r)
            for r in c.execute(
                f"SELECT {COLUMNS} FROM kg_facts WHERE user_id = ? AND subject_key = ? AND predicate = ? "
                "AND (valid_until IS NULL OR valid_until > ?) AND (? IS NULL OR valid_from < ?) "
                "ORDER BY valid_from, id",
                (user_id, skey, pred, vf, vu, vu),
            )
        ]
        for old in overlapping:
            exact = preds.normalize_entity(old.object) == okey
            if exact or preds.similar(old.object, obj, threshold=self.fuzzy_threshold):
                return self._merge(old, vf, vu, conf, "duplicate" if exact else "merged")
        superseded: list[int] = []
        if preds.supersedes(pred):
            for old in overlapping:
                if to_db(old.valid_from) <= vf:
                    c.execute("UPDATE kg_facts SET valid_until = ? WHERE id = ?", (vf, old.id))
                    superseded.append(old.id)
                else:
                    # A later value is already known: the new fact is history and ends where it begins.
                    later = to_db(old.valid_from)
                    vu = later if vu is None or later < vu else vu
        cur = c.execute(
            "INSERT INTO kg_facts (user_id, subject, subject_key, predicate, object, object_key, valid_from, "
            "valid_until, confidence, source_type, source_ref, replay_key, created_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (user_id, subject, skey, pred, obj, okey, vf, vu, conf, source_type, source_ref, rkey, created),
        )
        row = c.execute(f"SELECT {COLUMNS} FROM kg_facts WHERE id = ?", (cur.lastrowid,)).fetchone()
        return AddResult(fact=row_to_fact(row), status="inserted", superseded=tuple(superseded))

    def _merge(self, old: Fact, vf: str, vu: str | None, conf: float, status: AddStatus) -> AddResult:
        """Fold a repeat into the existing row: earliest start, highest confidence, and a refreshed
        TTL for auto-expiring predicates (mentioning an interest again keeps it alive)."""
        new_vf = min(to_db(old.valid_from), vf)
        new_vu = to_db(old.valid_until) if old.valid_until else None
        ttl_pred = old.predicate in preds.EPHEMERAL or old.predicate in preds.TEMPORARY
        if ttl_pred and new_vu is not None and vu is not None and vu > new_vu:
            new_vu = vu
        new_conf = max(old.confidence, conf)
        self._conn.execute(
            "UPDATE kg_facts SET valid_from = ?, valid_until = ?, confidence = ? WHERE id = ?",
            (new_vf, new_vu, new_conf, old.id),
        )
        row = self._conn.execute(f"SELECT {COLUMNS} FROM kg_facts WHERE id = ?", (old.id,)).fetchone()
        return AddResult(fact=row_to_fact(row), status=status)

    def invalidate(self, fact_id: int, *, at: TimeLike | None = None) -> bool:
        """End a fact's validity (kept in the timeline). False if unknown or already ended by then."""
        when = to_db(at if at is not None else utcnow())
        with self._tx():
            cur = self._conn.execute(
                "UPDATE kg_facts SET valid_until = ? WHERE id = ? AND valid_from <= ? "
                "AND (valid_until IS NULL OR valid_until > ?)",
                (when, fact_id, when, when),
            )
            return cur.rowcount > 0

    def delete(self, fact_id: int) -> bool:
        """Hard delete (a wrong fact, not an outdated one: use invalidate for those)."""
        with self._tx():
            return self._conn.execute("DELETE FROM kg_facts WHERE id = ?", (fact_id,)).rowcount > 0

    def prune_expired(self, before: TimeLike, *, user_id: str | None = None) -> int:
        """Delete facts whose validity ended before ``before`` (the retention cutoff)."""
        cutoff = to_db(before)
        sql = "DELETE FROM kg_facts WHERE valid_until IS NOT NULL AND valid_until < ?"
        params: tuple[object, ...] = (cutoff,)
        if user_id is not None:
            sql, params = sql + " AND user_id = ?", (cutoff, user_id)
        with self._tx():
            return self._conn.execute(sql, params).rowcount

    # ------------------------------------------------------------------------------------- reads

    def get(self, fact_id: int) -> Fact | None:
        found = self._select("id = ?", (fact_id,))
        return found[0] if found else None

    def current(
        self,
        user_id: str | None = None,
        *,
        as_of: TimeLike | None = None,
        subject: str | None = None,
        predicate: str | None = None,
    ) -> list[Fact]:
        """Facts valid at ``as_of`` (default now): valid_from <= t < valid_until."""
        t = to_db(as_of if as_of is not None else utcnow())
        where, params = ["valid_from <= ?", "(valid_until IS NULL OR valid_until > ?)"], [t, t]
        if user_id is not None:
            where.append("user_id = ?")
            params.append(user_id)
        if subject is not None:
            where.append("subject_key = ?")
            params.append(preds.normalize_entity(subject))
        if predicate is not None:
            where.append("predicate = ?")
            params.append(preds.normalize_predicate(predicate))
        return self._select(" AND ".join(where), params)

    def all(self, user_id: str | None = None) -> list[Fact]:
        if user_id is None:
            return self._select("1", ())
        return self._select("user_id = ?", (user_id,))

    def timeline(self, entity: str, *, user_id: str | None = None) -> list[Fact]:
        """Every fact, past and present, whose subject or object is ``entity``, oldest first."""
        key = preds.normalize_entity(entity)
        where, params = "(subject_key = ? OR object_key = ?)", [key, key]
        if user_id is not None:
            where, params = where + " AND user_id = ?", [key, key, user_id]
        return self._select(where, params)

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
