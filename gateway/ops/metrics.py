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

from bisect import bisect_left
from collections.abc import Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Counter, ProcessCollector
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from gateway.types import StashKey

REGISTRY: Final = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)  # RSS, CPU seconds, open descriptors, start time of this process

# Sub-millisecond stages (a plugin's context section) up to a slow model answer.
STAGE_BUCKETS: Final = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                        0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

TURNS: Final = Counter("kith_turns", "Turns handled, by channel and outcome", ("channel", "outcome"),
                       registry=REGISTRY)


class FastHistogram:
    """A histogram for the hot path: one ``bisect`` and two list updates per observation (about
    0.3 us, against about 6 us for ``prometheus_client.Histogram.observe`` with its per-bucket locks
    on this machine), rendered by prometheus_client at scrape time. Observed on the event loop (hooks
    and turns run there); a rare update lost to a race between threads would only undercount."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...], buckets: tuple[float, ...],
                 registry: CollectorRegistry) -> None:  # fmt: skip
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self.bounds = buckets
        # label values -> [count per bucket (the last one: +Inf), sum]
        self.series: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}
        registry.register(self)  # type: ignore[arg-type]

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        series = self.series.get(labels)
        if series is None:
            series = self.series[labels] = ([0] * (len(self.bounds) + 1), [0.0])
        series[0][bisect_left(self.bounds, value)] += 1
        series[1][0] += value

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, (counts, total) in list(self.series.items()):
            cumulative, buckets = 0, []
            for bound, n in zip((*self.bounds, float("inf")), counts, strict=True):
                cumulative += n
                buckets.append((floatToGoString(bound), cumulative))
            family.add_metric(list(labels), buckets, total[0])
        yield family


TURN_SECONDS: Final = FastHistogram("kith_turn_seconds", "Whole turn, message in to reply out (model included)",
                                    ("channel",), STAGE_BUCKETS, REGISTRY)
STAGE_SECONDS: Final = FastHistogram("kith_stage_seconds", "One hook implementation (a stage of a turn or of "
                                     "the daemon), by hook and plugin", ("stage", "plugin"), STAGE_BUCKETS,
                                     REGISTRY)
LLM_TOKENS: Final = Counter("kith_llm_tokens", "Model tokens by role and kind (input, output, cache_read, "
                            "cache_write)", ("role", "kind"), registry=REGISTRY)
LLM_COST: Final = Counter("kith_llm_cost_usd", "Model cost in US dollars by role (llm.prices)", ("role",),
                          registry=REGISTRY)
LLM_CALLS: Final = Counter("kith_llm_calls", "Model calls answered by a configured provider, by role",
                           ("role",), registry=REGISTRY)

#: Set by the turn protocol when a turn ends in an error notice (``model_error`` or ``error``), so the
#: count tells a failed turn from a command's answer; both come back as a notice.
OUTCOME: Final = StashKey[str]()

_stage_labels: dict[tuple[str, str], tuple[str, str]] = {}  # (hook, plugin) -> labels, prefix cut once
_turn_counters: dict[tuple[str, str], Counter] = {}  # ``labels()`` takes a lock and builds a tuple each call


def observe_stage(hook_name: str, plugin: str, seconds: float) -> None:
    key = (hook_name, plugin)
    labels = _stage_labels.get(key)
    if labels is None:
        labels = _stage_labels[key] = (hook_name.removeprefix("gateway_"), plugin)
    STAGE_SECONDS.observe(labels, seconds)


def observe_turn(channel: str, outcome: str, seconds: float) -> None:
    key = (channel, outcome)
    counter = _turn_counters.get(key)
    if counter is None:
        counter = _turn_counters[key] = TURNS.labels(channel=channel, outcome=outcome)
    counter.inc()
    TURN_SECONDS.observe((channel,), seconds)


def observe_llm(role: str, *, input_tokens: int, output_tokens: int, cache_read_tokens: int,
                cache_write_tokens: int, cost_usd: float) -> None:
    LLM_CALLS.labels(role=role).inc()
    for kind, n in (("input", input_tokens), ("output", output_tokens), ("cache_read", cache_read_tokens),
                    ("cache_write", cache_write_tokens)):
        if n:
            LLM_TOKENS.labels(role=role, kind=kind).inc(n)
    if cost_usd:
        LLM_COST.labels(role=role).inc(cost_usd)
