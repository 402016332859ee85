"""The one migration runner of both backends: each keeps its own list of steps per component and says,
in a small ``Dialect``, how its driver does what the runner needs (placeholders, the ``schema_version``
table, reading it, locking). The step model is in ``gateway.state.sqlite.migrations``.

Applying: the versions are read without a lock first (the common start: nothing to do, no lock
taken), then again inside the dialect's lock, which makes one transaction that another process
applying the same steps waits for, so two processes starting together never both apply a step.
Importing this never loads a driver: a SQLite install has no psycopg.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from gateway.state.errors import SchemaError
from gateway.state.timestamps import ts

# The parts of the schema, in the order they are applied; each backend has a list of steps for each
# (tests/state/test_schema_parity.py checks both backends against this and against each other).
COMPONENTS = ("state", "knowledge", "api_keys", "delivery", "usage", "session_titles", "approval_audit")


class Connection(Protocol):
    def execute(self, sql: Any, params: Any = ..., /) -> Any: ...


C = TypeVar("C", bound=Connection)
S = TypeVar("S")


class Dialect(ABC, Generic[C, S]):
    """What the runner needs of a backend's driver, for connections ``C`` and steps ``S``."""

    placeholder: ClassVar[str]  # the driver's parameter marker: "?" (sqlite3) or "%s" (psycopg)
    version_table: ClassVar[str]  # CREATE TABLE IF NOT EXISTS schema_version (component, version, updated_at)
    errors: ClassVar[type[Exception]]  # the driver's base error, reported as SchemaError

    @abstractmethod
    def versions(self, conn: C) -> dict[str, int]:
        """Applied steps per component ({} before the table exists)."""

    @abstractmethod
    def locked(self, conn: C) -> AbstractContextManager[None]:
        """One transaction, held by one migrating process at a time; rolled back on an error."""

    @abstractmethod
    def apply(self, conn: C, step: S) -> None:
        """Run one step."""


def check(found: Mapping[str, int], components: Iterable[str], steps: Mapping[str, Sequence[object]]) -> bool:
    """True when every component is current; SchemaError when one is newer than this kith."""
    current = True
    for component in components:
        have, latest = found.get(component, 0), len(steps[component])
        if have > latest:
            raise SchemaError(
                f"the database holds {component} schema version {have}, this kith knows up to "
                f"{latest}: it was written by a newer kith (upgrade kith, or restore a backup)"
            )
        current &= have == latest
    return current


def migrate(conn: C, dialect: Dialect[C, S], migrations: Mapping[str, Sequence[S]], components: Iterable[str]) -> None:
    """Bring ``components`` up to their latest step of ``migrations``. ``conn`` is in autocommit mode."""
    components = tuple(components)
    unknown = [c for c in components if c not in migrations]
    if unknown:
        raise ValueError(f"unknown schema components: {unknown}")
    p = dialect.placeholder
    record = (
        f"INSERT INTO schema_version(component, version, updated_at) VALUES ({p},{p},{p})"
        " ON CONFLICT(component) DO UPDATE SET version=excluded.version, updated_at=excluded.updated_at"
    )
    try:
        if check(dialect.versions(conn), components, migrations):
            return  # the common start: nothing to do, no lock taken
        with dialect.locked(conn):
            conn.execute(dialect.version_table)
            found = dialect.versions(conn)  # again, under the lock: another process may have migrated meanwhile
            check(found, components, migrations)
            for component in components:
                steps = migrations[component]
                for version in range(found.get(component, 0) + 1, len(steps) + 1):
                    dialect.apply(conn, steps[version - 1])
                    conn.execute(record, (component, version, ts()))
    except dialect.errors as exc:
        raise SchemaError(f"migrating the database failed, nothing was changed: {exc}") from exc
