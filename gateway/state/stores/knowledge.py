"""The knowledge graph's facts (table ``kg_facts``).

Storage only: which row a new fact merges into, supersedes or duplicates is decided by
``gateway.memory`` (the knowledge graph), which calls these inside ``State.tx()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from gateway.state.database import Database, Row
from gateway.state.records import Fact, NewFact
from gateway.state.timestamps import parse_ts, ts

_COLUMNS = (
    "id, user_id, subject, predicate, object, valid_from, valid_until, confidence, source_type, source_ref, created_at"
)


def _fact(r: Row) -> Fact:
    return Fact(id=int(r[0]), user_id=str(r[1]), subject=str(r[2]), predicate=str(r[3]), object=str(r[4]),
                valid_from=parse_ts(str(r[5])), valid_until=parse_ts(str(r[6])) if r[6] is not None else None,
                confidence=float(r[7]), source_type=str(r[8]), source_ref=str(r[9]),
                created_at=parse_ts(str(r[10])))  # fmt: skip


_INSERT_FACT = (
    "INSERT INTO kg_facts (user_id, subject, subject_key, predicate, object, object_key, valid_from, "
    "valid_until, confidence, source_type, source_ref, replay_key, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
    " RETURNING id"
)


def _insert_args(fact: NewFact) -> tuple[object, ...]:
    return (fact.user_id, fact.subject, fact.subject_key, fact.predicate, fact.object, fact.object_key,
            ts(fact.valid_from), ts(fact.valid_until) if fact.valid_until is not None else None,
            fact.confidence, fact.source_type, fact.source_ref, fact.replay_key, ts(fact.created_at))  # fmt: skip


class Knowledge:
    def __init__(self, db: Database) -> None:
        self._db = db

    def _select(self, where: str, params: Sequence[object], order: str = "valid_from, id") -> list[Fact]:
        return [_fact(r) for r in self._db.all(f"SELECT {_COLUMNS} FROM kg_facts WHERE {where} ORDER BY {order}",
                                               tuple(params))]  # fmt: skip

    # ------------------------------------------------------------------------------------ reads
    def get(self, fact_id: int) -> Fact | None:
        found = self._select("id = ?", (fact_id,))
        return found[0] if found else None

    def by_replay_key(self, replay_key: str) -> Fact | None:
        found = self._select("replay_key = ?", (replay_key,))
        return found[0] if found else None

    def overlapping(self, user_id: str, subject_key: str, predicate: str, valid_from: datetime,
                    valid_until: datetime | None) -> list[Fact]:  # fmt: skip
        """Rows of the same (scope, subject, predicate) whose window overlaps [valid_from, valid_until)."""
        vf, vu = ts(valid_from), ts(valid_until) if valid_until is not None else None
        return self._select(
            "user_id = ? AND subject_key = ? AND predicate = ? AND (valid_until IS NULL OR valid_until > ?) "
            "AND (CAST(? AS TEXT) IS NULL OR valid_from < ?)",  # typed: PostgreSQL binds it too
            (user_id, subject_key, predicate, vf, vu, vu),
        )

    def current(self, at: datetime, *, user_id: str | None = None, subject_key: str | None = None,
                predicate: str | None = None) -> list[Fact]:  # fmt: skip
        """Facts valid at ``at``: valid_from <= at < valid_until."""
        t = ts(at)
        where, params = ["valid_from <= ?", "(valid_until IS NULL OR valid_until > ?)"], [t, t]
        for column, value in (("user_id", user_id), ("subject_key", subject_key), ("predicate", predicate)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        return self._select(" AND ".join(where), params)

    def all(self, user_id: str | None = None) -> list[Fact]:
        if user_id is None:
            return self._select("TRUE", ())  # TRUE, not 1: PostgreSQL runs this statement too
        return self._select("user_id = ?", (user_id,))

    def timeline(self, entity_key: str, *, user_id: str | None = None) -> list[Fact]:
        """Every fact whose subject or object (normalised) is ``entity_key``, oldest first."""
        where, params = "(subject_key = ? OR object_key = ?)", [entity_key, entity_key]
        if user_id is not None:
            where, params = where + " AND user_id = ?", [entity_key, entity_key, user_id]
        return self._select(where, params)

    # ----------------------------------------------------------------------------------- writes
    def insert(self, fact: NewFact) -> Fact:
        with self._db.atomic():
            # all(), not one(): a RETURNING statement left unfinished would hold SQLite's write lock.
            rows = self._db.all(_INSERT_FACT, _insert_args(fact))
            inserted = self.get(int(rows[0][0]))
        assert inserted is not None
        return inserted

    def end(self, fact_id: int, at: datetime) -> None:
        """Set the row's ``valid_until`` to ``at`` (a newer value supersedes it)."""
        self._db.run("UPDATE kg_facts SET valid_until = ? WHERE id = ?", (ts(at), fact_id))

    def reshape(self, fact_id: int, *, valid_from: datetime, valid_until: datetime | None, confidence: float) -> Fact:
        """Set a row's window and confidence (a repeat folded into it); the row as it is now."""
        with self._db.atomic():
            self._db.run(
                "UPDATE kg_facts SET valid_from = ?, valid_until = ?, confidence = ? WHERE id = ?",
                (ts(valid_from), ts(valid_until) if valid_until is not None else None, confidence, fact_id),
            )
            fact = self.get(fact_id)
        assert fact is not None
        return fact

    def invalidate(self, fact_id: int, at: datetime) -> bool:
        """End a fact's validity at ``at``; False if unknown, not yet valid then, or already ended by then."""
        when = ts(at)
        cur = self._db.run(
            "UPDATE kg_facts SET valid_until = ? WHERE id = ? AND valid_from <= ? "
            "AND (valid_until IS NULL OR valid_until > ?)",
            (when, fact_id, when, when),
        )
        return cur.rowcount > 0

    def delete(self, fact_id: int) -> bool:
        return self._db.run("DELETE FROM kg_facts WHERE id = ?", (fact_id,)).rowcount > 0

    def prune_expired(self, before: datetime, *, user_id: str | None = None) -> int:
        """Delete facts whose validity ended before ``before``; how many went."""
        sql = "DELETE FROM kg_facts WHERE valid_until IS NOT NULL AND valid_until < ?"
        params: tuple[object, ...] = (ts(before),)
        if user_id is not None:
            sql, params = sql + " AND user_id = ?", (ts(before), user_id)
        return self._db.run(sql, params).rowcount
