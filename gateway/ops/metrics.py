"""The daemon's Prometheus collectors, module-level, in one registry of their own (``REGISTRY``).

Counted where things happen (cheap: a cached child and one ``observe``/``inc``):

* ``kith_turns_total{channel,outcome}`` and ``kith_turn_seconds{channel}``: ``Gateway.handle_inbound``;
  outcome ``replied`` | ``notice`` (commands, refusals) | ``dropped`` (filtered, denied, duplicate) |
  ``model_error`` | ``error``.
* ``kith_stage_seconds{stage,plugin}``: every hook implementation, timed in ``gateway/hookcall.py``
  (stage = the hook without its ``gateway_`` prefix: ``context_sections`` by the ``recall`` plugin is
  the recall stage, ``llm_call`` the model call, ``after_turn`` the session log and job enqueueing).
* ``kith_llm_tokens_total{role,kind}``, ``kith_llm_cost_usd_total{role}``, ``kith_llm_calls_total{role}``:
  ``gateway/llm/usage.py``, under the same rule as the usage table (Off-The-Record turns count nothing).

What is a level rather than an event (jobs by state, dead letters, adapter states, index size, disk
space) is read when Prometheus scrapes (``gateway/ops/scrape.py``). Several gateways in one process
(tests) share these counters; each scrape reads its own gateway's levels.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector

from gateway.types import StashKey

REGISTRY: Final = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)  # RSS, CPU seconds, open descriptors, start time of this process

# Sub-millisecond stages (a plugin's context section) up to a slow model answer.
STAGE_BUCKETS: Final = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                        0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

TURNS: Final = Counter("kith_turns", "Turns handled, by channel and outcome", ("channel", "outcome"),
                       registry=REGISTRY)
TURN_SECONDS: Final = Histogram("kith_turn_seconds", "Whole turn, message in to reply out (model included)",
                                ("channel",), buckets=STAGE_BUCKETS, registry=REGISTRY)
STAGE_SECONDS: Final = Histogram("kith_stage_seconds", "One hook implementation (a stage of a turn or of the "
                                 "daemon), by hook and plugin", ("stage", "plugin"), buckets=STAGE_BUCKETS,
                                 registry=REGISTRY)
LLM_TOKENS: Final = Counter("kith_llm_tokens", "Model tokens by role and kind (input, output, cache_read, "
                            "cache_write)", ("role", "kind"), registry=REGISTRY)
LLM_COST: Final = Counter("kith_llm_cost_usd", "Model cost in US dollars by role (llm.prices)", ("role",),
                          registry=REGISTRY)
LLM_CALLS: Final = Counter("kith_llm_calls", "Model calls answered by a configured provider, by role",
                           ("role",), registry=REGISTRY)

#: Set by the turn protocol when a turn ends in an error notice (``model_error`` or ``error``), so the
#: count tells a failed turn from a command's answer; both come back as a notice.
OUTCOME: Final = StashKey[str]()

# Label children are looked up once: ``labels()`` takes a lock and builds a tuple on every call.
_stage_children: dict[tuple[str, str], Histogram] = {}
_turn_children: dict[str, Histogram] = {}


def observe_stage(hook_name: str, plugin: str, seconds: float) -> None:
    key = (hook_name, plugin)
    child = _stage_children.get(key)
    if child is None:
        stage = hook_name.removeprefix("gateway_")
        child = _stage_children[key] = STAGE_SECONDS.labels(stage=stage, plugin=plugin)
    child.observe(seconds)


def observe_turn(channel: str, outcome: str, seconds: float) -> None:
    TURNS.labels(channel=channel, outcome=outcome).inc()
    child = _turn_children.get(channel)
    if child is None:
        child = _turn_children[channel] = TURN_SECONDS.labels(channel=channel)
    child.observe(seconds)


def observe_llm(role: str, *, input_tokens: int, output_tokens: int, cache_read_tokens: int,
                cache_write_tokens: int, cost_usd: float) -> None:
    LLM_CALLS.labels(role=role).inc()
    for kind, n in (("input", input_tokens), ("output", output_tokens), ("cache_read", cache_read_tokens),
                    ("cache_write", cache_write_tokens)):
        if n:
            LLM_TOKENS.labels(role=role, kind=kind).inc(n)
    if cost_usd:
        LLM_COST.labels(role=role).inc(cost_usd)
