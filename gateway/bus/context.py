"""What a job handler receives besides its payload."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

#: What the bus's ``ctx_factory`` returns: the gateway (``gateway.services.Services``), None in tests.
#: A type parameter, not an import: the bus sits below the gateway and knows nothing of it.
G = TypeVar("G")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobContext(Generic[G]):
    """``handler(ctx, payload)``: the job's identity, its attempt, and a way to prove it is alive.

    Heartbeats run automatically for every running job while the event loop is free. A handler
    that blocks the loop (CPU work not moved to a thread) starves them: call ``await ctx.heartbeat()``
    between chunks; it returns False when the job was claimed by another worker (stop early then,
    the other delivery will do the work).
    """

    gateway: G  # opaque to the bus: what ctx_factory returned (handlers: ``JobContext[Services]``)
    bus: Any  # the JobBus, to enqueue follow-up jobs
    job_id: str
    name: str
    attempt: int  # 1-based delivery number across retries and redeliveries
    max_tries: int
    enqueued_ms: int  # server time of the first enqueue
    heartbeat: Callable[[], Awaitable[bool]]
