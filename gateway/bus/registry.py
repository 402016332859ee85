"""Jobs registered by plugins through ``gateway_register_jobs(register)``.

Built-ins register exactly as third parties do: ``register(handler, name=..., timeout=...,
max_tries=..., cron=..., per_user=...)``. Names are checked once, at startup, so a typo or a clash
between two plugins stops the daemon with a reason instead of leaving a queue nobody reads.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from croniter import croniter

from gateway.bus.errors import BusError

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
        # Five fields only: the scheduler ticks once a minute, so a seconds field would lie.
        if self.cron is not None and (
            (len(self.cron.split()) != 5 and self.cron not in _ALIASES) or not croniter.is_valid(self.cron)
        ):
            raise BusError(f"job {self.name!r}: invalid cron expression {self.cron!r} (5 fields expected)")


class JobRegistry:
    """Collects JobSpecs; ``register`` is the callable handed to the hook."""

    def __init__(self) -> None:
        self._specs: dict[str, JobSpec] = {}
        self.current_plugin = ""

    def register(
        self,
        handler: Handler,
        *,
        name: str | None = None,
        timeout: float | None = None,
        max_tries: int | None = None,
        cron: str | None = None,
        per_user: bool = True,
    ) -> JobSpec:
        spec = JobSpec(
            name=name or str(getattr(handler, "__name__", "")),
            handler=handler,
            timeout=timeout,
            max_tries=max_tries,
            cron=cron,
            per_user=per_user,
            plugin=self.current_plugin,
        )
        if spec.name in self._specs:
            other = self._specs[spec.name].plugin or "?"
            raise BusError(f"job {spec.name!r} registered twice ({other} and {spec.plugin or '?'})")
        self._specs[spec.name] = spec
        return spec

    def add(self, specs: Iterable[JobSpec]) -> None:
        for spec in specs:
            if spec.name in self._specs:
                raise BusError(f"job {spec.name!r} registered twice")
            self._specs[spec.name] = spec

    @property
    def specs(self) -> list[JobSpec]:
        return list(self._specs.values())

    def as_map(self) -> Mapping[str, JobSpec]:
        return dict(self._specs)


def specs_from_plugins(pm: Any) -> list[JobSpec]:
    """Call ``gateway_register_jobs`` on every plugin of a pluggy manager, attributing each job.

    The hook is sync, so impls are called directly, one by one, which also tells us the plugin name.
    """
    registry = JobRegistry()
    for impl in reversed(pm.hook.gateway_register_jobs.get_hookimpls()):
        registry.current_plugin = impl.plugin_name
        impl.function(**({"register": registry.register} if "register" in impl.argnames else {}))
    registry.current_plugin = ""
    return registry.specs
