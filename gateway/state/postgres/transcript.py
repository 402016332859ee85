"""The transcript's full-text search on PostgreSQL: SQLite's FTS5 table ``turns_fts`` is, here, the GIN
index ``turns_words`` over ``to_tsvector('simple', kith_unaccent(content))`` (words lower-cased, not
stemmed, diacritics folded, like FTS5's ``unicode61 remove_diacritics 2``; without the ``unaccent``
extension nothing is folded: ``gateway.state.postgres.fulltext``)."""

from __future__ import annotations

from gateway.state.postgres.database import PgDatabase
from gateway.state.postgres.fulltext import FOLDED, QUERY
from gateway.state.stores.transcript import Turns
from gateway.state.words import query_words

_CONTENT, _WORDS = FOLDED.format("t.content"), QUERY.format("%s")


class PostgresTurns(Turns):
    def __init__(self, db: PgDatabase) -> None:
        super().__init__(db)
        self._pg = db

    def search_sessions(self, user_id: str, text: str, *, limit: int = 20) -> list[str]:
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
