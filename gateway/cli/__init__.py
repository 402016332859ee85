"""The ``kith`` command line: ``main`` dispatches to one module per command group.

Commands are clients of the host: they build a ``Gateway`` or talk to the running daemon's HTTP API,
and may import any host module; never adapters or plugins (the daemon loads those by name).
"""
