"""Redis Streams job bus and cron scheduler (docs/jobs.md).

Here live the bus (enqueue, workers, retries, dead letters), the embedded redis-server, the cron
scheduler with its per-user slots, the job registry and the context a job runs with. It may import
``gateway.config`` and the host's registry; never ``memory``, ``state``, adapters or plugins: a job
reaches the gateway through its ``JobContext``.
"""

from gateway.bus.bus import JobBus
from gateway.bus.clock import Clock, ManualClock, SystemClock
from gateway.bus.context import JobContext
from gateway.bus.cronusers import UserDirectory
from gateway.bus.errors import BusError, PayloadError, ServerError, UnknownJob
from gateway.bus.registry import JobRegistry, JobSpec
from gateway.bus.status import DeadLetter, QueueStatus

__all__ = [
    "BusError",
    "Clock",
    "DeadLetter",
    "JobBus",
    "JobContext",
    "JobRegistry",
    "JobSpec",
    "ManualClock",
    "PayloadError",
    "QueueStatus",
    "ServerError",
    "SystemClock",
    "UnknownJob",
    "UserDirectory",
]
