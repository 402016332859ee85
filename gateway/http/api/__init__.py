"""The daemon's HTTP/JSON API under ``/api`` (docs/api.md): one module per concept, each with a
``ROUTES`` list of declarations (``spec.Route``) that both serve the route and describe it in the
OpenAPI document served at ``/api/openapi.json`` (``gateway/http/openapi.py``).

Every route is registered through ``gateway_register_routes`` (``registry.py``): the host's own table
(``table.py``, a built-in plugin) exactly as a plugin's routes, and the gateway mounts what was
registered. Who may call what is decided only by ``gateway/http/principal.py``: a person reaches their
own ``/api/users/{uid}/...`` (``me`` names them), the operator every user's, and routes declared
``operator=True`` (``x-operator`` in the document) need the operator role. Imports: the host
(``gateway.*``), never ``adapters`` or ``plugins``.
"""
