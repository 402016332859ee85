"""Typed errors of the memory store: callers (and the model's tools) can tell what went wrong."""

from __future__ import annotations


class MemoryStoreError(Exception):
    """Base class for every refusal or failure of the memory store."""


class PathEscapeError(MemoryStoreError, ValueError):
    """The path is absolute, contains ``..``, NUL, a backslash, or a symlinked component."""

    def __init__(self, rel: str, reason: str) -> None:
        self.rel = rel
        self.reason = reason
        super().__init__(f"refused memory path {rel!r}: {reason}")


class ReservedPathError(PathEscapeError):
    """Dot-names (``.index/``, ``.locks/``, ``.audit.jsonl``, ``.gitignore``) belong to the store."""


class FileTooLargeError(MemoryStoreError):
    """A write would make the file larger than the store's per-file cap."""

    def __init__(self, rel: str, size: int, limit: int) -> None:
        self.rel = rel
        self.size = size
        self.limit = limit
        super().__init__(f"{rel}: {size} bytes exceeds the {limit}-byte cap; trim the file first")


class MemoryFileNotFoundError(MemoryStoreError, FileNotFoundError):
    """The file (or directory) does not exist inside the root."""

    def __init__(self, rel: str) -> None:
        self.rel = rel
        super().__init__(f"no such memory file: {rel!r}")


class NotAFileError(MemoryStoreError):
    """The path names a directory (or another non-regular file) where a file was expected."""

    def __init__(self, rel: str) -> None:
        self.rel = rel
        super().__init__(f"not a regular file: {rel!r}")


class InvalidPatternError(MemoryStoreError, ValueError):
    """A grep pattern that does not compile."""


class StaleWriteError(MemoryStoreError):
    """A write conditioned on the file's content (``write_if``) found it changed since it was read."""

    def __init__(self, rel: str, current_sha256: str) -> None:
        self.rel = rel
        self.current_sha256 = current_sha256  # "" when the file does not exist
        super().__init__(f"{rel} changed since it was read; read it again and reapply the edit")


class DirectoryFullError(MemoryStoreError):
    """A new file would pass the per-directory file cap (``memory.max_dir_files``): a sanity limit, so
    a runaway writer (or model) cannot fill a folder with thousands of files that every grep and
    index sync would then walk. Existing files can still be rewritten; trim the folder to add more."""

    def __init__(self, rel: str, directory: str, count: int, limit: int) -> None:
        self.rel, self.directory, self.count, self.limit = rel, directory, count, limit
        where = directory or "the memory root"
        super().__init__(f"cannot create {rel!r}: {where} already holds {count} files (limit {limit}, "
                         "memory.max_dir_files); remove or merge some first")
