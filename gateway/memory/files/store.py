"""MemoryStore: one root of Markdown files, and the single guarded path every write goes through.

Roots are ``<data_dir>/users/<id>/``, ``<data_dir>/channels/<channel>-<conversation>/`` and
``<data_dir>/personas/<name>/``. Every write checks containment (see ``guarded_fs``), the per-file size
cap, takes a per-file ``flock``, replaces the file atomically, appends an audit line and then tells
``on_write`` which file changed (the indexer's seam). All methods are synchronous: files are small, and
an async caller wraps calls in ``asyncio.to_thread`` when it must not block its loop.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import hashlib
import logging
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gateway.memory.files import guarded_fs
from gateway.memory.files.audit import append_audit, audit_record
from gateway.memory.files.errors import (
    DirectoryFullError,
    FileTooLargeError,
    InvalidPatternError,
    MemoryFileNotFoundError,
    MemoryStoreError,
    NotAFileError,
    PathEscapeError,
    ReservedPathError,
    StaleWriteError,
)

__all__ = [
    "DirectoryFullError",
    "FileTooLargeError",
    "GrepHit",
    "InvalidPatternError",
    "MemoryEntry",
    "MemoryFileNotFoundError",
    "MemoryStore",
    "MemoryStoreError",
    "NotAFileError",
    "PathEscapeError",
    "ReservedPathError",
    "StaleWriteError",
]

log = logging.getLogger(__name__)

INDEX_DIR = ".index"
LOCK_DIR = ".locks"
AUDIT_FILE = ".audit.jsonl"
_GITIGNORE = f"{INDEX_DIR}/\n{LOCK_DIR}/\n"


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    path: str  # relative to the root, "/"-separated
    is_dir: bool
    size: int
    mtime: float


@dataclass(frozen=True, slots=True)
class GrepHit:
    path: str
    line_no: int  # 1-based
    line: str


#: Set by a clustered daemon (``gateway.cluster``): a lock shared by every host, taken around each
#: write after the file's flock, keyed by ``<users|channels|personas>/<name>/<rel>``. None: one host.
CrossHostLock = Callable[[str], contextlib.AbstractContextManager[object]]
_cross_host_lock: CrossHostLock | None = None


def set_cross_host_lock(lock: CrossHostLock | None) -> None:
    global _cross_host_lock
    _cross_host_lock = lock


def cross_host_lock() -> CrossHostLock | None:
    return _cross_host_lock


class MemoryStore:
    def __init__(
        self,
        root: Path,
        *,
        max_file_bytes: int = 256 * 1024,
        audit_path: Path | None = None,
        on_write: Callable[[str], None] | None = None,
        max_results: int = 1000,
        max_dir_files: int = 10_000,
    ) -> None:
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.root = root.resolve()  # the root itself may be a symlink (operator's choice)
        self.max_file_bytes = max_file_bytes
        self.audit_path = audit_path or self.root / AUDIT_FILE
        self.on_write = on_write
        self.max_results = max_results
        self.max_dir_files = max_dir_files
        self._gitignore_checked = False

    # ------------------------------------------------------------------------------------- reads

    def read(self, rel: str) -> str:
        return self.read_bytes(rel).decode("utf-8", errors="replace")

    def read_bytes(self, rel: str) -> bytes:
        """The file's exact bytes (for copying it elsewhere without a lossy decode)."""
        parts = guarded_fs.split_rel(rel)
        with self._root_fd() as rfd:
            return guarded_fs.read_file(rfd, parts, rel)

    def exists(self, rel: str) -> bool:
        try:
            self.stat(rel)
        except (MemoryFileNotFoundError, NotAFileError):
            return False
        return True

    def stat(self, rel: str) -> MemoryEntry:
        parts = guarded_fs.split_rel(rel)
        if len(parts) == 1:
            # A name directly in the root: one lstat of the joined path, not a descriptor walk (open,
            # dup, lstat, close, close), since a turn stats its persona and memory files every time.
            # Equally guarded: the root was resolved at start and is opened by path anyway, and lstat
            # never follows the name itself. Deeper paths keep the walk (no component swapped for a
            # symlink between two lstats can redirect it).
            try:
                st: os.stat_result | None = os.lstat(f"{self.root}/{parts[0]}")
            except FileNotFoundError:
                st = None
        else:
            with self._root_fd() as rfd, guarded_fs.parent_dir(rfd, parts, rel) as dfd:
                st = guarded_fs.lstat_target(dfd, parts[-1])
        if st is None:
            raise MemoryFileNotFoundError(rel)
        if stat.S_ISLNK(st.st_mode):
            raise PathEscapeError(rel, "file is a symlink")
        return MemoryEntry("/".join(parts), stat.S_ISDIR(st.st_mode), st.st_size, st.st_mtime)

    def list(self, rel: str = "") -> builtins.list[MemoryEntry]:
        """Entries directly inside directory ``rel`` (dot-names and symlinks are not shown)."""
        parts = guarded_fs.split_rel(rel, allow_root=True)
        prefix = "/".join(parts)
        out: builtins.list[MemoryEntry] = []
        with self._root_fd() as rfd:
            fd = guarded_fs.open_dir(rfd, parts, rel)
            try:
                with os.scandir(fd) as it:
                    for e in it:
                        st = e.stat(follow_symlinks=False)
                        if e.name.startswith(".") or not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                            continue
                        path = f"{prefix}/{e.name}" if prefix else e.name
                        out.append(MemoryEntry(path, stat.S_ISDIR(st.st_mode), st.st_size, st.st_mtime))
            finally:
                os.close(fd)
        return sorted(out, key=lambda m: m.path)

    def files(self, rel: str = "") -> builtins.list[MemoryEntry]:
        """Every regular file below ``rel``, recursively (what the indexer walks)."""
        parts = guarded_fs.split_rel(rel, allow_root=True)
        with self._root_fd() as rfd:
            try:
                files = guarded_fs.walk_files(rfd, parts, rel)
                return [MemoryEntry(p, False, st.st_size, st.st_mtime) for p, st in files]
            except MemoryFileNotFoundError:
                return []

    def grep(self, pattern: str, rel: str = "", *, case_insensitive: bool = True) -> builtins.list[GrepHit]:
        try:
            rx = re.compile(pattern, re.IGNORECASE if case_insensitive else 0)
        except re.error as exc:
            raise InvalidPatternError(f"bad pattern {pattern!r}: {exc}") from None
        hits: builtins.list[GrepHit] = []
        if guarded_fs.split_rel(rel, allow_root=True):
            try:
                entry = self.stat(rel)
            except MemoryFileNotFoundError:
                return []
            targets = [m.path for m in self.files(rel)] if entry.is_dir else [entry.path]
        else:
            targets = [m.path for m in self.files()]
        for path in targets:
            try:
                text = self.read(path)
            except MemoryStoreError:
                continue  # changed under us; grep is best-effort over a live tree
            for no, line in enumerate(text.splitlines(), 1):
                if rx.search(line):
                    hits.append(GrepHit(path, no, line))
                    if len(hits) >= self.max_results:
                        return hits
        return hits

    def glob(self, pattern: str) -> builtins.list[str]:
        """Store-relative paths of the files matching ``pattern`` (``*`` and ``?`` within one name,
        ``[abc]``, ``**`` for any number of directories), sorted, at most ``max_results``.

        The pattern obeys ``read``'s containment rules (no absolute path, no ``..``, no dot-names: the
        store's own files), and the walk never follows a symlink nor shows a dot-name."""
        parts = guarded_fs.split_rel(pattern)
        fixed: builtins.list[str] = []
        for part in parts:
            if any(c in part for c in "*?["):
                break
            fixed.append(part)
        rx = _glob_regex(parts)
        base = "/".join(fixed[:-1] if len(fixed) == len(parts) else fixed)
        out: builtins.list[str] = []
        for entry in self.files(base):
            if rx.fullmatch(entry.path):
                out.append(entry.path)
                if len(out) >= self.max_results:
                    break
        return sorted(out)

    # ------------------------------------------------------------------------------------ writes

    def write(self, rel: str, text: str, *, source: str, message_id: str = "", trust: str = "system") -> int:
        """Replace ``rel`` with ``text``; return the new size in bytes."""
        parts = guarded_fs.split_rel(rel)
        data = _encode(rel, text)
        self._check_size(rel, len(data))
        with (
            self._root_fd() as rfd,
            self._lock(rfd, parts),
            guarded_fs.parent_dir(rfd, parts, rel, create=True) as dfd,
        ):
            self._check_room(dfd, parts, rel)
            guarded_fs.atomic_replace(dfd, parts[-1], data, rel)
        return self._written("write", parts, data, source, message_id, trust)

    def write_if(self, rel: str, text: str, *, expected_sha256: str, source: str, message_id: str = "",
                 trust: str = "system") -> int:  # fmt: skip
        """``write``, only while the file's SHA-256 is still ``expected_sha256`` (``""``: the file must not
        exist); ``StaleWriteError`` otherwise. Checked under the file's lock, so an edit made from a copy
        read earlier never silently overwrites a change made in between (the web console's etag)."""
        parts = guarded_fs.split_rel(rel)
        data = _encode(rel, text)
        self._check_size(rel, len(data))
        with (
            self._root_fd() as rfd,
            self._lock(rfd, parts),
            guarded_fs.parent_dir(rfd, parts, rel, create=True) as dfd,
        ):
            try:
                current = hashlib.sha256(guarded_fs.read_file(rfd, parts, rel)).hexdigest()
            except MemoryFileNotFoundError:
                current = ""
            if current != expected_sha256:
                raise StaleWriteError(rel, current)
            self._check_room(dfd, parts, rel)
            guarded_fs.atomic_replace(dfd, parts[-1], data, rel)
        return self._written("write", parts, data, source, message_id, trust)

    def append(self, rel: str, text: str, *, source: str, message_id: str = "", trust: str = "system") -> int:
        """Append ``text`` (rewriting the whole file atomically, so a crash never leaves half a line)."""
        parts = guarded_fs.split_rel(rel)
        extra = _encode(rel, text)
        with (
            self._root_fd() as rfd,
            self._lock(rfd, parts),
            guarded_fs.parent_dir(rfd, parts, rel, create=True) as dfd,
        ):
            try:
                old = guarded_fs.read_file(rfd, parts, rel)
            except MemoryFileNotFoundError:
                old = b""
            data = old + extra
            self._check_size(rel, len(data))
            if not old:
                self._check_room(dfd, parts, rel)
            guarded_fs.atomic_replace(dfd, parts[-1], data, rel)
        return self._written("append", parts, data, source, message_id, trust, added=len(extra))

    def delete(self, rel: str, *, source: str, message_id: str = "", trust: str = "system") -> None:
        parts = guarded_fs.split_rel(rel)
        with self._root_fd() as rfd, self._lock(rfd, parts), guarded_fs.parent_dir(rfd, parts, rel) as dfd:
            guarded_fs.check_replaceable(dfd, parts[-1], rel)
            try:
                os.unlink(parts[-1], dir_fd=dfd)
            except FileNotFoundError:
                raise MemoryFileNotFoundError(rel) from None
            os.fsync(dfd)
        self._written("delete", parts, b"", source, message_id, trust)

    def move(self, src: str, dst: str, *, source: str, message_id: str = "", trust: str = "system") -> None:
        """Rename a file inside the root (both ends guarded); fails if ``dst`` exists."""
        guarded_fs.split_rel(src), guarded_fs.split_rel(dst)  # refuse bad paths before touching anything
        if self.exists(dst):
            raise MemoryStoreError(f"cannot move {src!r}: {dst!r} already exists")
        text = self.read(src)
        # Through write + delete rather than rename(2): both ends get containment, locks and audit.
        self.write(dst, text, source=source, message_id=message_id, trust=trust)
        self.delete(src, source=source, message_id=message_id, trust=trust)

    def remove_stale_temp_files(self, older_than_s: float = 3600.0) -> int:
        """Remove temp files of writers that died mid-write (they are hidden, but take space)."""
        with self._root_fd() as rfd:
            return guarded_fs.remove_stale_temps(rfd, time.time() - older_than_s)

    # ---------------------------------------------------------------------------------- internals

    def index_dir(self) -> Path:
        """``<root>/.index/``: derived data only, ignored by git, safe to delete at any time."""
        self._ensure_gitignore()
        path = self.root / INDEX_DIR
        path.mkdir(exist_ok=True, mode=0o700)
        return path

    @contextlib.contextmanager
    def _root_fd(self) -> Iterator[int]:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _lock(self, root_fd: int, parts: tuple[str, ...]) -> Iterator[None]:
        # A sidecar lock file: locking the data file itself would not survive the rename.
        self._ensure_gitignore()
        with contextlib.suppress(FileExistsError):
            os.mkdir(LOCK_DIR, 0o700, dir_fd=root_fd)
        name = hashlib.sha1("/".join(parts).encode()).hexdigest() + ".lock"
        ldir = os.open(LOCK_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root_fd)
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=ldir)
        finally:
            os.close(ldir)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _cross_host_lock is None:
                yield
            else:  # several nodes (gateway/cluster): flock covers this host only
                with _cross_host_lock("/".join((*self.root.parts[-2:], *parts))):
                    yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    def _check_room(self, dfd: int, parts: tuple[str, ...], rel: str) -> None:
        """A new file must leave its directory within ``max_dir_files`` (dot-names, the store's own,
        are not counted); rewriting an existing file is always allowed."""
        if guarded_fs.lstat_target(dfd, parts[-1]) is not None:
            return
        with os.scandir(dfd) as it:
            count = sum(1 for e in it if not e.name.startswith("."))
        if count >= self.max_dir_files:
            raise DirectoryFullError(rel, "/".join(parts[:-1]), count, self.max_dir_files)

    def _check_size(self, rel: str, size: int) -> None:
        if size > self.max_file_bytes:
            raise FileTooLargeError(rel, size, self.max_file_bytes)

    def _ensure_gitignore(self) -> None:
        if self._gitignore_checked:
            return
        path = self.root / ".gitignore"
        try:
            current = path.read_text(encoding="utf-8") if not path.is_symlink() else None
        except FileNotFoundError:
            current = ""
        if current is not None and not all(line in current.splitlines() for line in _GITIGNORE.split()):
            with self._root_fd() as rfd:
                body = current + ("\n" if current and not current.endswith("\n") else "") + _GITIGNORE
                guarded_fs.atomic_replace(rfd, ".gitignore", body.encode(), ".gitignore")
        self._gitignore_checked = True

    def _written(
        self,
        op: str,
        parts: tuple[str, ...],
        data: bytes,
        source: str,
        message_id: str,
        trust: str,
        added: int | None = None,
    ) -> int:
        rel = "/".join(parts)
        record = audit_record(op=op, rel=rel, data=data, source=source, message_id=message_id, trust=trust, added=added)
        append_audit(self.audit_path, record)
        if self.on_write is not None:
            try:
                self.on_write(rel)
            except Exception:
                # The write is durable; a failing index hook must not turn it into an error.
                log.exception("memory on_write hook failed for %s", rel)
        return len(data)


def _encode(rel: str, text: str) -> bytes:
    if not isinstance(text, str):
        raise MemoryStoreError(f"{rel}: content must be str, got {type(text).__name__}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise MemoryStoreError(f"{rel}: content is not valid UTF-8 text") from None


def _glob_regex(parts: tuple[str, ...]) -> re.Pattern[str]:
    """``parts`` of a glob as one regular expression over a store-relative path."""
    out = ""
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out += ".*" if last else "(?:[^/]+/)*"
            continue
        j = 0
        while j < len(part):
            c = part[j]
            if c == "*":
                out += "[^/]*"
            elif c == "?":
                out += "[^/]"
            elif c == "[" and (end := part.find("]", j + 2)) != -1:
                body = part[j + 1 : end]
                body = "^" + body[1:] if body.startswith("!") else body
                out += "[" + body.replace("\\", "\\\\").replace("/", "") + "]"
                j = end
            else:
                out += re.escape(c)
            j += 1
        if not last:
            out += "/"
    return re.compile(out)
