"""Files uploaded over HTTP (``POST /api/uploads``) and waiting for the message that uses them.

They are held in memory, never on disk: an upload becomes a file in the person's tree only once a
message takes it in (and never in an Off-The-Record session), so an upload nobody sends is simply
forgotten after ``upload_ttl_s``. Each upload belongs to the person who sent it; a message can only
use its own, and its person can take it back (``cancel``, ``DELETE /api/uploads/{id}``). What is held
is capped for everyone together (``upload_total_bytes``, so uploads cannot fill the daemon's memory)
and for each person (``upload_person_bytes``, well under it, so one person cannot use up everyone's
budget: issue 27).
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.media.errors import TooLarge
from gateway.media.limits import DEFAULT_LIMITS, MediaLimits, media_limits
from gateway.media.names import clean_name
from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.services import Services


@dataclass(frozen=True, slots=True)
class Upload:
    upload_id: str
    user_id: str
    name: str
    mime_type: str  # as the client declared it; the pipeline sniffs the real type
    data: bytes
    at: float  # time.monotonic() when it arrived


class UploadStore:
    def __init__(self, limits: MediaLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self._uploads: dict[str, Upload] = {}
        self._lock = threading.Lock()

    def add(self, *, user_id: str, name: str, mime_type: str, data: bytes) -> Upload:
        name = clean_name(name)  # the sender's text: no control character reaches a log line or a path
        if len(data) > self.limits.max_bytes:
            raise TooLarge(f"{name or 'the file'} is {len(data):,} bytes; the limit is {self.limits.max_bytes:,}")
        with self._lock:
            self._expire()
            mine = [u for u in self._uploads.values() if u.user_id == user_id]
            if len(mine) >= 2 * self.limits.max_files:
                raise TooLarge(f"{len(mine)} of your uploads are waiting for a message already; send them first")
            person_cap = min(self.limits.upload_person_bytes, self.limits.upload_total_bytes)
            mine_bytes = sum(len(u.data) for u in mine)
            if mine_bytes + len(data) > person_cap:
                raise TooLarge(f"your uploads waiting for a message hold {mine_bytes:,} bytes, and this one would "
                               f"take them past {person_cap:,}; send them or remove one first")  # fmt: skip
            held = sum(len(u.data) for u in self._uploads.values())
            if held + len(data) > self.limits.upload_total_bytes:
                raise TooLarge("too many uploads are waiting to be sent; send or wait a moment and try again")
            upload = Upload(upload_id="up_" + secrets.token_urlsafe(18), user_id=user_id, name=name,
                            mime_type=mime_type, data=data, at=time.monotonic())  # fmt: skip
            self._uploads[upload.upload_id] = upload
            return upload

    def get(self, upload_id: str, *, user_id: str) -> Upload | None:
        """The upload if it is still held and ``user_id``'s; None otherwise (another's is unknown)."""
        with self._lock:
            self._expire()
            upload = self._uploads.get(upload_id)
        return upload if upload is not None and upload.user_id == user_id else None

    def held_by(self, user_id: str) -> int:
        """Bytes of ``user_id``'s uploads waiting for a message (what counts against their budget)."""
        with self._lock:
            self._expire()
            return sum(len(u.data) for u in self._uploads.values() if u.user_id == user_id)

    def cancel(self, upload_id: str, *, user_id: str) -> bool:
        """Drop ``user_id``'s upload (the person removed it before sending); whether there was one.
        Another person's upload is left alone and reported as unknown."""
        with self._lock:
            self._expire()
            upload = self._uploads.get(upload_id)
            if upload is None or upload.user_id != user_id:
                return False
            del self._uploads[upload_id]
            return True

    def take(self, upload_id: str) -> Upload | None:
        """Hand the upload over once: the message that uses it owns the bytes from now on."""
        with self._lock:
            self._expire()
            return self._uploads.pop(upload_id, None)

    def _expire(self) -> None:
        cutoff = time.monotonic() - self.limits.upload_ttl_s
        for key in [k for k, u in self._uploads.items() if u.at < cutoff]:
            del self._uploads[key]


UPLOADS: StashKey[UploadStore] = StashKey()


def uploads(gateway: Services) -> UploadStore:
    """The gateway's pending uploads (one store per gateway, so two gateways in a process never share)."""
    return gateway.stash.setdefault(UPLOADS, UploadStore(media_limits(gateway)))
