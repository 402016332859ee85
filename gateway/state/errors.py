"""What a storage backend raises, whatever its driver: callers catch these, never a driver's errors."""

from __future__ import annotations


class StorageError(Exception):
    """A statement or transaction failed (disk full, I/O error, locked too long, ...). The message
    is the driver's; the driver's exception is chained as ``__cause__``."""


class SchemaError(StorageError):
    """The database cannot be used by this version of kith (written by a newer one, or a migration
    step failed); nothing was changed."""
