"""Jobs registered by plugins through ``gateway_register_jobs(register)``.

Built-ins register exactly as third parties do: ``register(handler, name=..., timeout=...,
max_tries=..., cron=..., per_user=..., needs_index=...)``. Specs and names are checked once, at
startup, with the adapters and tools (gateway/registry.py), so a typo or a clash between two plugins
stops the daemon with every reason at once instead of leaving a queue nobody reads.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from croniter import croniter

from gateway.bus.errors import BusError
from gateway.registry import Registry

if TYPE_CHECKING:
    from gateway.bus.context import JobContext

Handler = Callable[["JobContext", dict[str, Any]], Awaitable[None] | None]
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_ALIASES = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """One kind of job. ``max_tries``/``timeout`` None = the bus defaults (``bus.max_tries``...)."""

    name: str
    handler: Handler
    timeout: float | None = None
    max_tries: int | None = None
    cron: str | None = None
    # Cron jobs fire once per user in that user's timezone; per_user=False fires once per slot in
    # the gateway's timezone (``timezone`` in config) with no user in the payload.
    per_user: bool = True
    # Needs the memory index itself: a ``kith worker`` without the index (the daemon holds the
    # embedded one) leaves these queues to the daemon's in-process workers.
    needs_index: bool = False
    # At most this many of this job at once in one worker (None: up to the worker's concurrency). For
    # a job that waits on one resource per process (the memory index's one embedding thread): more of
    # it in flight would only wait there, holding the slots every other job needs.
    concurrency: int | None = None
    plugin: str = ""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise BusError(f"job name {self.name!r} must match {_NAME.pattern}")
        if not callable(self.handler):
            raise BusError(f"job {self.name!r}: handler is not callable")
        if self.timeout is not None and self.timeout <= 0:
            raise BusError(f"job {self.name!r}: timeout must be > 0")
        if self.max_tries is not None and self.max_tries < 1:
            raise BusError(f"job {self.name!r}: max_tries must be >= 1")
        if self.concurrency is not None and self.concurrency < 1:
            raise BusError(f"job {self.name!r}: concurrency must be >= 1")
        # Five fields only: the scheduler ticks once a minute, so a seconds field would lie.
        if self.cron is not None and (
            (len(self.cron.split()) != 5 and self.cron not in _ALIASES) or not croniter.is_valid(self.cron)
        ):
            raise BusError(f"job {self.name!r}: invalid cron expression {self.cron!r} (5 fields expected)")


class JobRegistry(Registry[JobSpec]):
    """The ``register`` handed to ``gateway_register_jobs`` (gateway/registry.py has the policy)."""

    kind = "job"

    def __call__(
        self,
        handler: Handler,
        *,
        name: str | None = None,
        timeout: float | None = None,
        max_tries: int | None = None,
        cron: str | None = None,
        per_user: bool = True,
        needs_index: bool = False,
        concurrency: int | None = None,
    ) -> JobSpec | None:
        """Register a job; None (and a problem reported at start-up) when the spec is invalid or taken."""
        try:
            spec = JobSpec(
                name=name or str(getattr(handler, "__name__", "")),
                handler=handler,
                timeout=timeout,
                max_tries=max_tries,
                cron=cron,
                per_user=per_user,
                needs_index=needs_index,
                concurrency=concurrency,
                plugin=self.plugin,
            )
        except BusError as exc:
            self.problem(str(exc))
            return None
        return spec if self.add(spec.name, spec) else None

    @property
    def specs(self) -> list[JobSpec]:
        return self.values()

