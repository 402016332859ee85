"""Free space on the filesystem that holds the memory index, against a floor (``memory.min_free_mb``).

The embedded Qdrant index writes through memory-mapped files. When a page it touches cannot be
allocated because the filesystem is full, the kernel kills the whole process with SIGBUS (exit 135:
no exception, no log line), and opening the index replays its write-ahead log into those files, so a
restart on the still-full disk dies the same way. Nothing in Python can catch that, so the write is
not attempted: callers check the floor first (``DiskFloor.require``) and pause instead.

The floor is a margin, not a reservation: another process can still fill the disk between the check
and the write, so it must be well above what one write allocates (Qdrant grows its storage and
write-ahead log in 32 MB memory-mapped chunks; the default floor is 256 MB).

On tmpfs (and ramfs) a page of a shared memory map is allocated when it is touched at all, a read
included, and Qdrant populates several of its maps when it opens a shard: opening a small index
there allocated 46 MB that a freshly created one had left as holes. That is how the restart "refilled
the disk on open". So opening on such a filesystem needs the floor plus every hole in the index's
files (``open_cost``); elsewhere holes stay holes and the floor alone applies.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Space:
    """One measurement: free bytes on the filesystem of ``path`` and the floor they were held against."""

    path: Path
    free_bytes: int
    min_free_bytes: int
    extra_bytes: int = 0  # what the operation itself may allocate on top of the floor

    @property
    def low(self) -> bool:
        return self.free_bytes < self.min_free_bytes + self.extra_bytes

    def describe(self) -> str:
        floor = f"the floor of {self.min_free_bytes / MB:.0f} MB (memory.min_free_mb)"
        if self.extra_bytes:
            floor += f" plus {self.extra_bytes / MB:.0f} MB that opening the index fills in on this filesystem"
        return f"{self.free_bytes / MB:.0f} MB free on the filesystem of {self.path}, below {floor}"


class LowDiskSpaceError(RuntimeError):
    """A write was not attempted because free space is below the floor (it could have killed the
    process with SIGBUS). Nothing was changed; the caller keeps the work for later."""

    def __init__(self, space: Space, what: str) -> None:
        self.space = space
        self.what = what
        super().__init__(f"{what} is paused: {space.describe()}")


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer can still allocate on the filesystem holding ``path`` (or its
    nearest existing parent: the index directory does not exist before the first start)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize


class DiskFloor:
    """The free-space floor of one directory's filesystem. ``min_free_bytes == 0`` disables it."""

    def __init__(self, path: Path, min_free_bytes: int) -> None:
        self.path = Path(path)
        self.min_free_bytes = max(int(min_free_bytes), 0)

    def check(self, extra: int = 0) -> Space:
        if self.min_free_bytes == 0:
            return Space(self.path, 0, 0)  # never low; statvfs is not even called
        return Space(self.path, free_bytes(self.path), self.min_free_bytes, extra)

    def require(self, what: str, extra: int = 0) -> None:
        """Raise ``LowDiskSpaceError`` instead of letting ``what`` write below the floor (plus
        ``extra`` bytes that ``what`` itself may allocate)."""
        space = self.check(extra)
        if space.low:
            raise LowDiskSpaceError(space, what)


# Filesystems that back every touched page of a shared map with memory, reads of holes included.
_FILLS_HOLES_ON_ACCESS = frozenset({"tmpfs", "ramfs", "shmfs"})


def fills_holes_on_access(path: Path) -> bool:
    """Whether ``path`` is on tmpfs/ramfs (see the module docstring). Unknown counts as yes: the
    caller then asks for more room than it may need, never less."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    real = os.path.realpath(probe)
    try:
        mounts = Path("/proc/self/mounts").read_text()
    except OSError:
        return True
    best, kind = "", ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind in _FILLS_HOLES_ON_ACCESS if best else True


def holes(directory: Path) -> int:
    """Bytes of the files under ``directory`` not backed by storage yet (apparent size beyond the
    allocated blocks): the most that touching all of them can allocate."""
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            total += max(st.st_size - st.st_blocks * 512, 0)
    return total


def open_cost(directory: Path) -> int:
    """What opening the memory-mapped index in ``directory`` may allocate beyond its files' current
    blocks: their holes on tmpfs/ramfs, nothing elsewhere (nor for an index not created yet)."""
    if not directory.is_dir() or not fills_holes_on_access(directory):
        return 0
    return holes(directory)


# A start-up reserve: room for the daemon to start on a disk something else filled up. Opening SQLite
# in WAL mode allocates its shared-memory index (-shm) and the job bus appends to its log; on a disk
# with not one free block both fail, and a supervisor restarting kith would loop on that forever.
# ``kith run`` keeps this file while space is plentiful and deletes it when it starts below the floor.
RESERVE_FILE = "disk.reserve"
RESERVE_MAX = 32 * MB


def reserve_bytes(min_free_bytes: int) -> int:
    """A quarter of the floor, at most 32 MB (a start needs well under 1 MB; the rest is room to answer)."""
    return min(RESERVE_MAX, max(min_free_bytes, 0) // 4)


class Reserve:
    def __init__(self, data_dir: Path, size: int) -> None:
        self.path = Path(data_dir) / RESERVE_FILE
        self.size = size

    def exists(self) -> bool:
        return self.path.is_file()

    def keep(self, floor: DiskFloor) -> bool:
        """Create the reserve unless it exists or would itself take free space below the floor."""
        if self.size <= 0 or self.exists() or free_bytes(self.path.parent) - self.size < floor.min_free_bytes:
            return False
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.posix_fallocate(fd, 0, self.size)  # really allocated: a sparse file would reserve nothing
        except OSError:
            os.close(fd)
            self.path.unlink(missing_ok=True)
            return False
        os.close(fd)
        return True

    def release(self) -> int:
        """Delete the reserve; the bytes it gave back (0 when there was none)."""
        try:
            size = self.path.stat().st_size
            self.path.unlink()
        except FileNotFoundError:
            return 0
        return size
