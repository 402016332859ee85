"""The transcript's full-text search on SQLite: the FTS5 table ``turns_fts`` (``unicode61
remove_diacritics 2``: case and diacritics folded, no stemming), kept from ``turns`` by triggers."""

from __future__ import annotations

from gateway.state.sqlite.database import SqliteDatabase
from gateway.state.stores.transcript import Turns
from gateway.state.words import query_words


def _match(text: str) -> str:
    """Each word as an FTS5 string: FTS5 syntax in ``text`` is not interpreted."""
    return " ".join('"' + w.replace('"', '""') + '"' for w in query_words(text))


class SqliteTurns(Turns):
    def search_sessions(self, user_id: str, text: str, *, limit: int = 20) -> list[str]:
        query = _match(text)
        if not query:
            return []
        rows = self._db.all(
            "SELECT t.session_id, min(f.rank) AS best FROM turns_fts f JOIN turns t ON t.seq=f.rowid"
            " JOIN sessions s ON s.session_id=t.session_id"
            " WHERE turns_fts MATCH ? AND t.user_id=? AND s.scope_key=?"
            " GROUP BY t.session_id ORDER BY best LIMIT ?",
            (query, user_id, f"user:{user_id}", limit),
        )
        return [r[0] for r in rows]

    def rows_with_words(self, user_id: str, text: str, *, limit: int = 2000) -> list[tuple[int, str]]:
        query = _match(text)
        if not query:
            return []
        rows = self._db.all(
            "SELECT t.seq, t.content FROM turns_fts f JOIN turns t ON t.seq=f.rowid"
            " JOIN sessions s ON s.session_id=t.session_id"
            " WHERE turns_fts MATCH ? AND t.user_id=? AND s.scope_key=? ORDER BY t.seq LIMIT ?",
            (query, user_id, f"user:{user_id}", limit),
        )
        return [(r[0], r[1]) for r in rows]

    def set_content(self, user_id: str, seq: int, content: str) -> bool:
        """The old text's pages are overwritten (``secure_delete``): a forget leaves no copy in free
        pages; ``people.scrub(merge_search=True)`` then drops it from the full-text segments."""
        db = self._db
        assert isinstance(db, SqliteDatabase)
        with db.lock:
            before = db.conn.execute("PRAGMA secure_delete").fetchone()[0]
            db.conn.execute("PRAGMA secure_delete=ON")
            try:
                return super().set_content(user_id, seq, content)
            finally:
                db.conn.execute(f"PRAGMA secure_delete={int(before)}")

    def delete_session(self, session_id: str) -> int:
        """As ``set_content``: the deleted rows' pages are overwritten."""
        db = self._db
        assert isinstance(db, SqliteDatabase)
        with db.lock:
            before = db.conn.execute("PRAGMA secure_delete").fetchone()[0]
            db.conn.execute("PRAGMA secure_delete=ON")
            try:
                return super().delete_session(session_id)
            finally:
                db.conn.execute(f"PRAGMA secure_delete={int(before)}")
