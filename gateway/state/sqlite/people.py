"""A person's rows on SQLite: the schema from ``sqlite_master``, and an erase that leaves no copy.

Erasing overwrites what it deletes (``PRAGMA secure_delete``), merges the full-text index's segments
(a delete there only adds markers) and checkpoints the write-ahead log into the file and truncates
it, so the deleted text is not left in free pages, index segments or old WAL frames.
"""

from __future__ import annotations

import sqlite3

from gateway.state.errors import StorageError
from gateway.state.sqlite.database import SqliteDatabase
from gateway.state.stores.people import People, quote


class SqlitePeople(People):
    def __init__(self, db: SqliteDatabase) -> None:
        super().__init__(db)
        self._sqlite = db

    def tables(self) -> dict[str, list[str]]:
        names = [r[0] for r in self._db.all("SELECT name FROM sqlite_master WHERE type='table'"
                                            " AND name NOT LIKE 'sqlite~_%' ESCAPE '~' ORDER BY name")]  # fmt: skip
        return {n: [str(c[1]) for c in self._db.all(f"PRAGMA table_info({quote(n)})")] for n in names}

    def fts_tables(self) -> frozenset[str]:
        """The full-text (FTS5) virtual tables."""
        rows = self._db.all("SELECT name FROM sqlite_master WHERE type='table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
                            " AND lower(sql) LIKE '%using fts5%'")  # fmt: skip
        return frozenset(str(r[0]) for r in rows)

    def erase_user(self, user_id: str) -> dict[str, int]:
        """Delete every row of the person; rows deleted per table. The deleted bytes are overwritten and
        the write-ahead log truncated, so no copy stays in the file."""
        conn = self._sqlite.conn
        with self._sqlite.lock:
            before = conn.execute("PRAGMA secure_delete").fetchone()[0]
            conn.execute("PRAGMA secure_delete=ON")
            try:
                counts = self.erase_rows(user_id)
            finally:
                conn.execute(f"PRAGMA secure_delete={int(before)}")
            self.scrub()
        return counts

    def _after_erase(self) -> None:
        # Deleting from a full-text index only adds delete markers; merging its segments into one
        # drops the deleted terms for good.
        for fts in sorted(self.fts_tables()):
            self._db.run(f"INSERT INTO {quote(fts)}({quote(fts)}) VALUES ('optimize')")

    def scrub(self, *, merge_search: bool = False) -> None:
        """Copy the write-ahead log into the file and truncate it: the old page images (with deleted
        text) go. Another process reading at this moment keeps some frames; the next scrub gets them.
        ``merge_search``: first merge the full-text indexes' segments (rewritten rows leave their old
        terms there until then), overwriting the pages they free (a forget, ``gateway.memory.edit.forget``)."""
        with self._sqlite.lock:
            if merge_search:
                conn = self._sqlite.conn
                before = conn.execute("PRAGMA secure_delete").fetchone()[0]
                conn.execute("PRAGMA secure_delete=ON")
                try:
                    for fts in sorted(self.fts_tables()):
                        self._db.run(f"INSERT INTO {quote(fts)}({quote(fts)}) VALUES ('optimize')")
                finally:
                    conn.execute(f"PRAGMA secure_delete={int(before)}")
            try:
                self._sqlite.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.Error as exc:
                raise StorageError(str(exc)) from exc
