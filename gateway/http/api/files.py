"""A person's memory files: list, read, and edit through the guarded store.

Every edit goes through ``MemoryStore.write_if`` (containment, size cap, per-file lock, atomic
replace, a line in the store's write audit, re-indexing) and is conditional on the ``etag`` the
client read (the SHA-256 of the text): an edit made from a stale copy is a 409, never a silent
overwrite of what a background job or another tab wrote in between. The audit trails, curation
backups and the quarantine queue are shown but cannot be edited here.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from pydantic import Field

from gateway.http.api.spec import Answer, ApiError, Body, Call, Route
from gateway.memory.curation.audit import HISTORY_DIR
from gateway.memory.files import working
from gateway.memory.files.errors import (
    FileTooLargeError,
    MemoryFileNotFoundError,
    MemoryStoreError,
    NotAFileError,
    PathEscapeError,
    StaleWriteError,
)
from gateway.memory.files.quarantine import REL as QUARANTINE
from gateway.memory.files.store import MemoryStore

PROFILE = frozenset({"USER.md", "PATTERNS.md"})
DISTILLED = frozenset({"MEMORY_SHORT.md", "MEMORY_MID.md", "MEMORY_LONG.md"})
FOLDERS = {"people/": "people", "topics/": "topics", "memories/": "dated", "sessions/": "session_log",
           f"{HISTORY_DIR}/": "backup", "media/": "media"}  # fmt: skip
# media/: files people sent (docs/media.md), kept byte for byte; a text edit would corrupt an image.
READ_ONLY = frozenset({"backup", "audit", "quarantine", "media"})
T = TypeVar("T")


def kind_of(path: str) -> str:
    if path in PROFILE:
        return "profile"
    if path == working.FILE:
        return "working"
    if path in DISTILLED:
        return "distilled"
    if path == QUARANTINE:
        return "quarantine"
    if path.endswith(".audit.jsonl"):
        return "audit"
    for prefix, kind in FOLDERS.items():
        if path.startswith(prefix):
            return kind
    return "other"


class FileEntry(Answer):
    path: str
    kind: str = Field(description="profile, working, distilled, people, topics, dated, session_log, backup, "
                                  "audit, quarantine or other")
    size: int
    modified: datetime
    expires: datetime | None = Field(description="WORKING.md: when the snapshot stops being used")


class FileList(Answer):
    files: list[FileEntry]


class FileOut(Answer):
    path: str
    kind: str
    text: str
    etag: str = Field(description="SHA-256 of the text; send it back with an edit")
    size: int
    modified: datetime
    expires: datetime | None
    read_only: bool


class FileEdit(Body):
    text: str = Field(max_length=1024 * 1024)
    etag: str = Field(max_length=64, description='the etag read with the file; "" to create a new file')


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _expires(path: str, text: str | None) -> datetime | None:
    if path != working.FILE or text is None:
        return None
    parsed = working.parse(text)
    return parsed.expires if parsed else None


def _store(call: Call, uid: str) -> MemoryStore:
    if call.gateway.memory is None:
        raise ApiError(503, "the memory service is not running")
    return call.gateway.memory_store(uid)


def _stamp(mtime: float) -> datetime:
    return datetime.fromtimestamp(mtime, UTC)


async def list_files(call: Call) -> FileList:
    store = _store(call, call.user_id())

    def scan() -> list[FileEntry]:
        out = []
        for entry in store.files():
            text = None
            if entry.path == working.FILE:
                try:
                    text = store.read(entry.path)
                except MemoryStoreError:
                    text = None
            out.append(FileEntry(path=entry.path, kind=kind_of(entry.path), size=entry.size,
                                 modified=_stamp(entry.mtime), expires=_expires(entry.path, text)))  # fmt: skip
        return out

    return FileList(files=await asyncio.to_thread(scan))


def _path(call: Call) -> str:
    path = call.param("path")
    if not path or len(path) > 1024:
        raise ApiError(400, "a file path of 1-1024 characters is required")
    return path


async def read_file(call: Call) -> FileOut:
    store = _store(call, call.user_id())
    path = _path(call)

    def read() -> FileOut:
        entry = store.stat(path)
        if entry.is_dir:
            raise NotAFileError(path)
        text = store.read(path)
        kind = kind_of(entry.path)
        return FileOut(path=entry.path, kind=kind, text=text, etag=sha(text), size=entry.size,
                       modified=_stamp(entry.mtime), expires=_expires(entry.path, text),
                       read_only=kind in READ_ONLY)  # fmt: skip

    return await _guarded(read)


async def write_file(call: Call) -> FileOut:
    uid = call.user_id()
    store = _store(call, uid)
    path = _path(call)
    body: FileEdit = call.body
    kind = kind_of(path)
    if kind in READ_ONLY:
        raise ApiError(403, f"{path} is kept by kith ({kind}) and cannot be edited", code="read_only")
    who = call.who()
    actor = f"user:{who.user_id}" if who.user_id else "operator"

    def write() -> None:
        store.write_if(path, body.text, expected_sha256=body.etag, source=f"api:{actor}",
                       trust="operator" if who.operator and who.user_id != uid else "user")  # fmt: skip

    await _guarded(write)
    return await read_file(call)


async def _guarded(work: Callable[[], T]) -> T:
    try:
        return await asyncio.to_thread(work)
    except StaleWriteError as exc:
        raise ApiError(409, str(exc), code="stale_etag") from None
    except (MemoryFileNotFoundError, NotAFileError):
        raise ApiError(404, "no such file") from None
    except FileTooLargeError as exc:
        raise ApiError(413, str(exc)) from None
    except PathEscapeError as exc:
        raise ApiError(400, exc.reason if exc.reason else str(exc)) from None
    except MemoryStoreError as exc:
        raise ApiError(400, str(exc)) from None


ROUTES = [
    Route("GET", "/api/users/{uid}/memory/files", "every memory file of the person", FileList, list_files,
          tag="memory"),
    Route("GET", "/api/users/{uid}/memory/files/{path:.+}", "one memory file with its etag", FileOut, read_file,
          tag="memory"),
    Route("PUT", "/api/users/{uid}/memory/files/{path:.+}", "replace a memory file (audited; 409 on a stale etag)",
          FileOut, write_file, body=FileEdit, tag="memory", errors=(400, 401, 403, 404, 409, 413)),
]
