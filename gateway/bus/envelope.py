"""What travels on the bus: a versioned JSON envelope, never pickle.

A stream entry carries ``id`` (job id), ``name``, ``payload`` (a JSON object as text), ``v`` (envelope
version), ``enq`` (first enqueue, server ms) and ``prior`` (deliveries of earlier entries of the same
job: a retry after backoff is a new entry, and the delivery cap counts across all of them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.bus.errors import PayloadError

ENVELOPE_VERSION = 1
_JOB_ID = re.compile(r"^[\x21-\x7e]{1,200}$")  # printable ASCII, no spaces: safe in keys and logs


def check_job_id(job_id: str) -> str:
    if not _JOB_ID.match(job_id):
        raise PayloadError(f"job_id must be 1-200 printable ASCII characters without spaces: {job_id!r}")
    return job_id


def encode_payload(payload: Mapping[str, Any] | None, max_bytes: int) -> str:
    """JSON-encode a payload object. The size cap keeps message text off the bus: pass ids."""
    if payload is None:
        payload = {}
    if not isinstance(payload, Mapping):
        raise PayloadError(f"payload must be a JSON object (mapping), got {type(payload).__name__}")
    try:
        text = json.dumps(payload, separators=(",", ":"), sort_keys=True, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise PayloadError(f"payload is not JSON-serialisable: {exc}") from exc
    if len(text.encode()) > max_bytes:
        raise PayloadError(
            f"payload is {len(text.encode())} bytes, over bus.max_payload_bytes={max_bytes}: "
            "jobs carry ids (turn, session, user), not message text"
        )
    return text


def fields_to_dict(flat: Sequence[Any] | Mapping[str, Any]) -> dict[str, str]:
    """Stream fields arrive as a mapping from redis-py and as a flat list from Lua."""
    if isinstance(flat, Mapping):
        return {str(k): str(v) for k, v in flat.items()}
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat), 2)}


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery of one stream entry to this worker."""

    stream: str
    msg_id: str
    job_id: str
    name: str
    payload_text: str
    version: int
    enqueued_ms: int
    deliveries: int  # total, across retries, including this one

    @classmethod
    def from_fields(cls, stream: str, msg_id: str, fields: Mapping[str, str], times_delivered: int) -> Delivery:
        return cls(
            stream=stream,
            msg_id=msg_id,
            job_id=fields.get("id", ""),
            name=fields.get("name", ""),
            payload_text=fields.get("payload", "{}"),
            version=int(fields.get("v", "0") or 0),
            enqueued_ms=int(fields.get("enq", "0") or 0),
            deliveries=int(fields.get("prior", "0") or 0) + times_delivered,
        )

    def payload(self) -> dict[str, Any]:
        if self.version != ENVELOPE_VERSION:
            raise PayloadError(f"unsupported envelope version {self.version} (this worker reads {ENVELOPE_VERSION})")
        value = json.loads(self.payload_text)
        if not isinstance(value, dict):
            raise PayloadError("payload is not a JSON object")
        return value
