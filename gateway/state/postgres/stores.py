"""The stores whose SQLite statements have no portable form: the rest run as they are (``dialect``).

Full text: SQLite's FTS5 table ``turns_fts`` is, here, a GIN index over
``to_tsvector('simple', kith_unaccent(content))`` (words lower-cased, not stemmed, diacritics folded, like
FTS5's ``unicode61 remove_diacritics 2``; without the ``unaccent`` extension nothing is folded:
``gateway.state.postgres.fulltext``). The schema is
read from the catalogue instead of ``sqlite_master``; erasing a person deletes their rows and then
vacuums the tables it touched (PostgreSQL keeps deleted rows until a vacuum reclaims them).
"""

from __future__ import annotations

from gateway.state.postgres.database import PgDatabase
from gateway.state.postgres.fulltext import FOLDED, QUERY
from gateway.state.records import Fact, NewFact
from gateway.state.sqlite.knowledge import INSERT_FACT, SqliteKnowledge, insert_args
from gateway.state.sqlite.people import SqlitePeople
from gateway.state.sqlite.transcript import SqliteTurns
from gateway.state.words import query_words

_CONTENT, _WORDS = FOLDED.format("t.content"), QUERY.format("%s")


def table_columns(db: PgDatabase) -> dict[str, list[str]]:
    """Every table of the current schema and its columns, in column order."""
    rows = db.native(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
        " ORDER BY table_name, ordinal_position"
    ).fetchall()
    out: dict[str, list[str]] = {}
    for table, column in rows:
        out.setdefault(str(table), []).append(str(column))
    return out


class PgKnowledge(SqliteKnowledge):
    def __init__(self, db: PgDatabase) -> None:
        super().__init__(db)  # type: ignore[arg-type]
        self._pg = db

    def insert(self, fact: NewFact) -> Fact:
        row = self._pg.one(INSERT_FACT + " RETURNING id", insert_args(fact))
        assert row is not None
        inserted = self.get(int(row[0]))
        assert inserted is not None
        return inserted


class PgTurns(SqliteTurns):
    def __init__(self, db: PgDatabase) -> None:
        super().__init__(db)  # type: ignore[arg-type]
        self._pg = db

    def set_content(self, user_id: str, seq: int, content: str) -> bool:
        """Rewrite one row (no ``secure_delete`` here: the old row version goes at the next
        ``people.scrub(merge_search=True)``, a VACUUM of ``turns``)."""
        cur = self._db.run("UPDATE turns SET content=? WHERE seq=? AND user_id=?", (content, seq, user_id))
        return cur.rowcount > 0

    def search_sessions(self, user_id: str, text: str, *, limit: int = 20) -> list[str]:
        """Ids of the person's direct sessions whose messages hold every word of ``text``, best first."""
        words = " ".join(query_words(text))
        if not words:
            return []
        rows = self._pg.native(
            f"SELECT t.session_id, max(ts_rank({_CONTENT}, q)) AS best"
            f" FROM turns t JOIN sessions s ON s.session_id=t.session_id, {_WORDS} q"
            f" WHERE {_CONTENT} @@ q AND t.user_id=%s AND s.scope_key=%s"
            " GROUP BY t.session_id ORDER BY best DESC, t.session_id LIMIT %s",
            (words, user_id, f"user:{user_id}", limit),
        ).fetchall()
        return [r[0] for r in rows]

    def rows_with_words(self, user_id: str, text: str, *, limit: int = 2000) -> list[tuple[int, str]]:
        """(seq, content) of the person's direct-conversation rows holding every word of ``text``."""
        words = " ".join(query_words(text))
        if not words:
            return []
        rows = self._pg.native(
            "SELECT t.seq, t.content FROM turns t JOIN sessions s ON s.session_id=t.session_id"
            f" WHERE {_CONTENT} @@ {_WORDS} AND t.user_id=%s"
            " AND s.scope_key=%s ORDER BY t.seq LIMIT %s",
            (words, user_id, f"user:{user_id}", limit),
        ).fetchall()
        return [(r[0], r[1]) for r in rows]


class PgPeople(SqlitePeople):
    def __init__(self, db: PgDatabase) -> None:
        super().__init__(db)  # type: ignore[arg-type]
        self._pg = db

    def tables(self) -> dict[str, list[str]]:
        return table_columns(self._pg)

    def fts_tables(self) -> frozenset[str]:
        return frozenset()  # full text is an index of turns, not a table

    def erase_user(self, user_id: str) -> dict[str, int]:
        """Delete every row of the person; rows deleted per table. Then vacuum the tables touched, so the
        dead rows' space is marked free for reuse (their bytes go when it is reused: see
        docs/architecture.md "Storage" on what a server keeps)."""
        counts: dict[str, int] = self._scoped(user_id, self._erase)
        self._vacuum(sorted({t.split(" ")[0] for t in counts}))
        return counts

    def scrub(self, *, merge_search: bool = False) -> None:
        """No write-ahead log file of kith's to truncate, and ``erase_user`` has vacuumed the tables it
        deleted from. ``merge_search`` (rewritten transcript rows, a forget): vacuum ``turns``, whose
        old row versions hold the old text until then."""
        if merge_search:
            self._vacuum(["turns"])

    def _vacuum(self, tables: list[str]) -> None:
        # VACUUM cannot run inside a transaction: called within an outer tx(), autovacuum does it later.
        if tables and not self._pg.in_transaction():
            self._pg.native("VACUUM " + ", ".join(f'"{t}"' for t in tables))
