"""The daemon's one HTTP server, minus the application object: what guards it and what the operator calls.

Here live the guard every route sits behind (``guard``: Host allowlist, proxy headers, Origin, operator
token, JSON-only POSTs; docs/security.md), the operator credential and token comparison (``auth``), the
accept loop that backs off when file descriptors run out (``accept``) and the operator API routes
(``operator_api``: ``/context`` and ``/memory/*``). ``gateway.app`` builds the aiohttp application and
installs these; adapters (``/ws``, webhooks) and plugins (``/distill/*``) use ``guard`` and ``auth`` for
their own routes. It may import ``gateway.config``, the host's leaf modules and ``gateway.explain`` /
``gateway.memory`` for what the operator API answers; never adapters or plugins.
"""
