"""What a job handler receives besides its payload."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class JobContext:
    """``handler(ctx, payload)``: the job's identity, its attempt, and a way to prove it is alive.

    Heartbeats run automatically for every running job while the event loop is free. A handler
    that blocks the loop (CPU work not moved to a thread) starves them: call ``await ctx.heartbeat()``
    between chunks; it returns False when the job was claimed by another worker (stop early then,
    the other delivery will do the work).
    """

    gateway: Any  # opaque to the bus: what ctx_factory returned (None in tests)
    bus: Any  # the JobBus, to enqueue follow-up jobs
    job_id: str
    name: str
    attempt: int  # 1-based delivery number across retries and redeliveries
    max_tries: int
    enqueued_ms: int  # server time of the first enqueue
    heartbeat: Callable[[], Awaitable[bool]]
