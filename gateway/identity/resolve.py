"""The default ``gateway_resolve_identity``: the person behind a (channel, account), from ``Identities``.

A built-in plugin of its own, apart from ``gateway/identity/users.py``: ``Identities`` is a service the
gateway holds (``Services.identities``), and a hook implementation takes the gateway, which sits above
it (tests/core/test_import_cycles.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.types import InboundMessage, UserRef

if TYPE_CHECKING:
    from gateway.services import Services


@hookimpl(trylast=True)
def gateway_resolve_identity(gateway: Services, message: InboundMessage) -> UserRef | None:
    return gateway.identities.resolve(message)
