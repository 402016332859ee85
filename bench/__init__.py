"""``kith bench ...``: benchmarks printing JSON (docs/benchmarks.md), one module per benchmark.

Benchmarks drive the real host (``gateway.*``) with synthetic or public data and may load built-in
plugins by name; nothing in ``gateway``, ``adapters`` or ``plugins`` imports them.
"""
