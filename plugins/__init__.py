"""The built-in stages of a turn and the background jobs, as pluggy hook implementations.

One module (or package, ``tools``) per plugin, each loaded by name from ``gateway.plugins.BUILTIN_PLUGINS``
and switched off like a third-party plugin (``plugins.deny``). A plugin implements hooks and registers
jobs and tools; the work itself lives in the host (``gateway.memory.*`` for the memory stages). Plugins
may import the host (``gateway.*``), never ``adapters``; one plugin imports another only for shared
constants (``persona`` reads the file names of ``tools``).
"""
