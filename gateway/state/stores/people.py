"""One person's rows, table by table: read them all (export), erase them all (``kith users delete``),
write them back under a user id (import).

Which rows are a person's is decided here, for every table of the schema: a table either has a
``user_id`` column (its rows with the person's id are theirs, whatever the table is, so a table added
later is covered without an edit here), or is named in ``_RULES`` (rows found through the person's
accounts, sessions or memory scope), or is named in ``NOT_PERSONAL`` (rows that name nobody).
tests/users/test_erase_schema.py walks the migrated schema and fails on a table in none of the three.

What each driver adds (``People`` is abstract): reading its schema catalogue, and making an erase
final: SQLite overwrites what it deletes and truncates its write-ahead log
(``gateway.state.sqlite.people``), PostgreSQL vacuums the tables (``gateway.state.postgres.people``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from gateway.state.database import Database, greater
from gateway.state.errors import StorageError
from gateway.state.timestamps import ts

Rows = dict[str, list[dict[str, Any]]]

# Tables whose rows name no person: message-id dedupe keys, global watermarks, per-channel counters,
# invites (not yet anyone's), the schema's own bookkeeping.
NOT_PERSONAL = frozenset({"dedupe", "watermarks", "access_pairing_stats", "access_invites", "schema_version"})

_ACCOUNT = "(channel, account_id) IN (SELECT channel, account_id FROM _erase_accounts)"
_SESSION = "session_id IN (SELECT session_id FROM _erase_sessions)"
_SCOPE = "scope = :scope"

# table -> WHERE clause over the temp tables (_erase_accounts, _erase_sessions) and :uid / :scope.
_RULES: dict[str, str] = {
    # A group session the person opened stays (the others' turns are in it); only their own turns go.
    "sessions": "user_id = :uid OR scope_key = :scope",
    "turns": f"user_id = :uid OR {_SESSION}",
    "compactions": _SESSION,
    "bg_writer": _SESSION,
    "link_requests": (
        "issuer_user = :uid OR redeemer_user = :uid"
        " OR (issuer_channel, issuer_account) IN (SELECT channel, account_id FROM _erase_accounts)"
        " OR (redeemer_channel, redeemer_account) IN (SELECT channel, account_id FROM _erase_accounts)"
    ),
    "access_pairing": _ACCOUNT,
    "access_pairing_issued": _ACCOUNT,
    "access_approved": _ACCOUNT,
    "bg_sleep": _SCOPE,
    "bg_sleep_runs": _SCOPE,
    "bg_retention": _SCOPE,
}
# Rows restored on import (checked first: gateway/identity/import_rows.py). Progress rows are not: they
# point at transcript positions, which change; import writes fresh watermarks instead (``restore``).
# Access approvals are not either: an approval is the operator's, on this instance (docs/security.md).
_RESTORED = ("users", "identities", "sessions", "turns", "compactions", "conversations", "persona_choices",
             "kg_facts", "bg_distill")  # fmt: skip
# An account (or a conversation) taken by someone else meanwhile stays theirs: its row is skipped.
_KEEP_EXISTING = ("identities", "conversations")


_FTS_SHADOWS = ("_data", "_idx", "_config", "_docsize", "_content")
# How rows() orders a table: insertion order. The AUTOINCREMENT keys are SQLite's rowid and
# PostgreSQL's identity columns; elsewhere the driver's row id (``Database.row_id``).
_INSERTION_ORDER = {"turns": "seq", "kg_facts": "id"}


def classify(tables: dict[str, list[str]], fts: frozenset[str] = frozenset()) -> dict[str, str]:
    """How each table's rows are found: ``rule``, ``user_id``, ``none``; ``fts`` for a full-text index
    (and its shadow tables), kept by triggers on its content table and compacted after an erase;
    ``unknown`` is a table erase would miss (a test fails on it)."""
    out = {}
    shadows = {f + suffix for f in fts for suffix in _FTS_SHADOWS}
    for table, columns in tables.items():
        if table in fts or table in shadows:
            out[table] = "fts"
        elif table in _RULES:
            out[table] = "rule"
        elif "user_id" in columns:
            out[table] = "user_id"
        elif table in NOT_PERSONAL:
            out[table] = "none"
        else:
            out[table] = "unknown"
    return out


class People(ABC):
    def __init__(self, db: Database) -> None:
        self._db = db

    @abstractmethod
    def tables(self) -> dict[str, list[str]]:
        """Every table of the database and its columns (the driver's schema catalogue; not the driver's
        own bookkeeping, such as SQLite's ``sqlite_sequence``)."""

    @abstractmethod
    def fts_tables(self) -> frozenset[str]:
        """The full-text tables (kept by triggers from ``turns``; none where full text is an index)."""

    @abstractmethod
    def erase_user(self, user_id: str) -> dict[str, int]:
        """Delete every row of the person (``erase_rows``) and make it final; rows deleted per table."""

    @abstractmethod
    def scrub(self, *, merge_search: bool = False) -> None:
        """Drop what the database keeps of deleted rows beside its tables (a write-ahead log);
        ``merge_search``: also what its full-text index keeps of rewritten rows (a forget)."""

    @abstractmethod
    def _after_erase(self) -> None:
        """Inside the erase's transaction, after its deletes: what the driver's full text needs."""

    def _where(self, tables: dict[str, list[str]]) -> dict[str, str]:
        kinds = classify(tables, self.fts_tables())
        missed = sorted(t for t, k in kinds.items() if k == "unknown")
        if missed:
            raise StorageError(f"tables {missed} are not known to hold or not hold a person's rows "
                               "(gateway/state/stores/people.py)")  # fmt: skip
        found = {t: k for t, k in kinds.items() if k in ("rule", "user_id")}
        return {t: (_RULES[t] if k == "rule" else "user_id = :uid") for t, k in found.items()}

    def _scoped(self, user_id: str, fn: Callable[[dict[str, str], dict[str, str]], Any]) -> Any:
        """Run ``fn(where, params)`` inside one transaction with the person's accounts and DM sessions
        in temp tables (taken before anything is deleted)."""
        params = {"uid": user_id, "scope": f"user:{user_id}"}
        with self._db.tx():
            self._db.run("CREATE TEMP TABLE IF NOT EXISTS _erase_accounts(channel TEXT, account_id TEXT)")
            self._db.run("CREATE TEMP TABLE IF NOT EXISTS _erase_sessions(session_id TEXT PRIMARY KEY)")
            self._db.run("DELETE FROM _erase_accounts")
            self._db.run("DELETE FROM _erase_sessions")
            self._db.run("INSERT INTO _erase_accounts SELECT channel, account_id FROM identities WHERE user_id=?",
                         (user_id,))  # fmt: skip
            self._db.run("INSERT INTO _erase_sessions SELECT session_id FROM sessions WHERE scope_key=?",
                         (params["scope"],))  # fmt: skip
            try:
                return fn(self._where(self.tables()), params)
            finally:
                self._db.run("DELETE FROM _erase_accounts")
                self._db.run("DELETE FROM _erase_sessions")

    def rows(self, user_id: str) -> Rows:
        """Every row of the person, by table (column name -> value), in insertion order."""

        def read(where: dict[str, str], params: dict[str, str]) -> Rows:
            out: Rows = {}
            for table, clause in where.items():
                order = _INSERTION_ORDER.get(table, self._db.row_id)
                cur = self._db.run(f"SELECT * FROM {quote(table)} WHERE {clause} ORDER BY {order}", params)
                cols = [d[0] for d in cur.description]
                found = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
                if found:
                    out[table] = found
            return out

        return dict(self._scoped(user_id, read))

    def summaries(self) -> dict[str, dict[str, Any]]:
        """Per user id: ``last_seen`` (ISO text or None), ``sessions``, ``turns``, ``facts`` and
        ``persona`` (their own default choice, or None): what ``kith users list`` shows."""
        out: dict[str, dict[str, Any]] = {
            str(r[0]): {"last_seen": None, "sessions": 0, "turns": 0, "facts": 0, "persona": None}
            for r in self._db.all("SELECT user_id FROM users")
        }
        tables = self.tables()

        def put(sql: str, key: str) -> None:
            for uid, value in self._db.all(sql):
                if uid in out:
                    out[uid][key] = value

        put("SELECT user_id, max(last_active_at) FROM sessions GROUP BY user_id", "last_seen")
        put("SELECT user_id, count(*) FROM sessions GROUP BY user_id", "sessions")
        put("SELECT user_id, count(*) FROM turns WHERE role='user' GROUP BY user_id", "turns")
        if "kg_facts" in tables:
            put("SELECT user_id, count(*) FROM kg_facts WHERE valid_until IS NULL GROUP BY user_id", "facts")
        if "persona_choices" in tables:
            put("SELECT user_id, persona FROM persona_choices WHERE conversation_key=''", "persona")
        return out

    def erase_rows(self, user_id: str) -> dict[str, int]:
        """Delete every row of the person (see the module docstring), in one transaction; rows deleted
        per table. ``erase_user`` calls it and makes the deletion final."""
        counts: dict[str, int] = self._scoped(user_id, self._erase)
        return counts

    def _erase(self, where: dict[str, str], params: dict[str, str]) -> dict[str, int]:
        """The deletes of ``erase_user``, inside ``_scoped``; rows deleted per table."""
        counts: dict[str, int] = {}
        # A group session the person opened is kept for the others in it, without their id.
        kept = self._db.run("UPDATE sessions SET user_id='' WHERE user_id=:uid AND scope_key != :scope",
                            params).rowcount  # fmt: skip
        if kept:
            counts["sessions (group, kept without the person)"] = kept
        for table, clause in where.items():
            n = self._db.run(f"DELETE FROM {quote(table)} WHERE {clause}", params).rowcount
            if n:
                counts[table] = n
        self._after_erase()
        return counts

    def restore(self, user_id: str, rows: Rows, *, session_ids: dict[str, str]) -> dict[str, int]:
        """Write ``rows`` (from ``rows()`` of another database or user id) as user ``user_id``: ids and
        scopes are rewritten, sessions renamed through ``session_ids`` (old -> new; a row naming a
        session not in it is refused), transcript positions and fact ids are new (a summary's
        ``upto_seq`` follows its turns to their new positions), and the writer and sleep-cycle
        watermarks are set past the imported turns so the background jobs do not distil them a second
        time. One transaction."""
        counts: dict[str, int] = {}
        tables = self.tables()
        # old session id -> (old seq, new seq) of its imported turns; only a summary needs them
        moved: dict[str, list[tuple[int, int]]] | None = {} if rows.get("compactions") else None
        with self._db.tx():
            for table in _RESTORED:
                if table not in tables:
                    continue
                for row in rows.get(table, []):
                    row = {k: v for k, v in row.items() if k in tables[table]}
                    old_seq = row.pop("seq", None) if table == "turns" else None
                    if table == "kg_facts":
                        row.pop("id", None)
                        row["replay_key"] = None  # tied to transcript positions of the old database
                    if "user_id" in row:
                        row["user_id"] = user_id
                    if "scope_key" in row and str(row["scope_key"]).startswith("user:"):
                        row["scope_key"] = f"user:{user_id}"
                    old_session = row.get("session_id")
                    if old_session is not None:
                        if old_session not in session_ids:
                            raise StorageError(f"{table} row names session {old_session!r}, not one of the archive's")
                        row["session_id"] = session_ids[old_session]
                    if table == "compactions":
                        row["upto_seq"] = _moved((moved or {}).get(str(old_session), []), row.get("upto_seq"))
                    cols = list(row)
                    keep = " ON CONFLICT DO NOTHING" if table in _KEEP_EXISTING else ""
                    n = self._db.run(f"INSERT INTO {quote(table)}({', '.join(quote(c) for c in cols)})"
                                     f" VALUES ({', '.join('?' for _ in cols)}){keep}",
                                     [row[c] for c in cols]).rowcount  # fmt: skip
                    counts[table] = counts.get(table, 0) + n
                    if table == "turns" and moved is not None and isinstance(old_seq, int):
                        last = self._db.one("SELECT max(seq) FROM turns WHERE session_id=?", (row["session_id"],))
                        if last and last[0] is not None:
                            moved.setdefault(str(old_session), []).append((old_seq, int(last[0])))
            for session_id in set(session_ids.values()):
                last = self._db.one("SELECT max(seq) FROM turns WHERE session_id=?", (session_id,))
                if last and last[0] is not None:
                    self._db.run("INSERT INTO bg_writer(session_id, last_seq, updated_at) VALUES (?, ?, ?)"
                                 " ON CONFLICT(session_id) DO UPDATE SET last_seq=excluded.last_seq,"
                                 " updated_at=excluded.updated_at", (session_id, last[0], ts()))  # fmt: skip
            last = self._db.one("SELECT max(seq) FROM turns WHERE user_id=?", (user_id,))
            if last and last[0] is not None:
                self._db.run("INSERT INTO bg_sleep(scope, last_seq, last_slot, updated_at) VALUES (?, ?, '', ?)"
                             " ON CONFLICT(scope) DO UPDATE SET"
                             f" last_seq={greater('bg_sleep.last_seq', 'excluded.last_seq')}",
                             (f"user:{user_id}", last[0], ts()))  # fmt: skip
        return counts


def _moved(turns: list[tuple[int, int]], upto: Any) -> int:
    """A summary's ``upto_seq`` in the new transcript: the new position of the last imported turn of
    its session (``turns``: old seq, new seq) at or before the old one (0: the summary covers none)."""
    if not isinstance(upto, int):
        return 0
    return max((new for old, new in turns if old <= upto), default=0)


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
