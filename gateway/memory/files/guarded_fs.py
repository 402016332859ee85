"""Race-free path containment and atomic writes, relative to an open root directory.

Every path is walked one component at a time with ``openat`` and ``O_NOFOLLOW`` from a descriptor of
the root, instead of resolving strings and checking prefixes: a symlink swapped in between a check
and a use can then never redirect a read or write outside the root (no TOCTOU window).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator

from gateway.memory.files.errors import (
    MemoryFileNotFoundError,
    NotAFileError,
    PathEscapeError,
    ReservedPathError,
)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_NAME = 200  # bytes; leaves room for the temp-file prefix/suffix under NAME_MAX (255)
_MAX_DEPTH = 32


def split_rel(rel: str, *, allow_root: bool = False) -> tuple[str, ...]:
    """Validate a store-relative path and return its components; raise a typed error otherwise."""
    if not isinstance(rel, str):
        raise PathEscapeError(repr(rel), "path must be a string")
    if "\x00" in rel:
        raise PathEscapeError(rel, "NUL byte in path")
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        raise PathEscapeError(rel, "path is not valid UTF-8") from None
    if "\\" in rel:
        raise PathEscapeError(rel, "backslash in path")
    if rel.startswith("/") or (len(rel) > 1 and rel[1] == ":"):
        raise PathEscapeError(rel, "absolute path")
    parts = tuple(p for p in rel.split("/") if p not in ("", "."))
    for part in parts:
        if part == "..":
            raise PathEscapeError(rel, "'..' component")
        if part.startswith("."):
            # Dot-names hold the store's own data (index, locks, audit, temp files).
            raise ReservedPathError(rel, f"{part!r} is reserved for the store")
        if len(part.encode("utf-8")) > _MAX_NAME:
            raise PathEscapeError(rel, "path component too long")
    if len(parts) > _MAX_DEPTH:
        raise PathEscapeError(rel, "path too deep")
    if not parts and not allow_root:
        raise PathEscapeError(rel, "empty path")
    return parts


def _why_not_dir(dir_fd: int, name: str, rel: str) -> Exception:
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return MemoryFileNotFoundError(rel)
    if stat.S_ISLNK(st.st_mode):
        return PathEscapeError(rel, f"symlinked component {name!r}")
    return NotAFileError(rel)


def open_dir(root_fd: int, parts: tuple[str, ...], rel: str, *, create: bool = False) -> int:
    """Open the directory ``parts`` below ``root_fd`` without following symlinks; caller closes it."""
    fd = os.dup(root_fd)
    try:
        for name in parts:
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise MemoryFileNotFoundError(rel) from None
                with contextlib.suppress(FileExistsError):  # a concurrent writer made it first
                    os.mkdir(name, 0o700, dir_fd=fd)
                try:
                    nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    raise _why_not_dir(fd, name, rel) from None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _why_not_dir(fd, name, rel) from None
                raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def parent_dir(root_fd: int, parts: tuple[str, ...], rel: str, *, create: bool = False) -> Iterator[int]:
    fd = open_dir(root_fd, parts[:-1], rel, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def read_file(root_fd: int, parts: tuple[str, ...], rel: str) -> bytes:
    with parent_dir(root_fd, parts, rel) as dfd:
        try:
            # O_NONBLOCK: a FIFO planted in the tree must not hang the reader.
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
        except FileNotFoundError:
            raise MemoryFileNotFoundError(rel) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathEscapeError(rel, "file is a symlink") from None
            raise
    try:
        check_readable(os.fstat(fd), rel)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def check_readable(st: os.stat_result, rel: str) -> None:
    """Refuse what is not a plain file of this tree: a FIFO, device or directory, and a hard link.

    A hard link is a second name for an inode that may live outside the root (``ln /etc/shadow
    users/u1/notes.md`` needs no symlink, so ``O_NOFOLLOW`` cannot see it). Files the store writes
    always have one link (temp file + rename), so a count above one means someone else made it.
    """
    if not stat.S_ISREG(st.st_mode):
        raise NotAFileError(rel)
    if st.st_nlink > 1:
        raise PathEscapeError(
            rel,
            f"the file has {st.st_nlink} hard links and may be a file outside the memory root; "
            "copy it to a fresh file (cp --remove-destination) to make it readable",
        )


def lstat_target(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None


def check_replaceable(dir_fd: int, name: str, rel: str) -> None:
    st = lstat_target(dir_fd, name)
    if st is None:
        return
    if stat.S_ISLNK(st.st_mode):
        raise PathEscapeError(rel, "file is a symlink")
    if not stat.S_ISREG(st.st_mode):
        raise NotAFileError(rel)


def atomic_replace(dir_fd: int, name: str, data: bytes, rel: str) -> None:
    """Write ``data`` to a temp file, fsync it, rename it over ``name`` and fsync the directory.

    A reader (or a crash) sees either the old file or the new one, never a prefix of the new one.
    """
    check_replaceable(dir_fd, name, rel)
    tmp = f".{name[:64]}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)


def walk_files(root_fd: int, parts: tuple[str, ...], rel: str) -> Iterator[tuple[str, os.stat_result]]:
    """Yield ``(relative path, stat)`` of every regular file below ``parts``.

    Symlinks and dot-names are skipped, never followed.
    """
    fd = open_dir(root_fd, parts, rel)
    try:
        yield from _walk(fd, "/".join(parts), 0)
    finally:
        os.close(fd)


def _walk(fd: int, prefix: str, depth: int) -> Iterator[tuple[str, os.stat_result]]:
    if depth > _MAX_DEPTH:
        return
    with os.scandir(fd) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = f"{prefix}/{entry.name}" if prefix else entry.name
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISREG(st.st_mode):
            yield path, st
        elif stat.S_ISDIR(st.st_mode):
            try:
                sub = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # replaced by a symlink or removed since the scan: skip it
            try:
                yield from _walk(sub, path, depth + 1)
            finally:
                os.close(sub)


def remove_stale_temps(root_fd: int, older_than: float) -> int:
    """Delete temp files a killed writer left behind (``.<name>.tmp-<pid>-<hex>``) older than a cutoff."""
    removed = 0
    stack = [os.dup(root_fd)]
    while stack:
        fd = stack.pop()
        try:
            with os.scandir(fd) as it:
                entries = list(it)
            for e in entries:
                st = e.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode) and e.name not in (".index", ".locks"):
                    with contextlib.suppress(OSError):
                        stack.append(os.open(e.name, _DIR_FLAGS, dir_fd=fd))
                elif _is_temp(e.name, st) and st.st_mtime < older_than:
                    with contextlib.suppress(OSError):
                        os.unlink(e.name, dir_fd=fd)
                        removed += 1
        finally:
            os.close(fd)
    return removed


def _is_temp(name: str, st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode) and name.startswith(".") and ".tmp-" in name


@contextlib.contextmanager
def private_dir(root: os.PathLike[str] | str, name: str, *, create: bool) -> Iterator[int | None]:
    """A descriptor of the store's own directory ``name`` (``.forgotten``, ``.hygiene``) directly under
    ``root``, made mode 0700 when ``create``; None when it does not exist. A symlink or file planted
    in its place is refused (PathEscapeError), never followed."""
    rfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=rfd)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=rfd)
        except FileNotFoundError:
            yield None
            return
        except OSError as exc:  # ELOOP / ENOTDIR: something planted in the store's place
            raise PathEscapeError(name, f"not a plain directory ({exc.strerror})") from None
        try:
            yield fd
        finally:
            os.close(fd)
    finally:
        os.close(rfd)
