"""Async-aware hook calling with per-plugin fault isolation.

pluggy has no async support: an ``async def`` implementation returns a coroutine, which is never
``None``, so ``firstresult`` through ``pm.hook.x()`` would always stop at the first async plugin.
Here every implementation is called and awaited one by one, in pluggy's order.

These are the mechanics under ``gateway.hooks.Hooks``, whose typed methods (one per hook) are the only
callers: nothing else names a hook by string (tests/core/test_import_rules.py).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from time import perf_counter
from typing import Any

import pluggy

from gateway.ops.metrics import observe_stage
from gateway.registry import Registry

log = logging.getLogger("kith.hooks")


class HookFailed(Exception):
    """Raised by ``call_first(..., stop_on_failure=True)``: the plugin that took the call failed (logged).

    For hooks where skipping to the next plugin would give the caller a wrong answer: a command whose
    handler broke must not come back as "Unknown command"."""

    def __init__(self, hook_name: str, plugin_name: str) -> None:
        super().__init__(f"plugin {plugin_name} failed in {hook_name}")
        self.plugin_name = plugin_name


class HookCaller:
    """Calls the hooks of one plugin manager with a per-hook timeout."""

    def __init__(self, pm: pluggy.PluginManager, *, timeout_s: float = 5.0) -> None:
        self.pm = pm
        self.timeout_s = timeout_s
        self.failures: dict[str, int] = {}

    def _impls(self, hook_name: str) -> list[pluggy.HookImpl]:
        hook = getattr(self.pm.hook, hook_name)
        # pluggy keeps impls in call order reversed (last registered is called first).
        return list(reversed(hook.get_hookimpls()))

    async def _call_one(
        self, hook_name: str, impl: pluggy.HookImpl, kwargs: dict[str, Any], timeout: float | None
    ) -> tuple[bool, Any]:
        """Returns (ok, result). Exceptions and timeouts are logged with the plugin's name."""
        args = [kwargs[name] for name in impl.argnames]
        started = perf_counter()  # every stage's latency: kith_stage_seconds (gateway/ops/metrics.py)
        try:
            result = impl.function(*args)
            if inspect.isawaitable(result):
                result = await asyncio.wait_for(result, timeout) if timeout else await result
            return True, result
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            self._record_failure(impl.plugin_name)
            log.error("plugin %s timed out in %s after %.1fs; skipped", impl.plugin_name, hook_name, timeout)
            return False, None
        except Exception:
            self._record_failure(impl.plugin_name)
            log.exception("plugin %s failed in %s; skipped", impl.plugin_name, hook_name)
            return False, None
        finally:
            observe_stage(hook_name, impl.plugin_name, perf_counter() - started)

    def _record_failure(self, plugin_name: str) -> None:
        self.failures[plugin_name] = self.failures.get(plugin_name, 0) + 1

    async def call_all(self, hook_name: str, *, timeout: float | None = -1.0, **kwargs: Any) -> list[Any]:
        """Await every implementation; return the non-None results in call order.

        A plugin that raises or exceeds the timeout is logged and skipped; the others still run.
        """
        t = self.timeout_s if timeout == -1.0 else timeout
        results = []
        for impl in self._impls(hook_name):
            ok, result = await self._call_one(hook_name, impl, kwargs, t)
            if ok and result is not None:
                results.append(result)
        return results

    async def call_first(
        self, hook_name: str, *, timeout: float | None = -1.0, isolate: bool = True, stop_on_failure: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Await implementations in order; return the first non-None awaited result.

        With ``isolate=False`` a failing implementation propagates (decision hooks whose failure
        must be loud, like the turn protocol itself). With ``stop_on_failure`` a failing one is logged
        and counted like any isolated failure, then ``HookFailed`` ends the call.
        """
        t = self.timeout_s if timeout == -1.0 else timeout
        for impl in self._impls(hook_name):
            if isolate:
                ok, result = await self._call_one(hook_name, impl, kwargs, t)
                if not ok:
                    if stop_on_failure:
                        raise HookFailed(hook_name, impl.plugin_name)
                    continue
            else:
                args = [kwargs[name] for name in impl.argnames]
                started = perf_counter()
                try:
                    result = impl.function(*args)
                    if inspect.isawaitable(result):
                        result = await asyncio.wait_for(result, t) if t else await result
                finally:
                    observe_stage(hook_name, impl.plugin_name, perf_counter() - started)
            if result is not None:
                return result
        return None

    def call_historic(self, hook_name: str, **kwargs: Any) -> None:
        """Bootstrap hooks (``gateway_addhooks``, ``gateway_configure``): sync, and replayed to any
        plugin registered later. A failure propagates: it refuses startup with the plugin's reason."""
        getattr(self.pm.hook, hook_name).call_historic(kwargs=kwargs)

    def call_register(self, hook_name: str, registry: Registry[Any], **kwargs: Any) -> None:
        """Registration hooks: each implementation gets ``registry`` as ``register``, attributed to its
        plugin. A plugin that raises (or is async) becomes one of the registry's problems: collection
        goes on, so start-up reports every problem at once."""
        kwargs = {**kwargs, "register": registry}
        for impl in self._impls(hook_name):
            args = [kwargs[name] for name in impl.argnames]
            with registry.attributed(impl.plugin_name):
                try:
                    result = impl.function(*args)
                    if inspect.isawaitable(result):
                        result.close()  # type: ignore[attr-defined]
                        raise TypeError(f"{hook_name} must be a plain function, not async")
                except Exception as exc:
                    log.exception("plugin %s failed in %s", impl.plugin_name, hook_name)
                    registry.problem(f"failed in {hook_name}: {type(exc).__name__}: {exc}")
