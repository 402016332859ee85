"""The turn spool: answered turns the transcript could not take, kept in space taken before the disk filled.

On a full disk the reply is sent but SQLite cannot store the turn ("database or disk is full"), and the
Markdown session log, which waits in memory for space, is gone with the process: after a restart the
turn was nowhere (issue 27, item 3). Free space cannot be counted on at that moment, so the room is
taken earlier: ``<data_dir>/turns.spool`` is allocated in full (``posix_fallocate``) when the gateway
starts with room to spare. Writing into blocks a file already owns allocates nothing (on ext4, xfs and
tmpfs), so a turn can be appended there when not one free block is left. ``gateway/turn/writeback.py``
writes the spooled turns back to the transcript once it takes writes again, at run time or at the
next start; the session log and the index follow from the transcript as for any turn.

Format: a 24-byte header (``MAGIC`` + the generation, a 64-bit counter) and records from there on,
each a 16-byte head (payload length, CRC-32 of generation + payload, generation) and a JSON payload.
A zero length, a wrong generation or a wrong checksum ends the records (the rest of the file is zeros
or left over from an earlier generation: a torn write). Emptying the spool zeroes the records and
writes the next generation, so old records stop counting even if the zeroing was cut short. Each append is flushed with
``fdatasync`` before the turn's reply is sent, so a SIGKILL right after it loses nothing.

Limit: on a copy-on-write filesystem (btrfs, ZFS) an overwrite needs new blocks, so the reservation
guarantees nothing there; an append that fails is reported to the caller, which tells the person.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import struct
import zlib
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from gateway.util.diskspace import free_bytes

log = logging.getLogger("kith.spool")

SPOOL_FILE = "turns.spool"
MAGIC = b"kith-turn-spool\n"  # 16 bytes
_GENERATION = struct.Struct(">Q")
_HEADER = len(MAGIC) + _GENERATION.size
_RECORD = struct.Struct(">IIQ")  # payload length, CRC-32 (generation + payload), generation


@dataclass(frozen=True, slots=True, kw_only=True)
class SpooledTurn:
    """Everything the turn's writes after the reply need: the transcript's two rows, the dedupe key,
    the conversation's address, and where its session log goes (a group's log is the group's)."""

    turn_id: str
    session_id: str
    user_id: str
    channel: str
    conversation_key: str
    speaker: str
    text: str
    at: datetime
    reply: str
    reply_at: datetime
    group: bool = False
    message_id: str = ""  # the platform's message id: the dedupe key, with the channel
    conversation_id: str = ""  # the conversation's address (proactive messages)
    kind: str = "dm"
    persona: str = "default"

    def to_json(self) -> bytes:
        data = asdict(self)
        data["at"], data["reply_at"] = self.at.isoformat(), self.reply_at.isoformat()
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")

    @classmethod
    def from_json(cls, raw: bytes) -> SpooledTurn:
        data: dict[str, Any] = json.loads(raw.decode("utf-8", "surrogatepass"))
        data["at"] = datetime.fromisoformat(data["at"])
        data["reply_at"] = datetime.fromisoformat(data["reply_at"])
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


def _crc(generation: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(_GENERATION.pack(generation)))


class TurnSpool:
    """One spool file, held (``flock``) by one process at a time: the daemon that answers turns."""

    def __init__(self, data_dir: Path, size: int) -> None:
        self.path = Path(data_dir) / SPOOL_FILE
        self.size = max(int(size), 0)  # the size a new spool is allocated at
        self.fd: int | None = None
        self.capacity = 0  # the open file's size: records never go past it
        self.generation = 0
        self.end = _HEADER  # where the next record goes
        self.records: list[SpooledTurn] = []  # the current generation's records, in order

    @property
    def usable(self) -> bool:
        return self.fd is not None

    def open(self) -> bool:
        """Open the spool, allocating it when it does not exist (and there is room for it twice over:
        it should not take the last of the disk), and read what an earlier run left in it. False
        when there is no spool: another process holds it, no room, or it is turned off and empty."""
        try:
            return self._open()
        except OSError as exc:
            log.warning("turn spool %s cannot be used: %s; a turn the transcript cannot take is not kept,"
                        " and the person is told so", self.path, exc)
            self.close()
            return False

    def _open(self) -> bool:
        exists = self.path.is_file()
        if not exists:
            if self.size == 0 or free_bytes(self.path.parent) < 2 * self.size:
                return False
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._create()
        fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            log.warning("turn spool %s is held by another process; this one keeps no turns in it", self.path)
            return False
        self.fd = fd
        self.capacity = os.fstat(fd).st_size
        head = os.pread(fd, _HEADER, 0)
        if len(head) < _HEADER or not head.startswith(MAGIC):
            # Not a spool (a torn creation: the header is written last). Nothing can be in it.
            self._format(0)
        self.generation = _GENERATION.unpack(os.pread(fd, _GENERATION.size, len(MAGIC)))[0]
        self._scan()
        if not self.records and self.capacity != self.size:
            if self.size == 0:  # turned off (state.spool_mb: 0) and nothing left to write back
                self.close()
                self.path.unlink(missing_ok=True)
                return False
            self._resize()
        return True

    def _create(self) -> None:
        tmp = self.path.with_name(SPOOL_FILE + ".new")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, self.size)  # really allocated: a sparse file would reserve nothing
            os.pwrite(fd, MAGIC + _GENERATION.pack(0), 0)
            os.fsync(fd)
        except OSError:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(tmp, self.path)

    def _resize(self) -> None:
        """An empty spool of another size than configured (``state.spool_mb`` changed) takes the new size."""
        assert self.fd is not None
        if self.size > self.capacity:
            if free_bytes(self.path.parent) < 2 * (self.size - self.capacity):
                return
            os.posix_fallocate(self.fd, 0, self.size)
        else:
            os.ftruncate(self.fd, self.size)
        self.capacity = os.fstat(self.fd).st_size

    def _format(self, generation: int) -> None:
        assert self.fd is not None
        os.pwrite(self.fd, MAGIC + _GENERATION.pack(generation), 0)
        os.fsync(self.fd)

    def _scan(self) -> None:
        assert self.fd is not None
        self.records, offset = [], _HEADER
        while offset + _RECORD.size <= self.capacity:
            length, crc, generation = _RECORD.unpack(os.pread(self.fd, _RECORD.size, offset))
            if length == 0 or generation != self.generation or offset + _RECORD.size + length > self.capacity:
                break
            payload = os.pread(self.fd, length, offset + _RECORD.size)
            if _crc(generation, payload) != crc:
                break  # torn: the append never returned, so its turn's person was never answered by it
            try:
                self.records.append(SpooledTurn.from_json(payload))
            except (ValueError, TypeError, KeyError) as exc:
                log.error("turn spool %s: a record at byte %d cannot be read (%s); skipped", self.path, offset, exc)
            offset += _RECORD.size + length
        self.end = offset

    def add(self, turn: SpooledTurn) -> bool:
        """Append ``turn`` and flush it to the device; False when it was not kept (no spool, full, an
        I/O error): the caller tells the person."""
        if self.fd is None:
            return False
        payload = turn.to_json()
        if self.end + _RECORD.size + len(payload) > self.capacity:
            return False
        head = _RECORD.pack(len(payload), _crc(self.generation, payload), self.generation)
        try:
            os.pwrite(self.fd, head + payload, self.end)
            os.fdatasync(self.fd)
        except OSError as exc:
            log.error("turn spool %s: could not append turn %s: %s", self.path, turn.turn_id, exc)
            return False
        self.end += len(head) + len(payload)
        self.records.append(turn)
        return True

    def clear(self) -> None:
        """Every record is written back: the next generation starts, empty, at the start of the file.
        The records' bytes are zeroed first (blocks the file owns: no space needed), so no message
        stays on disk here after it is in the transcript, where erasing a person reaches it."""
        if self.fd is None:
            return
        zeros = b"\0" * (1024 * 1024)
        for offset in range(_HEADER, self.end, len(zeros)):
            os.pwrite(self.fd, zeros[: min(len(zeros), self.end - offset)], offset)
        self._format(self.generation + 1)
        self.generation += 1
        self.records, self.end = [], _HEADER

    def free(self) -> int:
        """Bytes left for records."""
        return max(self.capacity - self.end, 0) if self.fd is not None else 0

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)  # the lock goes with it
            self.fd = None
