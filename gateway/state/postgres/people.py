"""A person's rows on PostgreSQL: the schema from the catalogue, and an erase that vacuums.

Full text is an index of ``turns`` here, not a table, so there is no full-text table to classify or
compact. Erasing a person deletes their rows and then vacuums the tables it touched: PostgreSQL keeps
deleted rows until a vacuum marks their space free (their bytes go when it is reused: see
docs/architecture.md "Storage" on what a server keeps).
"""

from __future__ import annotations

from gateway.state.postgres.database import PgDatabase
from gateway.state.postgres.tables import table_columns
from gateway.state.stores.people import People


class PostgresPeople(People):
    def __init__(self, db: PgDatabase) -> None:
        super().__init__(db)
        self._pg = db

    def tables(self) -> dict[str, list[str]]:
        return table_columns(self._pg)

    def fts_tables(self) -> frozenset[str]:
        return frozenset()  # full text is an index of turns, not a table

    def erase_user(self, user_id: str) -> dict[str, int]:
        """Delete every row of the person, then vacuum the tables touched; rows deleted per table."""
        counts = self.erase_rows(user_id)
        self._vacuum(sorted({t.split(" ")[0] for t in counts}))
        return counts

    def _after_erase(self) -> None:
        """Nothing: the full-text index follows the deleted rows (a vacuum reclaims its entries)."""

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
