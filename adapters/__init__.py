"""Channel adapters: each turns one platform's events into ``InboundMessage`` and sends replies back.

``websocket`` (web chat, ``kith chat``, third-party clients), ``telegram``, ``discord`` and
``nextcloud_talk`` implement ``gateway.adapter.Adapter`` and are registered by ``builtin``; the rest are
their shared helpers (body limits, rate limits, message splitting). Adapters may import the host's
public surface (``gateway.adapter``, ``gateway.types``, ``gateway.config``, ``gateway.hookspecs``,
``gateway.http``), never ``plugins``; the host never imports them.
"""
