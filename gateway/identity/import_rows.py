"""The rows of ``kith users import`` (``rows.json``), checked whole before anything is written.

An archive is a file someone handed over, not a database dump kith made: every row of a table that
import restores is checked against that table's columns (text, integer, number, a stored UTC
timestamp in its one form, a value of a known set), and a row that fails refuses the whole archive
with the table, row and column named. Nothing is skipped silently and nothing is half-imported.

Ids are checked too, so a row cannot reach data that is not the archive's own:

* one person: exactly one ``users`` row, and every ``user_id`` in every row is that person's id;
* a message or a summary (``turns``, ``compactions``) names a session of the archive's own
  ``sessions``; the caller gives each such session a fresh id if the database holds that id already;
* a session is the person's own direct one (scope ``user:<their id>``) or a group session they
  spoke in (``conv:...``); the caller leaves the group ones out (``group_sessions``).

Turn ids are kept: they name a message only together with its session (the Markdown session log and
the transcript look a turn up within its session or scope), and the Markdown logs in the archive hold
the same ids, so the start-up reconciliation does not write the imported turns a second time.

What import leaves out by rule (``gateway/identity/import_.py`` and docs/security.md): access approvals
(``access_approved``), accounts someone holds, group conversations and group sessions with their
messages (a group's transcript is its memory's source: what came in there would be distilled into the
group's shared memory files).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gateway.state.timestamps import parse_ts, ts
from gateway.turn.tiers import MAX_TIER, MIN_TIER

Rows = dict[str, list[dict[str, Any]]]


class RowError(ValueError):
    """A row of ``rows.json`` is refused; the message names the table, the row and the column."""


@dataclass(frozen=True, slots=True)
class Column:
    kind: str  # text | id (non-empty text) | ts | int | real | zone | one of ``choices``
    required: bool = False  # NOT NULL without a default: the row must hold it
    nullable: bool = False
    choices: frozenset[str] = frozenset()


_T, _ID, _TS, _INT, _REAL = Column("text"), Column("id", True), Column("ts", True), Column("int"), Column("real")
_TS_NULL = Column("ts", nullable=True)
_TEXT_REQ = Column("text", True)

# Every table import restores, and its columns; a column not listed here is not restored (``kg_facts.id``
# and ``replay_key`` are positions of the old database; ``turns.seq`` only places a summary's
# ``upto_seq`` among the imported turns, which get new positions).
COLUMNS: dict[str, dict[str, Column]] = {
    "users": {"user_id": _ID, "display_name": _T, "timezone": Column("zone"), "created_at": _TS,
              "tier": Column("tier", nullable=True)},
    "identities": {"channel": _ID, "account_id": _ID, "user_id": _ID, "display_name": _T, "source": _T,
                   "created_at": _TS},
    "sessions": {"session_id": _ID, "user_id": _ID, "scope_key": _ID, "conversation_key": _TEXT_REQ,
                 "persona": _T, "started_at": _TS, "last_active_at": _TS, "ended_at": _TS_NULL},
    "turns": {"seq": _INT, "turn_id": _ID, "session_id": _ID, "user_id": _ID,
              "role": Column("choice", True, choices=frozenset({"user", "assistant"})),
              "content": _TEXT_REQ, "channel": _TEXT_REQ, "conversation_key": _TEXT_REQ, "speaker": _T,
              "created_at": _TS},
    "compactions": {"session_id": _ID, "upto_seq": Column("int", True), "summary": _TEXT_REQ, "updated_at": _TS},
    "conversations": {"conversation_key": _ID, "channel": _ID, "conversation_id": _TEXT_REQ,
                      "kind": Column("choice", True, choices=frozenset({"dm", "group"})), "user_id": _ID,
                      "persona": _T, "last_seen_at": _TS},
    "persona_choices": {"user_id": _ID, "conversation_key": _TEXT_REQ, "persona": _ID, "updated_at": _TS},
    "kg_facts": {"user_id": _ID, "subject": _TEXT_REQ, "subject_key": _TEXT_REQ, "predicate": _TEXT_REQ,
                 "object": _TEXT_REQ, "object_key": _TEXT_REQ, "valid_from": _TS, "valid_until": _TS_NULL,
                 "confidence": _REAL, "source_type": _T, "source_ref": _T, "created_at": _TS},
    "bg_distill": {"user_id": _ID, "tier": _ID, "status": _ID, "detail": _T, "chars": _INT, "started_at": _TS,
                   "finished_at": _TS_NULL},
}  # fmt: skip
# Exported, never restored: an approval is the operator's decision about an account on this instance.
NEVER_RESTORED = frozenset({"access_approved"})
_INT64 = 2**63 - 1


def _bad(table: str, index: int, column: str, why: str) -> RowError:
    return RowError(f"rows.json {table}[{index}].{column}: {why}; nothing was imported")


def _check_value(col: Column, value: Any) -> str | None:
    """Why ``value`` does not fit ``col`` (None when it does)."""
    if value is None:
        return None if col.nullable else "must not be null"
    if col.kind in ("text", "id", "ts", "zone", "choice"):
        if not isinstance(value, str):
            return f"must be text, not {type(value).__name__}"
        if "\x00" in value:
            return "holds a NUL character"
        if col.kind == "id" and not value.strip():
            return "must not be empty"
        if col.kind == "choice" and value not in col.choices:
            return f"{value[:40]!r} is not one of {sorted(col.choices)}"
        if col.kind == "ts":
            try:
                canonical = ts(parse_ts(value)) == value
            except ValueError:
                canonical = False
            if not canonical:
                return f"{value[:40]!r} is not a stored timestamp (UTC 'YYYY-MM-DD HH:MM:SS.ffffff')"
        if col.kind == "zone":
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                return f"{value[:40]!r} is not a time zone"
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number, not {type(value).__name__}"
    if col.kind == "real":
        return None if math.isfinite(value) else "must be a finite number"
    if not isinstance(value, int) or abs(value) > _INT64:
        return "must be a 64-bit integer"
    if col.kind == "tier" and not MIN_TIER <= value <= MAX_TIER:
        return f"must be {MIN_TIER}-{MAX_TIER} or null"
    return None


def check_types(rows: Rows) -> Rows:
    """``rows`` of the restored tables, each cut to its known columns, every value checked; raises
    ``RowError`` at the first row that does not fit."""
    out: Rows = {}
    for table, columns in COLUMNS.items():
        kept = []
        for i, row in enumerate(rows.get(table, [])):
            for name, col in columns.items():
                if name not in row:
                    if col.required:
                        raise _bad(table, i, name, "is missing")
                    continue
                why = _check_value(col, row[name])
                if why is not None:
                    raise _bad(table, i, name, why)
            kept.append({k: v for k, v in row.items() if k in columns})
        out[table] = kept
    return out


def check_ids(rows: Rows) -> str:
    """The archive's one person id; raises ``RowError`` for a row naming another person or a session
    that is not the archive's own (see the module docstring)."""
    users = rows.get("users", [])
    if len(users) != 1:
        raise RowError(f"rows.json holds {len(users)} users rows; an archive is one person's; nothing was imported")
    source = str(users[0]["user_id"])
    for table, found in rows.items():
        for i, row in enumerate(found):
            if "user_id" in row and row["user_id"] != source:
                raise _bad(table, i, "user_id", f"{str(row['user_id'])[:40]!r} is not the archive's person {source!r}")
    own = f"user:{source}"
    sessions: set[str] = set()
    for i, row in enumerate(rows.get("sessions", [])):
        scope = str(row["scope_key"])
        if scope != own and not scope.startswith("conv:"):
            raise _bad("sessions", i, "scope_key", f"{scope[:40]!r} is neither {own!r} nor a group's 'conv:' scope")
        if row["session_id"] in sessions:
            raise _bad("sessions", i, "session_id", "is listed twice")
        sessions.add(str(row["session_id"]))
    for table in ("turns", "compactions"):
        for i, row in enumerate(rows.get(table, [])):
            if row["session_id"] not in sessions:
                raise _bad(table, i, "session_id", f"{str(row['session_id'])[:40]!r} is not a session of the archive")
    return source


def leave_out_groups(rows: Rows) -> dict[str, int]:
    """Drop the group sessions (scope ``conv:...``) and the turns and summaries in them from ``rows``
    (checked by ``check_ids``); how many rows of each table were dropped."""
    groups = {r["session_id"] for r in rows.get("sessions", []) if str(r["scope_key"]).startswith("conv:")}
    dropped: dict[str, int] = {}
    for table in ("sessions", "turns", "compactions"):
        kept = [r for r in rows.get(table, []) if r["session_id"] not in groups]
        if len(kept) < len(rows.get(table, [])):
            dropped[f"{table} (group)"] = len(rows[table]) - len(kept)
        rows[table] = kept
    return dropped
