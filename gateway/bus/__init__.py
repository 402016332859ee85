"""Redis Streams job bus and cron scheduler (docs/jobs.md)."""

from gateway.bus.bus import JobBus
from gateway.bus.clock import Clock, ManualClock, SystemClock
from gateway.bus.context import JobContext
from gateway.bus.errors import BusError, PayloadError, ServerError, UnknownJob
from gateway.bus.registry import JobRegistry, JobSpec, specs_from_plugins
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
    "specs_from_plugins",
]
