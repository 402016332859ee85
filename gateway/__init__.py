"""kith's host: the gateway that runs turns, owns state, memory, the job bus and the HTTP server.

Here live the turn protocol and its hooks, configuration, the adapter contract, the budgeter, tools,
access, sessions and commands at the top level, and one subpackage per larger concept (``state``,
``http``, ``identity``, ``memory``, ``llm``, ``bus``, ``personas``, ``cli``, ``web``) whose own
docstring names what it may import. Nothing in ``gateway`` imports ``adapters`` or ``plugins``:
adapters implement ``gateway.adapter`` and plugins are loaded by name (``gateway.plugins``).
"""
