"""The daemon's one HTTP server, minus the application object: what guards it and who is asking.

Here live the guard every route sits behind (``guard``: Host allowlist, proxy headers, Origin,
JSON-only changes; docs/security.md), the operator credential and token comparison (``auth``), who a
request is (``principal``, the one answer to "may this caller do that"), sign-in (``signin``), the
accept loop that backs off when file descriptors run out (``accept``) and the ``/api`` package: every
route the daemon serves as an API, declared with its models, registered through
``gateway_register_routes`` and listed in the OpenAPI document (``openapi``). ``gateway.app`` builds
the aiohttp application and installs these. It may import ``gateway.config``, the host's leaf modules
and what the API answers from (``gateway.turn.explain``, ``gateway.memory``...); never adapters or plugins.
"""
