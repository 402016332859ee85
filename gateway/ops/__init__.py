"""Running kith as a service: Prometheus metrics (``metrics``, served as ``/metrics`` by ``http``),
``kith doctor`` checks (``doctor``), backups (``backup``, ``restore``) and systemd units
(``service``). docs/operations.md and docs/deployment.md describe them.

Imports the host's lower layers (config, state, bus, memory) and nothing from adapters/ or plugins/.
"""
